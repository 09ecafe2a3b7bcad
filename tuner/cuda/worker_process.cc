#include "tuner/cuda/worker_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "tuner/cuda/worker_protocol.h"

extern char** environ;

namespace transposed::cuda_worker {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Spawns path with args, its stdin and stdout dup'ed from child_in/child_out (may be equal);
// stderr inherited. Signal mask cleared and SIGPIPE/SIGINT/SIGTERM set to default in the child.
StatusOr<pid_t> Spawn(const std::string& path, const std::vector<std::string>& args, int child_in,
                      int child_out) {
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

WorkerProcess::WorkerProcess(std::string path, std::vector<std::string> args)
    : path_(std::move(path)), args_(std::move(args)) {}

WorkerProcess::~WorkerProcess() { Stop(); }

Status WorkerProcess::Start() {
  if (running()) return Status::OK();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Unavailable(Errno("socketpair"));
  }
  auto pid = Spawn(path_, args_, sv[1], sv[1]);
  close(sv[1]);
  if (!pid.ok()) {
    close(sv[0]);
    return pid.status();
  }
  pid_ = *pid;
  fd_ = sv[0];
  last_exit_.clear();
  return Status::OK();
}

void WorkerProcess::Reap(bool kill_first, double grace_s) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ <= 0) return;
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

void WorkerProcess::Stop(double grace_s) { Reap(/*kill_first=*/false, grace_s); }

StatusOr<nlohmann::json> WorkerProcess::Call(const nlohmann::json& request, double timeout_s) {
  if (!running()) return Status::Unavailable("worker not running");
  Status s = WriteFrame(fd_, request.dump());
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
  auto response = ParseJsonObject(payload);
  if (!response.ok()) {
    Reap(/*kill_first=*/true, 5.0);
    return Status::Unavailable("malformed response; killed (" + last_exit_ + ")");
  }
  if (response->value("fatal", false)) {
    Reap(/*kill_first=*/false, 10.0);  // it exits by itself after a fatal answer
    Status err = ResponseStatus(*response);
    return Status::Unavailable(err.message() + "; worker exited (" + last_exit_ + ")");
  }
  return response;
}

StatusOr<std::string> RunAndCapture(const std::string& path, const std::vector<std::string>& args,
                                    double timeout_s) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Unavailable(Errno("pipe"));
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto pid = Spawn(path, args, devnull >= 0 ? devnull : p[1], p[1]);
  close(p[1]);
  if (devnull >= 0) close(devnull);
  if (!pid.ok()) {
    close(p[0]);
    return pid.status();
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {p[0], POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    ssize_t r = read(p[0], buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
    if (out.size() > (1 << 20)) break;
  }
  close(p[0]);
  if (timed_out) kill(*pid, SIGKILL);
  int ws = 0;
  if (!WaitWithTimeout(*pid, &ws, 10.0)) {
    kill(*pid, SIGKILL);
    waitpid(*pid, &ws, 0);
  }
  if (timed_out) return Status::DeadlineExceeded(path + " did not finish in time; killed");
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return Status::Unavailable(path + " failed: " + DescribeWaitStatus(ws));
  }
  return out;
}

}  // namespace transposed::cuda_worker
