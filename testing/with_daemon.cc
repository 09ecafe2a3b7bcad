// with_daemon: runs a command against a fresh daemon, for tests not written in C++.
//
//   with_daemon --daemon PATH [--backend cpu] [--tune-budget S] [--keep] -- COMMAND ARGS...
//
// Starts `transposed` through testing::DaemonProcess (temporary directory, ephemeral port),
// runs COMMAND with TRANSPOSED_SERVER=127.0.0.1:PORT and TRANSPOSED_TEST_DIR=<daemon dir> in its
// environment, stops the daemon and exits with COMMAND's status (the daemon's log is printed
// when the command fails, or when the daemon does not stop cleanly).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "testing/daemon_process.h"

extern char** environ;

int main(int argc, char** argv) {
  transposed::testing::DaemonOptions options;
  bool keep = false;
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
    } else {
      std::cerr << "with_daemon: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  if (options.binary.empty() || i >= argc) {
    std::cerr << "usage: with_daemon --daemon PATH [--backend B] [--tune-budget S] [--keep] -- "
                 "COMMAND ARGS...\n";
    return 2;
  }
  transposed::testing::DaemonProcess daemon(options);
  if (auto s = daemon.Start(); !s.ok()) {
    std::cerr << "with_daemon: " << s.ToString() << "\n";
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
  if (code != 0) {
    std::cerr << "with_daemon: command exited " << code << "; daemon log:\n"
              << transposed::testing::ReadFileOrEmpty(daemon.log());
  } else if (!keep) {
    daemon.RemoveDir();
  }
  return code;
}
