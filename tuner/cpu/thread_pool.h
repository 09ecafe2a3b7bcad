// ThreadPool: the CPU backend's persistent threads, so that thread creation is never timed. A
// run gives every thread its share at once and returns when all are done; a thread spins for a
// moment before it sleeps, since waking a sleeping vCPU can cost as much as a whole transpose.
// Pool thread k is pinned to the k-th CPU it is given. The pool threads' involuntary context switches
// during shares are counted, so a measurement can tell a disturbed run (tuner/cpu/session.h).
//
// Thread-safety: Run() calls are serialised by an internal mutex; safe to share between threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace transposed {

// A persistent pool of threads, so that thread creation is never timed. Run() calls are
// serialised by an internal mutex; safe to share between threads.
class ThreadPool {
 public:
  // cpus: where to pin pool thread k (k = 1..): cpus[k % cpus.size()]; empty: no pinning.
  explicit ThreadPool(int max_threads, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int max_threads() const { return max_threads_; }
  // Calls fn(t) for every t in [0, n) (n clamped to [1, max_threads]), t = 0 on the calling
  // thread, the others on pool threads (started on first use); returns when all have returned.
  // If a pool thread cannot be started, its share runs on the calling thread.
  void Run(int n, const std::function<void(int)>& fn);
  // Involuntary context switches the pool threads suffered while running shares, in total so far
  // (the calling thread's share is not included: measure it with getrusage(RUSAGE_THREAD)).
  int64_t pool_preemptions() const;

 private:
  void ThreadMain(int id, uint64_t generation);  // pool thread `id`

  struct State;
  const int max_threads_;
  const std::vector<int> cpus_;
  std::unique_ptr<State> state_;
};

// Involuntary context switches of the calling thread so far (getrusage(RUSAGE_THREAD)).
int64_t ThreadPreemptions();

}  // namespace transposed
