#include "tuner/worker/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "tuner/worker/frame.h"

extern char** environ;

namespace transposed::worker {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Spawns path with args, its stdin and stdout dup'ed from child_in/child_out (may be equal);
// stderr from child_err, or inherited when child_err < 0. Signal mask cleared and
// SIGPIPE/SIGINT/SIGTERM set to default in the child.
StatusOr<pid_t> Spawn(const std::string& path, const std::vector<std::string>& args, int child_in,
                      int child_out, int child_err = -1) {
  std::vector<std::string> argv_s;
  argv_s.push_back(path);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child_in, 0);
  posix_spawn_file_actions_adddup2(&fa, child_out, 1);
  if (child_err >= 0) posix_spawn_file_actions_adddup2(&fa, child_err, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Status::Unavailable("cannot start " + path + ": " + std::strerror(rc));
  }
  return pid;
}

// waitpid with a deadline (polling); returns true and fills *wstatus once reaped.
bool WaitWithTimeout(pid_t pid, int* wstatus, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  for (;;) {
    pid_t r = waitpid(pid, wstatus, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) {
      *wstatus = 0;
      return true;  // not our child any more (already reaped elsewhere)
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

std::string DescribeWaitStatus(int wstatus) {
  if (WIFEXITED(wstatus)) return "exit code " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    const char* name = strsignal(sig);
    return "signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "status " + std::to_string(wstatus);
}

StderrFn LogStderrAs(std::string name) {
  return [name = std::move(name)](int pid, const std::string& line) {
    spdlog::warn("worker {} pid {}: {}", name, pid, line);
  };
}

WorkerProcess::WorkerProcess(std::string path, std::vector<std::string> args, StderrFn on_stderr)
    : path_(std::move(path)),
      args_(std::move(args)),
      on_stderr_(on_stderr ? std::move(on_stderr) : LogStderrAs(path_)) {}

WorkerProcess::~WorkerProcess() { Stop(); }

Status WorkerProcess::Start() {
  if (running()) return Status::OK();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Unavailable(Errno("socketpair"));
  }
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    return Status::Unavailable(Errno("pipe"));
  }
  auto pid = Spawn(path_, args_, sv[1], sv[1], err[1]);
  close(sv[1]);
  close(err[1]);
  if (!pid.ok()) {
    close(sv[0]);
    close(err[0]);
    return pid.status();
  }
  pid_ = *pid;
  fd_ = sv[0];
  last_exit_.clear();
  // Forwards the child's stderr line by line until it closes (the child exited). Lines are
  // capped so that a child writing without newlines cannot grow the buffer without bound.
  stderr_thread_ = std::thread([fd = err[0], pid = pid_, fn = on_stderr_] {
    constexpr size_t kMaxLine = 4096;
    std::string line;
    char buf[4096];
    for (;;) {
      ssize_t r = read(fd, buf, sizeof(buf));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      for (ssize_t i = 0; i < r; ++i) {
        if (buf[i] == '\n' || line.size() >= kMaxLine) {
          if (!line.empty()) fn(pid, line);
          line.clear();
          if (buf[i] == '\n') continue;
        }
        line.push_back(buf[i]);
      }
    }
    if (!line.empty()) fn(pid, line);
    close(fd);
  });
  return Status::OK();
}

void WorkerProcess::Reap(bool kill_first, double grace_s) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ > 0) {
    if (kill_first) kill(pid_, SIGKILL);
    int ws = 0;
    if (!WaitWithTimeout(pid_, &ws, grace_s)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &ws, 0);
      last_exit_ = DescribeWaitStatus(ws) + ", killed after not exiting";
    } else {
      last_exit_ = DescribeWaitStatus(ws);
    }
    pid_ = -1;
  }
  // The child is gone, so its stderr reaches end of file (unless it left a descendant holding
  // it, which our workers do not).
  if (stderr_thread_.joinable()) stderr_thread_.join();
}

