// WorkerProcess: one child process speaking the worker protocol (worker_protocol.h) over a
// Unix socket pair that is its stdin and stdout; its stderr is inherited (the daemon's log).
//
// Call() sends one request and waits for its response with a time limit. When the child dies,
// closes the connection, breaks the protocol, answers "fatal", or overruns the limit (a hung
// kernel: it is killed with SIGKILL), Call() reaps it and returns UNAVAILABLE whose message says
// how it ended ("exit code 3", "signal 9", "timed out after 60 s; killed"); a fatal response is
// returned as its own error with that appended. running() is then false; Start() again restarts.
//
// Thread-safety: none; the owner (CudaBackend) serialises all calls with its mutex.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace transposed::cuda_worker {

class WorkerProcess {
 public:
  WorkerProcess(std::string path, std::vector<std::string> args);
  ~WorkerProcess();  // closes the connection, waits briefly, then kills
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  Status Start();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // The response object of a successful exchange (which may still be {"ok": false}).
  StatusOr<nlohmann::json> Call(const nlohmann::json& request, double timeout_s);
  // Stops the child: closes its stdin, waits up to grace_s for it to exit, then SIGKILL.
  void Stop(double grace_s = 2.0);
  // How the last child ended ("exit code 3", "signal 11 (Segmentation fault)"), once reaped.
  const std::string& last_exit() const { return last_exit_; }

 private:
  // Kills (if asked) and reaps the child; records last_exit_.
  void Reap(bool kill_first, double grace_s);

  const std::string path_;
  const std::vector<std::string> args_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string last_exit_;
};

// Runs `path args...` to completion, capturing its stdout (stderr inherited). The exit status
// must be 0. DEADLINE_EXCEEDED (and the child killed) after timeout_s.
StatusOr<std::string> RunAndCapture(const std::string& path, const std::vector<std::string>& args,
                                    double timeout_s);

// Describes a waitpid status: "exit code N" or "signal N (name)".
std::string DescribeWaitStatus(int wstatus);

}  // namespace transposed::cuda_worker
