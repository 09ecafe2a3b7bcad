// RedisProcess: a real `redis-server` on 127.0.0.1 for the shared store's tests, started by the
// test on a free port (no persistence, in a fresh temporary directory). Kill() and Start() again
// bring it down and back on the same port (an empty store), as a crashed and restarted Redis.
// Thread-compatible: one thread drives a RedisProcess.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "core/status.h"

namespace transposed::testing {

struct RedisOptions {
  std::string binary = "redis-server";  // found on $PATH when not a path
  std::string password;                 // non-empty: requirepass
};

class RedisProcess {
 public:
  explicit RedisProcess(RedisOptions options = {});
  ~RedisProcess();  // kills it, removes the directory
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Starts it (the first time on a free port, later on the same one) and waits until it answers
  // PING. UNAVAILABLE with its log when it does not within 10 s.
  Status Start();
  // SIGKILL, and waits for it to exit.
  void Kill();
  // SIGSTOP / SIGCONT: a Redis that accepts connections but answers nothing (a hung server).
  void Pause();
  void Resume();

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  std::string log() const;

 private:
  RedisOptions options_;
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A free TCP port of 127.0.0.1 (bound to port 0, then released).
int FreeLoopbackPort();

}  // namespace transposed::testing