bool WorkerProcess::ReapIfExited() {
  if (pid_ <= 0) return false;
  int ws = 0;
  if (waitpid(pid_, &ws, WNOHANG) != pid_) return false;
  last_exit_ = DescribeWaitStatus(ws);
  pid_ = -1;
  Reap(/*kill_first=*/false, 0);  // closes the connection and joins the stderr thread
  return true;
}

void WorkerProcess::Stop(double grace_s) { Reap(/*kill_first=*/false, grace_s); }

StatusOr<pb::Response> WorkerProcess::Call(const pb::Request& request, double timeout_s) {
  if (!running()) return Status::Unavailable("worker not running");
  Status s = WriteFrame(fd_, request.SerializeAsString());
  std::string payload;
  if (s.ok()) s = ReadFrame(fd_, &payload, static_cast<int>(std::ceil(timeout_s * 1000)));
  if (!s.ok()) {
    if (s.code() == StatusCode::kDeadlineExceeded) {
      Reap(/*kill_first=*/true, 10.0);
      return Status::Unavailable("timed out after " + std::to_string(static_cast<int>(timeout_s)) +
                                 " s; killed (" + last_exit_ + ")");
    }
    // EOF or a broken connection: the child is exiting or gone.
    Reap(/*kill_first=*/false, 5.0);
    return Status::Unavailable(last_exit_);
  }
  pb::Response response;
  if (!response.ParseFromString(payload) ||
      response.response_case() == pb::Response::RESPONSE_NOT_SET) {
    Reap(/*kill_first=*/true, 5.0);
    return Status::Unavailable("malformed response; killed (" + last_exit_ + ")");
  }
  if (response.has_error() && response.error().fatal()) {
    Reap(/*kill_first=*/false, 10.0);  // it exits by itself after a fatal answer
    return Status::Unavailable(response.error().message() + "; worker exited (" + last_exit_ +
                               ")");
  }
  return response;
}

StatusOr<std::string> RunAndCapture(const std::string& path, const std::vector<std::string>& args,
                                    double timeout_s, const StderrFn& on_stderr) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Unavailable(Errno("pipe"));
  int e[2] = {-1, -1};
  if (on_stderr && pipe2(e, O_CLOEXEC) != 0) {
    close(p[0]);
    close(p[1]);
    return Status::Unavailable(Errno("pipe"));
  }
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto pid = Spawn(path, args, devnull >= 0 ? devnull : p[1], p[1], e[1]);
  close(p[1]);
  if (e[1] >= 0) close(e[1]);
  if (devnull >= 0) close(devnull);
  if (!pid.ok()) {
    close(p[0]);
    if (e[0] >= 0) close(e[0]);
    return pid.status();
  }
  std::string out, err;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  bool timed_out = false;
  int fds[2] = {p[0], e[0]};  // -1 once closed (poll ignores negative fds)
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    int pr = poll(pfd, 2, static_cast<int>(left.count()));
    if (pr <= 0) continue;  // EINTR or the deadline: re-evaluated above
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || pfd[i].revents == 0) continue;
      char buf[4096];
      ssize_t r = read(fds[i], buf, sizeof(buf));
      if (r < 0 && errno == EINTR) continue;
      std::string& to = i == 0 ? out : err;
      if (r <= 0 || to.size() > (1 << 20)) {
        close(fds[i]);
        fds[i] = -1;
        continue;
      }
      to.append(buf, static_cast<size_t>(r));
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  if (timed_out) kill(*pid, SIGKILL);
  int ws = 0;
  if (!WaitWithTimeout(*pid, &ws, 10.0)) {
    kill(*pid, SIGKILL);
    waitpid(*pid, &ws, 0);
  }
  if (on_stderr) {
    size_t start = 0;
    while (start < err.size()) {
      size_t nl = err.find('\n', start);
      if (nl == std::string::npos) nl = err.size();
      if (nl > start) on_stderr(*pid, err.substr(start, std::min<size_t>(nl - start, 4096)));
      start = nl + 1;
    }
  }
  if (timed_out) return Status::DeadlineExceeded(path + " did not finish in time; killed");
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return Status::Unavailable(path + " failed: " + DescribeWaitStatus(ws));
  }
  return out;
}

}  // namespace transposed::worker
