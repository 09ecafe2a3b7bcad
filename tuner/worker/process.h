// WorkerProcess: one child process speaking the worker protocol (worker.proto, frame.h) over a
// Unix socket pair that is its stdin and stdout. Its stderr is a pipe read by a thread that
// hands every line to the process's StderrFn (by default: the daemon's log through spdlog, as
// "worker <name> pid N: <line>").
//
// Call() sends one request and waits for its response with a time limit. When the child dies,
// closes the connection, breaks the protocol, answers "fatal", or overruns the limit (a hung
// kernel: it is killed with SIGKILL), Call() reaps it and returns UNAVAILABLE whose message says
// how it ended ("exit code 3", "signal 9", "timed out after 60 s; killed"); a fatal response is
// returned as its own error with that appended. running() is then false; Start() again restarts.
//
// Thread-safety: none; the owner (WorkerBackend) serialises all calls with its mutex. The stderr
// thread only calls StderrFn.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "tuner/worker/worker.pb.h"

namespace transposed::worker {

// Receives one line of a worker's stderr (without the newline) and the worker's pid.
using StderrFn = std::function<void(int pid, const std::string& line)>;

// Logs the line with spdlog (warn level), prefixed with `name` and the pid.
StderrFn LogStderrAs(std::string name);

class WorkerProcess {
 public:
  // `on_stderr` empty: LogStderrAs(path).
  WorkerProcess(std::string path, std::vector<std::string> args, StderrFn on_stderr = nullptr);
  ~WorkerProcess();  // closes the connection, waits briefly, then kills
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  Status Start();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // The response of a successful exchange (which may still be an Error; a fatal one is returned
  // as UNAVAILABLE instead, after the child exited).
  StatusOr<pb::Response> Call(const pb::Request& request, double timeout_s);
  // True (and the child reaped, running() false, last_exit() set) when the child has exited on
  // its own since the last exchange, e.g. killed from outside while idle. Never blocks.
  bool ReapIfExited();
  // Stops the child: closes its stdin, waits up to grace_s for it to exit, then SIGKILL.
  void Stop(double grace_s = 2.0);
  // How the last child ended ("exit code 3", "signal 11 (Segmentation fault)"), once reaped.
  const std::string& last_exit() const { return last_exit_; }

 private:
  // Kills (if asked) and reaps the child; records last_exit_; joins the stderr thread.
  void Reap(bool kill_first, double grace_s);

  const std::string path_;
  const std::vector<std::string> args_;
  const StderrFn on_stderr_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread stderr_thread_;
  std::string last_exit_;
};

// Runs `path args...` to completion, capturing its stdout (at most 1 MiB); its stderr lines go
// to on_stderr (empty: inherited). The exit status must be 0. DEADLINE_EXCEEDED (and the child
// killed) after timeout_s.
StatusOr<std::string> RunAndCapture(const std::string& path, const std::vector<std::string>& args,
                                    double timeout_s, const StderrFn& on_stderr = nullptr);

// Describes a waitpid status: "exit code N" or "signal N (name)".
std::string DescribeWaitStatus(int wstatus);

}  // namespace transposed::worker
