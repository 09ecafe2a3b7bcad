// with_daemon: runs a command against a fresh daemon, for tests not written in C++.
//
//   with_daemon --daemon PATH [--backend cpu] [--tune-budget S] [--daemon-arg ARG]...
//               [--copy-log FILE] [--keep] -- COMMAND ARGS...
//
// Starts `transposed` through testing::DaemonProcess (temporary directory, ephemeral port; each
// --daemon-arg appended to its command line, e.g. `--daemon-arg --worker --daemon-arg PATH`),
// runs COMMAND with TRANSPOSED_SERVER=127.0.0.1:PORT and TRANSPOSED_TEST_DIR=<daemon dir> in its
// environment, stops the daemon (it must exit 0 on SIGTERM) and exits with COMMAND's status, or
// 1 when COMMAND passed but the daemon did not stop cleanly. --copy-log: the daemon's whole log
// is copied to FILE once it has stopped (failing the run when it cannot be); without it, the log
// is printed when the run fails.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "testing/daemon_process.h"
#include "testing/test_files.h"

extern char** environ;

int main(int argc, char** argv) {
  transposed::testing::DaemonOptions options;
  bool keep = false;
  std::string copy_log;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--keep") {
      keep = true;
    } else if (i + 1 < argc && a == "--daemon") {
      options.binary = argv[++i];
    } else if (i + 1 < argc && a == "--backend") {
      options.backend = argv[++i];
    } else if (i + 1 < argc && a == "--tune-budget") {
      options.tune_budget_seconds = std::atof(argv[++i]);
    } else if (i + 1 < argc && a == "--daemon-arg") {
      options.extra_args.push_back(argv[++i]);
    } else if (i + 1 < argc && a == "--copy-log") {
      copy_log = argv[++i];
    } else {
      std::cerr << "with_daemon: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  if (options.binary.empty() || i >= argc) {
    std::cerr << "usage: with_daemon --daemon PATH [--backend B] [--tune-budget S] "
                 "[--daemon-arg ARG]... [--copy-log FILE] [--keep] -- COMMAND ARGS...\n";
    return 2;
  }
  transposed::testing::DaemonProcess daemon(options);
  // Copies the log where --copy-log asks; false (said on stderr) when it cannot.
  auto copy_the_log = [&]() {
    if (copy_log.empty()) return true;
    std::error_code ec;
    std::filesystem::copy_file(daemon.log(), copy_log,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) {
      std::cerr << "with_daemon: cannot copy the daemon's log " << daemon.log().string() << " to "
                << copy_log << ": " << ec.message() << "\n";
      return false;
    }
    return true;
  };
  if (auto s = daemon.Start(); !s.ok()) {
    std::cerr << "with_daemon: " << s.ToString() << "\n";
    copy_the_log();
    return 1;
  }
  setenv("TRANSPOSED_SERVER", daemon.address().c_str(), 1);
  setenv("TRANSPOSED_TEST_DIR", daemon.dir().c_str(), 1);
  std::cerr << "with_daemon: daemon at " << daemon.address() << " (" << daemon.dir().string()
            << ")\n";

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[i], nullptr, nullptr, argv + i, environ);
  int code = 127;
  if (rc != 0) {
    std::cerr << "with_daemon: cannot run " << argv[i] << ": " << std::strerror(rc) << "\n";
  } else {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  auto stopped = daemon.Stop();
  if (!stopped.ok()) {
    std::cerr << "with_daemon: " << stopped.ToString() << "\n";
    if (code == 0) code = 1;
  }
  if (!copy_the_log() && code == 0) code = 1;
  if (code != 0 && !copy_log.empty()) {
    std::cerr << "with_daemon: exit " << code << "; the daemon's log is in " << copy_log << "\n";
  } else if (code != 0) {
    std::cerr << "with_daemon: command exited " << code << "; daemon log:\n"
              << transposed::testing::ReadFile(daemon.log());
  } else if (!keep) {
    daemon.RemoveDir();
  }
  return code;
}
