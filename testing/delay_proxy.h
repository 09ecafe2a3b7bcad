// DelayProxy: a TCP proxy on 127.0.0.1 that forwards every byte to a target port after a fixed
// delay in each direction, so that a test can put a slow network (a Redis 200 ms away: 100 ms
// each way) between a client and a real server. Every accepted connection gets its own target
// connection; closing either side closes the other once the delayed bytes are through.
// Thread-safety: Start() and the destructor from one thread; the proxy runs its own threads.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"

namespace transposed::testing {

class DelayProxy {
 public:
  DelayProxy(int target_port, std::chrono::milliseconds delay_each_way);
  ~DelayProxy();  // closes every connection and joins the threads
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  Status Start();  // listens on a free port of 127.0.0.1
  int port() const { return port_; }
  int connections() const { return accepted_.load(); }

 private:
  void AcceptLoop();
  void Pump(int from, int to);

  const int target_port_;
  const std::chrono::milliseconds delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  Mutex mu_;
  std::vector<std::thread> pumps_ GUARDED_BY(mu_);
  std::vector<int> fds_ GUARDED_BY(mu_);
};

}  // namespace transposed::testing
