#include "tuner/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace transposed {

struct ThreadPool::State {
  std::mutex run_mu;  // serialises Run()
  std::mutex mu;      // guards everything below; the atomics are written under it too, and read
                      // without it only by the spin-waits
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::vector<std::thread> threads;  // pool thread k has id k + 1
  const std::function<void(int)>* fn = nullptr;
  int active = 0;                 // pool threads 1..active take part in the current generation
  std::atomic<int> pending{0};    // of those, how many have not finished yet
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> preemptions{0};  // pool threads' involuntary context switches during shares
};

int64_t ThreadPreemptions() {
  struct rusage u;
  if (getrusage(RUSAGE_THREAD, &u) != 0) return 0;
  return u.ru_nivcsw;
}


ThreadPool::ThreadPool(int max_threads, std::vector<int> cpus)
    : max_threads_(std::max(1, max_threads)),
      cpus_(std::move(cpus)),
      state_(std::make_unique<State>()) {}

int64_t ThreadPool::pool_preemptions() const {
  return state_->preemptions.load(std::memory_order_relaxed);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->work_cv.notify_all();
  for (std::thread& t : state_->threads) t.join();
}

namespace {

// How long a pool thread (for the next run) and the caller (for the pool threads) spin before they sleep on
// a condition variable. Waking a sleeping vCPU costs tens to hundreds of microseconds on a VM,
// as much as a whole 4 MiB transpose on two threads; runs of a measurement follow each other
// within microseconds, so the spin catches them.
constexpr std::chrono::microseconds kSpin{200};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() or kSpin has passed; whether done() became true.
template <typename Done>
bool SpinUntil(Done done) {
  const auto end = std::chrono::steady_clock::now() + kSpin;
  for (int k = 0;; ++k) {
    if (done()) return true;
    if (k % 64 == 63 && std::chrono::steady_clock::now() >= end) return false;
    CpuRelax();
  }
}

}  // namespace

void ThreadPool::Run(int n, const std::function<void(int)>& fn) {
  n = std::clamp(n, 1, max_threads_);
  if (n == 1) {
    fn(0);
    return;
  }
  State& s = *state_;
  std::lock_guard<std::mutex> run_lock(s.run_mu);
  int helpers = 0;  // pool threads taking part (the caller runs share 0)
  {
    std::lock_guard<std::mutex> lock(s.mu);
    try {
      while (static_cast<int>(s.threads.size()) < n - 1) {
        const int id = static_cast<int>(s.threads.size()) + 1;
        s.threads.emplace_back(&ThreadPool::ThreadMain, this, id, s.generation.load());
      }
    } catch (const std::system_error&) {
      // Out of threads: the caller runs the shares of the missing pool threads.
    }
    helpers = std::min(n - 1, static_cast<int>(s.threads.size()));
    s.fn = &fn;
    s.active = helpers;
    s.pending.store(helpers, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.work_cv.notify_all();
  fn(0);
  for (int t = helpers + 1; t < n; ++t) fn(t);
  if (!SpinUntil([&] { return s.pending.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(s.mu);
    s.done_cv.wait(lock, [&] { return s.pending.load(std::memory_order_acquire) == 0; });
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.fn = nullptr;
}

void ThreadPool::ThreadMain(int id, uint64_t seen) {
  State& s = *state_;
  if (!cpus_.empty()) {
    // Placement: one CPU of the process's affinity mask per pool thread (best effort).
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus_[static_cast<size_t>(id) % cpus_.size()], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  for (;;) {
    SpinUntil([&] {
      return s.stop.load(std::memory_order_acquire) ||
             s.generation.load(std::memory_order_acquire) != seen;
    });
    std::unique_lock<std::mutex> lock(s.mu);
    s.work_cv.wait(lock, [&] { return s.stop.load() || s.generation.load() != seen; });
    if (s.stop.load()) return;
    seen = s.generation.load();
    if (id > s.active) continue;
    const std::function<void(int)>* fn = s.fn;
    lock.unlock();
    const int64_t before = ThreadPreemptions();
    (*fn)(id);
    s.preemptions.fetch_add(ThreadPreemptions() - before, std::memory_order_relaxed);
    lock.lock();
    if (s.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) s.done_cv.notify_one();
  }
}

}  // namespace transposed
