#include "testing/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "testing/test_files.h"

extern char** environ;

namespace transposed::testing {
namespace fs = std::filesystem;

// GET http://127.0.0.1:port/path (HTTP/1.0); the body of a 200 answer, or "" with *error.
std::string HttpGet(int port, const std::string& path, std::string* error) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    *error = "socket failed";
    return "";
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
    }
  }
  close(fd);
  const auto body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 200", 0) != 0 && response.rfind("HTTP/1.0 200", 0) != 0) {
    *error = "not a 200 answer: " + response.substr(0, 200);
    return "";
  }
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The Prometheus text format: "name{label="v",...} value" per sample line -> value.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    samples[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return samples;
}

namespace {

std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

// Waits for pid up to `seconds`; true with *status when it exited.
bool WaitFor(pid_t pid, double seconds, int* status) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 || std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

DaemonProcess::DaemonProcess(DaemonOptions options) : options_(std::move(options)) {}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    if (!WaitFor(pid_, 30, &status)) {
      kill(pid_, SIGKILL);
      WaitFor(pid_, 10, &status);
    }
  }
}

Status DaemonProcess::Start() {
  if (pid_ > 0) return Status::FailedPrecondition("daemon already started");
  std::string root = options_.temp_root;
  if (root.empty()) {
    const char* t = std::getenv("TMPDIR");
    root = t != nullptr && *t != '\0' ? t : "/tmp";
  }
  if (dir_.empty()) {
    std::string pattern = root + "/transposed_test.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr)
      return Status::Internal("mkdtemp " + pattern + ": " + std::strerror(errno));
    dir_ = buf.data();
  }
  const fs::path port_file = dir_ / "port";
  std::error_code ignored;
  fs::remove(port_file, ignored);  // a restart: the last run's port

  std::vector<std::string> argv;
  if (options_.exact_args) {
    argv.push_back(options_.binary);
  } else {
    if (options_.run_as_uid >= 0) {
      const std::string id = std::to_string(options_.run_as_uid);
      if (chown(dir_.c_str(), options_.run_as_uid, options_.run_as_uid) != 0)
        return Status::Internal("chown " + dir_.string() + ": " + std::strerror(errno));
      argv = {"setpriv", "--reuid", id, "--regid", id, "--clear-groups", "--"};
    }
    argv.insert(argv.end(), {options_.binary,
                             "--listen", "127.0.0.1:0",
                             "--port-file", port_file.string(),
                             "--db", db().string(),
                             "--backend", options_.backend,
                             "--log-file", log().string(),
                             "--log-level", "info",
                             "--tune-budget", std::to_string(options_.tune_budget_seconds)});
  }
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string out = (dir_ / "daemon.out").string(), err = (dir_ / "daemon.err").string();
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int rc = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    return Status::Unavailable("posix_spawn " + options_.binary + ": " + std::strerror(rc));
  }
  if (options_.max_open_files > 0) {
    const struct rlimit limit = {static_cast<rlim_t>(options_.max_open_files),
                                 static_cast<rlim_t>(options_.max_open_files)};
    if (prlimit(pid_, RLIMIT_NOFILE, &limit, nullptr) != 0)
      return Status::Internal("prlimit(RLIMIT_NOFILE) of the daemon: " +
                              std::string(std::strerror(errno)));
  }

  if (options_.exact_args) return Status::OK();
  return WaitPort(port_file, options_.start_timeout_seconds);
}

Status DaemonProcess::WaitPort(const fs::path& port_file, double seconds) {
  if (pid_ <= 0) return Status::FailedPrecondition("daemon not running");
  const std::string err = (dir_ / "daemon.err").string();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    char* endp = nullptr;
    long port = text.empty() ? 0 : std::strtol(text.c_str(), &endp, 10);
    if (port > 0 && port < 65536 && endp != nullptr && *endp == '\0') {
      port_ = static_cast<int>(port);
      address_ = "127.0.0.1:" + std::to_string(port_);
      return Status::OK();
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable("the daemon exited before serving (" + DescribeWait(status) +
                                 ")\nstderr:\n" + ReadFile(err) + "\nlog:\n" +
                                 ReadFile(log()));
    }
    if (std::chrono::steady_clock::now() > end) {
      return Status::Unavailable("the daemon did not write its port file " + port_file.string() +
                                 " in time; log:\n" + ReadFile(log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int DaemonProcess::Wait(double seconds) {
  if (pid_ <= 0) return -1;
  int status = 0;
  if (!WaitFor(pid_, seconds, &status)) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Status DaemonProcess::Stop(double seconds) {
  if (pid_ <= 0) return Status::FailedPrecondition("daemon not running");
  kill(pid_, SIGTERM);
  int status = 0;
  if (!WaitFor(pid_, seconds, &status)) {
    kill(pid_, SIGKILL);
    WaitFor(pid_, 10, &status);
    pid_ = -1;
    return Status::Internal("the daemon did not exit within the timeout of SIGTERM");
  }
  pid_ = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::Internal("the daemon should exit 0 on SIGTERM, got " + DescribeWait(status));
  return Status::OK();
}

Status DaemonProcess::Signal(int sig) {
  if (pid_ <= 0) return Status::FailedPrecondition("daemon not running");
  if (kill(pid_, sig) != 0) return Status::Internal(std::string("kill: ") + std::strerror(errno));
  return Status::OK();
}

void DaemonProcess::RemoveDir() {
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

}  // namespace transposed::testing
