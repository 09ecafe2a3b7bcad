#include "tuner/cpu/cpu_backend.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "core/hash.h"
#include "core/version.h"
#include "tuner/cpu/cpu_cache.h"
#include "tuner/cpu/cpu_simd.h"

namespace transposed {

// ---------------------------------------------------------------------------------------------
// ThreadPool

struct ThreadPool::State {
  std::mutex run_mu;  // serialises Run()
  std::mutex mu;      // guards everything below; the atomics are written under it too, and read
                      // without it only by the spin-waits
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::vector<std::thread> threads;  // worker k has id k + 1
  const std::function<void(int)>* fn = nullptr;
  int active = 0;                 // workers 1..active take part in the current generation
  std::atomic<int> pending{0};    // of those, how many have not finished yet
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> preemptions{0};  // workers' involuntary context switches during shares
};

namespace {

// Involuntary context switches of the calling thread so far.
int64_t ThreadPreemptions() {
  struct rusage u;
  if (getrusage(RUSAGE_THREAD, &u) != 0) return 0;
  return u.ru_nivcsw;
}

}  // namespace

ThreadPool::ThreadPool(int max_threads, std::vector<int> cpus)
    : max_threads_(std::max(1, max_threads)),
      cpus_(std::move(cpus)),
      state_(std::make_unique<State>()) {}

int64_t ThreadPool::worker_preemptions() const {
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

// How long a worker (for the next run) and the caller (for the workers) spin before they sleep on
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
  int workers = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    try {
      while (static_cast<int>(s.threads.size()) < n - 1) {
        const int id = static_cast<int>(s.threads.size()) + 1;
        s.threads.emplace_back(&ThreadPool::Worker, this, id, s.generation.load());
      }
    } catch (const std::system_error&) {
      // Out of threads: the caller runs the shares of the missing workers.
    }
    workers = std::min(n - 1, static_cast<int>(s.threads.size()));
    s.fn = &fn;
    s.active = workers;
    s.pending.store(workers, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.work_cv.notify_all();
  fn(0);
  for (int t = workers + 1; t < n; ++t) fn(t);
  if (!SpinUntil([&] { return s.pending.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(s.mu);
    s.done_cv.wait(lock, [&] { return s.pending.load(std::memory_order_acquire) == 0; });
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.fn = nullptr;
}

void ThreadPool::Worker(int id, uint64_t seen) {
  State& s = *state_;
  if (!cpus_.empty()) {
    // Placement: one CPU of the process's affinity mask per worker (best effort).
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

namespace {

using Clock = std::chrono::steady_clock;
using Byte = unsigned char;

constexpr int kTiles[] = {8, 16, 32, 64, 128};
// L2 blocks of the SIMD candidates, in micro-tiles (64 x 64 bytes each): 1 (none), 4, 16.
constexpr int kSimdBlocks[] = {1, 4, 16};
// Column-walk blocks of the SIMD candidates: {output run, input run} in bytes.
constexpr std::pair<int, int> kSimdRuns[] = {{256, 512}, {512, 256}, {1024, 512}};
// Warm-up runs stop after this much time (but at least one runs): a large problem's first run
// already faults in the pages and wakes the workers.
constexpr double kWarmupSeconds = 0.005;
constexpr int64_t kAlign = 64;
// The last-level cache assumed where sysfs does not say (VMs often do not). Not the 32 MiB of
// one Zen CCD: on the project's 2-vCPU VM a memcpy of 4 MiB rotating through 64-128 MiB of
// buffers still ran 40% faster than through 192 MiB or more (docs/cpu-backend.md), so the
// rotation must exceed what these vCPUs can cache, not what one die has.
constexpr int64_t kDefaultLlcBytes = int64_t{128} << 20;

int64_t RoundUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// ---------------------------------------------------------------------------------------------
// Buffers and random data

struct FreeDeleter {
  void operator()(Byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<Byte, FreeDeleter>;

constexpr int64_t kHugePage = 2 << 20;

// nullptr on failure (never throws). Buffers of a huge page or more are huge-page aligned and
// advised to use transparent huge pages (as a tensor library's allocator would), so that large
// strided transposes are not dominated by TLB misses of 4 KiB pages.
Buffer AllocateAligned(int64_t bytes) {
  const int64_t n = RoundUp(std::max<int64_t>(bytes, 1), kAlign);
  if (n < kHugePage) return Buffer(static_cast<Byte*>(std::aligned_alloc(kAlign, static_cast<size_t>(n))));
  const int64_t h = RoundUp(n, kHugePage);
  Buffer b(static_cast<Byte*>(std::aligned_alloc(kHugePage, static_cast<size_t>(h))));
#ifdef MADV_HUGEPAGE
  if (b) madvise(b.get(), static_cast<size_t>(h), MADV_HUGEPAGE);
#endif
  return b;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A fresh seed for every call, from the clock and a process-wide counter.
uint64_t NewSeed() {
  static std::atomic<uint64_t> counter{0};
  uint64_t s = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1, std::memory_order_relaxed) * 0xd1b54a32d192ed03ULL);
  return SplitMix64(s);
}

void FillRandom(Byte* p, int64_t n, uint64_t seed) {
  uint64_t state = seed;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = SplitMix64(state);
    std::memcpy(p + i, &v, 8);
  }
  if (i < n) {
    const uint64_t v = SplitMix64(state);
    std::memcpy(p + i, &v, static_cast<size_t>(n - i));
  }
}

// ---------------------------------------------------------------------------------------------
// Kernels. Elements are moved with fixed-size memcpy (compiled to plain moves), so any element
// size works on any byte buffer without aliasing or alignment concerns.

struct Layout {
  int64_t rows, cols, batch, ldi, ldo;
  int64_t in_mat, out_mat;  // elements per input / output matrix, gaps included

  explicit Layout(const Problem& p)
      : rows(p.rows),
        cols(p.cols),
        batch(p.batch),
        ldi(p.in_ld()),
        ldo(p.out_ld()),
        in_mat(p.rows * p.in_ld()),
        out_mat(p.cols * p.out_ld()) {}
};

template <int E>
inline void Move(Byte* dst, const Byte* src) {
  std::memcpy(dst, src, E);
}

template <int E>
void NaiveRows(const Layout& L, const Byte* in, Byte* out) {
  for (int64_t b = 0; b < L.batch; ++b) {
    const Byte* ib = in + b * L.in_mat * E;
    Byte* ob = out + b * L.out_mat * E;
    for (int64_t i = 0; i < L.rows; ++i)
      for (int64_t j = 0; j < L.cols; ++j)
        Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
  }
}

template <int E>
void NaiveCols(const Layout& L, const Byte* in, Byte* out) {
  for (int64_t b = 0; b < L.batch; ++b) {
    const Byte* ib = in + b * L.in_mat * E;
    Byte* ob = out + b * L.out_mat * E;
    for (int64_t j = 0; j < L.cols; ++j)
      for (int64_t i = 0; i < L.rows; ++i)
        Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
  }
}

// Tiles [begin, end) of the batch's tiles, numbered batch-major, then by tile row, tile column.
template <int E, int T>
void TileRange(const Layout& L, int64_t begin, int64_t end, const Byte* in, Byte* out) {
  const int64_t tile_rows = (L.rows + T - 1) / T;
  const int64_t tile_cols = (L.cols + T - 1) / T;
  const int64_t per_mat = tile_rows * tile_cols;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t b = t / per_mat;
    const int64_t r = t % per_mat;
    const int64_t i0 = (r / tile_cols) * T;
    const int64_t j0 = (r % tile_cols) * T;
    const Byte* ib = in + (b * L.in_mat + i0 * L.ldi + j0) * E;
    Byte* ob = out + (b * L.out_mat + j0 * L.ldo + i0) * E;
    if (i0 + T <= L.rows && j0 + T <= L.cols) {
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
    } else {
      const int64_t ni = std::min<int64_t>(T, L.rows - i0);
      const int64_t nj = std::min<int64_t>(T, L.cols - j0);
      for (int64_t i = 0; i < ni; ++i)
        for (int64_t j = 0; j < nj; ++j)
          Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
    }
  }
}

template <int E, int T>
Status Tiled(const Layout& L, int threads, const Byte* in, Byte* out, ThreadPool* pool) {
  const int64_t total = L.batch * ((L.rows + T - 1) / T) * ((L.cols + T - 1) / T);
  if (threads <= 1) {
    TileRange<E, T>(L, 0, total, in, out);
    return Status::OK();
  }
  if (pool == nullptr || pool->max_threads() < threads)
    return Status::InvalidArgument("cpu: " + std::to_string(threads) +
                                   " threads exceed the backend's thread pool");
  const int64_t chunk = total / threads;
  const int64_t extra = total % threads;
  pool->Run(threads, [&](int t) {
    const int64_t begin = t * chunk + std::min<int64_t>(t, extra);
    const int64_t end = begin + chunk + (t < extra ? 1 : 0);
    TileRange<E, T>(L, begin, end, in, out);
  });
  return Status::OK();
}

// SIMD candidates: the batch's matrices are cut into L2 blocks, numbered batch-major, then by
// block row and block column; each thread takes a contiguous range of them. Square blocks
// (c.block x M elements a side, M: the micro-tile edge) go to the level's RectFn; column-walk
// blocks (c.wrun / E rows x c.rrun / E columns) to its WalkFn, each with the thread's next block
// to prefetch.
Status RunSimd(const CpuConfig& c, const Layout& L, int elem, const Byte* in, Byte* out,
               ThreadPool* pool) {
  const auto isa = static_cast<cpu_simd::Isa>(c.isa);
  if (!cpu_simd::IsaSupported(isa))
    return Status::InvalidArgument(std::string("cpu: this CPU cannot run ") +
                                   cpu_simd::IsaName(isa) + " code");
  const cpu_simd::RectFn rect = cpu_simd::RectKernel(isa);
  const cpu_simd::WalkFn walk = cpu_simd::WalkKernel(isa);
  const bool walking = c.wrun > 0;
  const int64_t square = int64_t{cpu_simd::MicroEdge(isa, elem)} * c.block;
  const int64_t edge_i = walking ? c.wrun / elem : square;
  const int64_t edge_j = walking ? c.rrun / elem : square;
  const int64_t block_rows = (L.rows + edge_i - 1) / edge_i;
  const int64_t block_cols = (L.cols + edge_j - 1) / edge_j;
  const int64_t per_mat = block_rows * block_cols;
  const int64_t total = L.batch * per_mat;
  const bool nt = c.nt && cpu_simd::NtAligned(out, L.ldo, elem);
  auto mat = [&](int64_t t) {
    const int64_t b = t / per_mat;
    return cpu_simd::Mat{in + b * L.in_mat * elem, out + b * L.out_mat * elem, L.ldi, L.ldo, elem};
  };
  auto box = [&](int64_t t) {
    const int64_t r = t % per_mat;
    const int64_t i0 = (r / block_cols) * edge_i;
    const int64_t j0 = (r % block_cols) * edge_j;
    return cpu_simd::Box{i0, std::min(L.rows, i0 + edge_i), j0, std::min(L.cols, j0 + edge_j)};
  };
  auto range = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const cpu_simd::Mat m = mat(t);
      const cpu_simd::Box b = box(t);
      if (walking && t + 1 < end) {
        const cpu_simd::Mat next_m = mat(t + 1);  // only formed inside the batch's buffers
        walk(m, b, nt, &next_m, box(t + 1));
      } else if (walking) {
        walk(m, b, nt, nullptr, b);  // the last block of this range: nothing to prefetch
      } else {
        rect(m, b.i0, b.i1, b.j0, b.j1, nt);
      }
    }
    if (nt) cpu_simd::FinishStreaming();
  };
  if (c.threads <= 1) {
    range(0, total);
    return Status::OK();
  }
  if (pool == nullptr || pool->max_threads() < c.threads)
    return Status::InvalidArgument("cpu: " + std::to_string(c.threads) +
                                   " threads exceed the backend's thread pool");
  const int64_t chunk = total / c.threads;
  const int64_t extra = total % c.threads;
  pool->Run(c.threads, [&](int t) {
    const int64_t begin = t * chunk + std::min<int64_t>(t, extra);
    range(begin, begin + chunk + (t < extra ? 1 : 0));
  });
  return Status::OK();
}

// The reference: plain element moves in 32 x 32 blocks (the blocking only orders the loops, so
// that checking a large problem does not take seconds).
template <int E>
void ReferenceTyped(const Layout& L, const Byte* in, Byte* out) {
  constexpr int64_t kB = 32;
  for (int64_t b = 0; b < L.batch; ++b) {
    const Byte* ib = in + b * L.in_mat * E;
    Byte* ob = out + b * L.out_mat * E;
    for (int64_t i0 = 0; i0 < L.rows; i0 += kB)
      for (int64_t j0 = 0; j0 < L.cols; j0 += kB)
        for (int64_t i = i0; i < std::min(L.rows, i0 + kB); ++i)
          for (int64_t j = j0; j < std::min(L.cols, j0 + kB); ++j)
            Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
  }
}

template <int E>
Status RunTyped(const CpuConfig& c, const Layout& L, const Byte* in, Byte* out, ThreadPool* pool) {
  using Kind = CpuConfig::Kind;
  switch (c.kind) {
    case Kind::kNaive:
      NaiveRows<E>(L, in, out);
      return Status::OK();
    case Kind::kNaiveColWrite:
      NaiveCols<E>(L, in, out);
      return Status::OK();
    case Kind::kTestSkipLast: {
      // Wrong on purpose: restores the old value of the very last element after a transpose.
      Byte* last = out + ((L.batch - 1) * L.out_mat + (L.cols - 1) * L.ldo + (L.rows - 1)) * E;
      Byte saved[E];
      std::memcpy(saved, last, E);
      NaiveRows<E>(L, in, out);
      std::memcpy(last, saved, E);
      return Status::OK();
    }
    case Kind::kTestGapWrite: {
      // Wrong on purpose: a correct transpose that also flips the first gap element.
      NaiveRows<E>(L, in, out);
      if (L.ldo > L.rows)
        for (int k = 0; k < E; ++k) out[L.rows * E + k] = static_cast<Byte>(~out[L.rows * E + k]);
      return Status::OK();
    }
    case Kind::kSimd:
      return RunSimd(c, L, E, in, out, pool);
    case Kind::kTiled:
      switch (c.tile) {
        case 8:
          return Tiled<E, 8>(L, c.threads, in, out, pool);
        case 16:
          return Tiled<E, 16>(L, c.threads, in, out, pool);
        case 32:
          return Tiled<E, 32>(L, c.threads, in, out, pool);
        case 64:
          return Tiled<E, 64>(L, c.threads, in, out, pool);
        case 128:
          return Tiled<E, 128>(L, c.threads, in, out, pool);
      }
      return Status::InvalidArgument("cpu: unsupported tile " + std::to_string(c.tile));
  }
  return Status::InvalidArgument("cpu: unknown candidate kind");
}

// ---------------------------------------------------------------------------------------------
// Host description

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return Trim(line);
}

struct HostInfo {
  std::string model = "unknown cpu";
  int logical = 1;
  int cores = 1;
  std::optional<int64_t> l1d, l2, l3;
  std::string cache_source;  // cpu_cache::CacheSizes::source
  std::string arch;
};

HostInfo ReadHostInfo() {
  HostInfo h;
  const unsigned hc = std::thread::hardware_concurrency();
  h.logical = hc > 0 ? static_cast<int>(hc) : 1;

  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, physical_id = "0";
  std::set<std::pair<std::string, std::string>> cores;
  bool have_model = false;
  while (cpuinfo && std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "model name" && !have_model && !value.empty()) {
      h.model = value;
      have_model = true;
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      cores.insert({physical_id, value});
    }
  }
  h.cores = cores.empty() ? h.logical : static_cast<int>(cores.size());

  // sysfs, else CPUID (the same sizes: a host without /sys keeps its device class), else sysconf.
  const cpu_cache::CacheSizes caches = cpu_cache::Read();
  h.l1d = caches.l1d;
  h.l2 = caches.l2;
  h.l3 = caches.l3;
  h.cache_source = caches.source;

  struct utsname u;
  if (uname(&u) == 0) h.arch = u.machine;
  if (h.arch.empty()) h.arch = "unknown";
  return h;
}

// The smallest CPU quota of the cgroup `rel` (a path below `mount`) and its ancestors.
std::optional<int> CgroupQuota(const std::string& mount, std::string rel, bool v2) {
  std::optional<int> best;
  for (;;) {
    const std::string dir = mount + (rel == "/" ? "" : rel);
    std::optional<int> q;
    if (v2) {
      q = cpu_internal::ParseCpuMax(ReadFirstLine(dir + "/cpu.max"));
    } else {
      const std::optional<int64_t> quota = ParseInt(ReadFirstLine(dir + "/cpu.cfs_quota_us"));
      const std::optional<int64_t> period = ParseInt(ReadFirstLine(dir + "/cpu.cfs_period_us"));
      if (quota && period && *quota > 0 && *period > 0)
        q = static_cast<int>(std::max<int64_t>(1, *quota / *period));
    }
    if (q) best = best ? std::min(*best, *q) : *q;
    if (rel.empty() || rel == "/") break;
    const size_t slash = rel.find_last_of('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
  return best;
}

}  // namespace

UsableCpus ReadUsableCpus() {
  UsableCpus u;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) u.cpus.push_back(c);
  }
  if (u.cpus.empty()) {
    const unsigned hc = std::thread::hardware_concurrency();
    for (unsigned c = 0; c < std::max(1u, hc); ++c) u.cpus.push_back(static_cast<int>(c));
  }
  std::optional<int> quota;
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (cg && std::getline(cg, line)) {
    // "0::/path" (v2) or "4:cpu,cpuacct:/path" (v1).
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string rel = line.substr(b + 1);
    std::optional<int> q;
    if (controllers.empty()) {
      q = CgroupQuota("/sys/fs/cgroup", rel, true);
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      q = CgroupQuota("/sys/fs/cgroup/" + controllers, rel, false);
      if (!q) q = CgroupQuota("/sys/fs/cgroup/cpu", rel, false);
    }
    if (q) quota = quota ? std::min(*quota, *q) : *q;
  }
  u.quota = quota.value_or(0);
  u.count = static_cast<int>(u.cpus.size());
  if (u.quota > 0) u.count = std::min(u.count, u.quota);
  u.count = std::max(1, u.count);
  return u;
}

namespace {

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// ---------------------------------------------------------------------------------------------
// Session

class CpuSession : public Session {
 public:
  CpuSession(const Problem& p, std::shared_ptr<ThreadPool> pool, int max_threads, int64_t llc_bytes,
             uint64_t memory_bytes, bool test_faults)
      : p_(p),
        pool_(std::move(pool)),
        max_threads_(max_threads),
        llc_bytes_(llc_bytes),
        memory_bytes_(memory_bytes),
        test_faults_(test_faults) {}

  Status Init() {
    in_ = AllocateAligned(p_.in_alloc_bytes());
    out_ = AllocateAligned(p_.out_alloc_bytes());
    ref_ = AllocateAligned(p_.out_alloc_bytes());
    if (!in_ || !out_ || !ref_) {
      // Admission (Open) found the memory available; the allocation itself failed (an address
      // space limit, `ulimit -v`, or memory taken meanwhile): name the bytes.
      const uint64_t total = static_cast<uint64_t>(p_.in_alloc_bytes()) +
                             2 * static_cast<uint64_t>(p_.out_alloc_bytes());
      return Status::ResourceExhausted(
          "cpu: cannot allocate the buffers of " + p_.ToString() + ": " + std::to_string(total) +
          " bytes (input " + std::to_string(p_.in_alloc_bytes()) + ", output and reference " +
          std::to_string(p_.out_alloc_bytes()) + " each); the " +
          (!in_ ? "input" : !out_ ? "output" : "reference") +
          " allocation failed (address-space limit `ulimit -v`, or memory taken meanwhile)");
    }
    FillRandom(in_.get(), p_.in_alloc_bytes(), NewSeed());
    // Gap bytes of the output keep these random values for the session's lifetime; the
    // reference holds the same, so a write into a gap is a mismatch.
    FillRandom(out_.get(), p_.out_alloc_bytes(), NewSeed());
    std::memcpy(ref_.get(), out_.get(), static_cast<size_t>(p_.out_alloc_bytes()));
    cpu_internal::ReferenceTranspose(p_, in_.get(), ref_.get());
    return Status::OK();
  }

  // The input keeps its random data and the reference its result for the session's lifetime;
  // Poison() makes sure that whatever the candidate leaves behind is its own output.
  Status Check(const Candidate& c) override {
    TR_ASSIGN_OR_RETURN(const CpuConfig config, Resolve(c));
    Poison();
    TR_RETURN_IF_ERROR(cpu_internal::RunConfig(config, p_, in_.get(), out_.get(), pool_.get()));
    Status s = cpu_internal::CompareOutput(p_, ref_.get(), out_.get());
    if (!s.ok()) return Status(s.code(), c.name + ": " + s.message());
    return Status::OK();
  }

  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& opt) override {
    TR_ASSIGN_OR_RETURN(const CpuConfig config, Resolve(c));
    TR_RETURN_IF_ERROR(EnsureRotation());
    ThreadPool* pool = pool_.get();
    return TimeLoop(opt, config.threads, "transpose", [&](size_t k) {
      return cpu_internal::RunConfig(config, p_, ins_[k], outs_[k], pool);
    });
  }

  // The copy of the same bytes, the plain way (memcpy) and with streaming stores
  // (cpu_simd::StreamCopy), each on one thread and on all: every call times them all and returns
  // the fastest (op "memcpy" or "stream-copy"), so that the ratio is the winner's share of this
  // machine's copy bandwidth. glibc's memcpy streams only above a size threshold; below it a
  // transpose with streaming stores beat a memcpy-only ceiling (ratios 1.06-1.19). Timing all
  // of them on every call keeps one unlucky first measurement from pinning the ceiling to a
  // slower way for the rest of the session (that made the ratios swing by 1.5x).
  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& opt) override {
    TR_RETURN_IF_ERROR(EnsureRotation());
    const int64_t bytes = p_.bytes();
    const int n = max_threads_;
    const bool can_multi = n > 1 && p_.bytes() >= kCpuMinParallelBytes;
    std::optional<Measurement> best;
    for (const bool stream : {false, true}) {
      const auto copy = [stream](Byte* dst, const Byte* src, int64_t len) {
        if (stream) {
          cpu_simd::StreamCopy(dst, src, len);
        } else {
          std::memcpy(dst, src, static_cast<size_t>(len));
        }
      };
      const char* op = stream ? "stream-copy" : "memcpy";
      TR_ASSIGN_OR_RETURN(Measurement single, TimeLoop(opt, 1, op, [&](size_t k) {
                            copy(outs_[k], ins_[k], bytes);
                            return Status::OK();
                          }));
      if (!best || single.median_s < best->median_s) best = std::move(single);
      if (!can_multi) continue;
      ThreadPool* pool = pool_.get();
      TR_ASSIGN_OR_RETURN(Measurement multi, TimeLoop(opt, n, op, [&](size_t k) {
                            const Byte* src = ins_[k];
                            Byte* dst = outs_[k];
                            pool->Run(n, [&](int t) {
                              // 64-byte aligned chunks; the last one takes the rest.
                              const int64_t chunk = RoundUp(bytes / n, kAlign);
                              const int64_t begin = std::min(bytes, chunk * t);
                              const int64_t end =
                                  t == n - 1 ? bytes : std::min(bytes, begin + chunk);
                              copy(dst + begin, src + begin, end - begin);
                            });
                            return Status::OK();
                          }));
      if (multi.median_s < best->median_s) best = std::move(multi);
    }
    return *best;
  }

 private:
  StatusOr<CpuConfig> Resolve(const Candidate& c) const {
    TR_ASSIGN_OR_RETURN(CpuConfig config, CpuConfig::FromCandidate(c));
    if (config.threads > max_threads_)
      return Status::InvalidArgument(c.name + ": " + std::to_string(config.threads) +
                                     " threads, but this backend runs at most " +
                                     std::to_string(max_threads_));
    const bool test_kind = config.kind == CpuConfig::Kind::kTestSkipLast ||
                           config.kind == CpuConfig::Kind::kTestGapWrite;
    if (test_kind && !test_faults_)
      return Status::InvalidArgument(c.name + ": test candidates are not enabled");
    return config;
  }

  // Each output element becomes the bitwise NOT of its reference value; the gaps get the
  // reference's gap bytes back (measurements rotate through this buffer too, and the ceiling's
  // memcpy writes across gaps), so any gap write by the candidate is a mismatch.
  void Poison() {
    std::memcpy(out_.get(), ref_.get(), static_cast<size_t>(p_.out_alloc_bytes()));
    const int64_t es = p_.elem_size();
    const int64_t row_bytes = p_.rows * es;
    for (int64_t r = 0; r < p_.batch * p_.cols; ++r) {
      Byte* dst = out_.get() + r * p_.out_ld() * es;
      for (int64_t k = 0; k < row_bytes; ++k) dst[k] = static_cast<Byte>(~dst[k]);
    }
  }

  // Rotating buffer pairs: the check pair plus enough more that the working set is at least twice
  // the last-level cache, capped at kCpuMaxRotationBytes and a quarter of the memory.
  Status EnsureRotation() {
    if (!ins_.empty()) return Status::OK();
    const int64_t in_bytes = RoundUp(p_.in_alloc_bytes(), kAlign);
    const int64_t pair = in_bytes + RoundUp(p_.out_alloc_bytes(), kAlign);
    int64_t cap = kCpuMaxRotationBytes;
    if (memory_bytes_ > 0) cap = std::min<int64_t>(cap, static_cast<int64_t>(memory_bytes_ / 4));
    const int64_t wanted = std::max<int64_t>(1, (2 * llc_bytes_ + pair - 1) / pair);
    const int64_t allowed = std::max<int64_t>(1, cap / pair);
    capped_ = wanted > allowed;
    int64_t extra = std::min(wanted, allowed) - 1;
    while (extra > 0) {
      arena_ = AllocateAligned(extra * pair);
      if (arena_) break;
      capped_ = true;
      extra /= 2;
    }
    ins_.push_back(in_.get());
    outs_.push_back(out_.get());
    for (int64_t k = 0; k < extra; ++k) {
      Byte* in = arena_.get() + k * pair;
      Byte* out = in + in_bytes;
      // The check input's random bytes (a copy is 10 times faster than generating more, and the
      // kernels do not depend on the values).
      std::memcpy(in, in_.get(), static_cast<size_t>(p_.in_alloc_bytes()));
      std::memset(out, 0, static_cast<size_t>(p_.out_alloc_bytes()));
      ins_.push_back(in);
      outs_.push_back(out);
    }
    working_set_bytes_ = static_cast<int64_t>(ins_.size()) * pair;
    return Status::OK();
  }

  // Warm-up (opt.warmup runs, but no more than kWarmupSeconds once one has run), then timed runs
  // (one steady_clock interval each) until both min_samples and min_seconds are reached or
  // max_samples is, the buffer pair advancing every run. A run during which the calling thread or
  // a worker was preempted is re-taken, at most min_samples times per call; after that, disturbed
  // runs are kept (both counts are in the method).
  template <typename RunFn>
  StatusOr<Measurement> TimeLoop(const MeasureOptions& opt, int threads, const char* op,
                                 RunFn run) {
    const int max_samples = std::max(1, opt.max_samples);
    const int min_samples = std::clamp(opt.min_samples, 1, max_samples);
    const Clock::time_point warm_start = Clock::now();
    int warmup = 0;
    for (; warmup < opt.warmup; ++warmup) {
      if (warmup > 0 &&
          std::chrono::duration<double>(Clock::now() - warm_start).count() >= kWarmupSeconds)
        break;
      TR_RETURN_IF_ERROR(run(NextBuffer()));
    }
    std::vector<double> samples;
    samples.reserve(static_cast<size_t>(std::min(max_samples, 4096)));
    double total = 0;
    int retaken = 0, kept_disturbed = 0;
    while (static_cast<int>(samples.size()) < max_samples &&
           (static_cast<int>(samples.size()) < min_samples || total < opt.min_seconds)) {
      const size_t k = NextBuffer();
      const int64_t pre0 = ThreadPreemptions() + pool_->worker_preemptions();
      const Clock::time_point t0 = Clock::now();
      Status s = run(k);
      const Clock::time_point t1 = Clock::now();
      const int64_t preempted = ThreadPreemptions() + pool_->worker_preemptions() - pre0;
      TR_RETURN_IF_ERROR(s);
      const double dt = std::chrono::duration<double>(t1 - t0).count();
      if (preempted > 0) {
        if (retaken < min_samples) {
          ++retaken;
          continue;
        }
        ++kept_disturbed;
      }
      samples.push_back(dt);
      total += dt;
    }
    MeasureMethod method;
    method.timer = "steady_clock";
    method.op = op;
    method.launches_per_sample = 1;
    method.buffers = static_cast<int>(ins_.size());
    method.working_set_bytes = working_set_bytes_;
    method.cache_bytes = llc_bytes_;
    method.working_set_capped = capped_;
    method.threads = threads;
    method.preempted_retaken = retaken;
    method.preempted_kept = kept_disturbed;
    return Measurement::FromSamples(std::move(samples), warmup, std::move(method));
  }

  size_t NextBuffer() {
    const size_t k = next_ % ins_.size();
    ++next_;
    return k;
  }

  const Problem p_;
  const std::shared_ptr<ThreadPool> pool_;
  const int max_threads_;
  const int64_t llc_bytes_;
  const uint64_t memory_bytes_;
  const bool test_faults_;
  Buffer in_, out_, ref_;
  Buffer arena_;
  std::vector<const Byte*> ins_;
  std::vector<Byte*> outs_;
  size_t next_ = 0;
  int64_t working_set_bytes_ = 0;
  bool capped_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// CpuConfig

namespace {

// "cpu.{isa}.b{B}.t{N}[.nt]" or "cpu.{isa}.w{W}.r{R}.t{N}[.nt]"; nullopt if the name is not of
// either form.
std::optional<CpuConfig> ParseSimdName(std::string_view name) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 4 || parts.size() > 6 || parts[0] != "cpu") return std::nullopt;
  CpuConfig c;
  c.kind = CpuConfig::Kind::kSimd;
  bool found = false;
  for (cpu_simd::Isa isa : {cpu_simd::Isa::kBase, cpu_simd::Isa::kAvx2, cpu_simd::Isa::kAvx512}) {
    if (parts[1] == cpu_simd::IsaName(isa)) {
      c.isa = static_cast<int>(isa);
      found = true;
    }
  }
  if (!found) return std::nullopt;
  // A number after a one-letter prefix: "b16" -> 16.
  auto field = [](std::string_view part, char prefix) -> std::optional<int64_t> {
    if (part.size() < 2 || part[0] != prefix) return std::nullopt;
    return ParseInt(part.substr(1));
  };
  size_t next = 3;
  if (const std::optional<int64_t> block = field(parts[2], 'b')) {
    if (*block < 1 || *block > 64) return std::nullopt;
    c.block = static_cast<int>(*block);
  } else {
    const std::optional<int64_t> w = field(parts[2], 'w');
    const std::optional<int64_t> r = parts.size() > 3 ? field(parts[3], 'r') : std::nullopt;
    if (!w || !r || *w < 64 || *r < 64 || *w > kCpuMaxRunBytes || *r > kCpuMaxRunBytes ||
        *w % 64 != 0 || *r % 64 != 0)
      return std::nullopt;
    c.wrun = static_cast<int>(*w);
    c.rrun = static_cast<int>(*r);
    next = 4;
  }
  if (parts.size() <= next) return std::nullopt;
  const std::optional<int64_t> threads = field(parts[next], 't');
  if (!threads || *threads < 1 || *threads > 4096) return std::nullopt;
  c.threads = static_cast<int>(*threads);
  if (parts.size() == next + 2) {
    if (parts[next + 1] != "nt") return std::nullopt;
    c.nt = true;
  } else if (parts.size() != next + 1) {
    return std::nullopt;
  }
  return c;
}

}  // namespace

Candidate CpuConfig::ToCandidate() const {
  Candidate c;
  switch (kind) {
    case Kind::kNaive:
      c.name = "cpu.naive";
      c.params = {{"tile", 0}, {"threads", 1}, {"colwrite", 0}};
      break;
    case Kind::kNaiveColWrite:
      c.name = "cpu.naive.colwrite";
      c.params = {{"tile", 0}, {"threads", 1}, {"colwrite", 1}};
      break;
    case Kind::kTiled:
      c.name = "cpu.tile" + std::to_string(tile) + ".t" + std::to_string(threads);
      c.params = {{"tile", tile}, {"threads", threads}, {"colwrite", 0}};
      break;
    case Kind::kSimd:
      c.name = std::string("cpu.") + cpu_simd::IsaName(static_cast<cpu_simd::Isa>(isa)) +
               (wrun > 0 ? ".w" + std::to_string(wrun) + ".r" + std::to_string(rrun)
                         : ".b" + std::to_string(block)) +
               ".t" + std::to_string(threads) + (nt ? ".nt" : "");
      c.params = {{"isa", isa}, {"threads", threads}, {"nt", nt ? 1 : 0}};
      if (wrun > 0) {
        c.params["wrun"] = wrun;
        c.params["rrun"] = rrun;
      } else {
        c.params["block"] = block;
      }
      break;
    case Kind::kTestSkipLast:
      c.name = "cpu.test.skiplast";
      c.params = {{"test_fault", 1}};
      break;
    case Kind::kTestGapWrite:
      c.name = "cpu.test.gapwrite";
      c.params = {{"test_fault", 2}};
      break;
  }
  return c;
}

StatusOr<CpuConfig> CpuConfig::FromCandidate(const Candidate& c) {
  CpuConfig config;
  const std::string_view name = c.name;
  auto unknown = [&] {
    return Status::InvalidArgument("cpu: unknown candidate \"" + c.name + "\"");
  };
  if (name == "cpu.naive") {
    config.kind = Kind::kNaive;
  } else if (name == "cpu.naive.colwrite") {
    config.kind = Kind::kNaiveColWrite;
  } else if (name == "cpu.test.skiplast") {
    config.kind = Kind::kTestSkipLast;
  } else if (name == "cpu.test.gapwrite") {
    config.kind = Kind::kTestGapWrite;
  } else if (std::optional<CpuConfig> simd = ParseSimdName(name)) {
    config = *simd;
  } else {
    const std::string_view prefix = "cpu.tile";
    if (name.substr(0, prefix.size()) != prefix) return unknown();
    const std::string_view rest = name.substr(prefix.size());
    const size_t dot = rest.find(".t");
    if (dot == std::string_view::npos) return unknown();
    const std::optional<int64_t> tile = ParseInt(rest.substr(0, dot));
    const std::optional<int64_t> threads = ParseInt(rest.substr(dot + 2));
    if (!tile || !threads || *threads < 1 || *threads > 4096) return unknown();
    if (std::find(std::begin(kTiles), std::end(kTiles), *tile) == std::end(kTiles))
      return unknown();
    config.kind = Kind::kTiled;
    config.tile = static_cast<int>(*tile);
    config.threads = static_cast<int>(*threads);
  }
  // Only the canonical spelling ("cpu.tile32.t1", not "cpu.tile032.t01"): one variant, one name
  // in the cache.
  if (config.ToCandidate().name != c.name) return unknown();
  if (!c.params.empty() && c.params != config.ToCandidate().params)
    return Status::InvalidArgument("cpu: the params of \"" + c.name + "\" do not match its name");
  return config;
}

// ---------------------------------------------------------------------------------------------
// cpu_internal

namespace cpu_internal {

void ReferenceTranspose(const Problem& p, const unsigned char* in, unsigned char* out) {
  const Layout L(p);
  switch (p.elem_size()) {
    case 1:
      return ReferenceTyped<1>(L, in, out);
    case 2:
      return ReferenceTyped<2>(L, in, out);
    case 4:
      return ReferenceTyped<4>(L, in, out);
    case 8:
      return ReferenceTyped<8>(L, in, out);
    case 16:
      return ReferenceTyped<16>(L, in, out);
  }
}

Status CompareOutput(const Problem& p, const unsigned char* expected, const unsigned char* actual) {
  const int64_t n = p.out_alloc_bytes();
  if (std::memcmp(expected, actual, static_cast<size_t>(n)) == 0) return Status::OK();
  int64_t off = 0;
  while (expected[off] == actual[off]) ++off;
  int64_t mismatched = 0;
  for (int64_t k = off; k < n; ++k) mismatched += expected[k] != actual[k] ? 1 : 0;
  const int64_t es = p.elem_size();
  const OutputByte at = LocateOutputByte(p, off);
  const int64_t e = at.element, b = at.batch, out_row = at.out_row, out_col = at.out_col;
  std::ostringstream msg;
  if (at.in_gap) {
    msg << "wrote into the output's ld gap at byte offset " << off << " (batch " << b
        << ", output row " << out_row << ", column " << out_col << " >= rows " << p.rows << ")";
  } else {
    auto hex = [&](const unsigned char* buf) {
      std::string s = "0x";
      char d[3];
      for (int64_t k = es - 1; k >= 0; --k) {  // little-endian element, most significant first
        std::snprintf(d, sizeof(d), "%02x", buf[e * es + k]);
        s += d;
      }
      return s;
    };
    msg << "mismatch at batch " << b << ", row " << out_col << ", col " << out_row << ": expected "
        << hex(expected) << ", got " << hex(actual);
  }
  msg << " (" << mismatched << " bytes differ)";
  return Status::FailedPrecondition(msg.str());
}

Status RunConfig(const CpuConfig& config, const Problem& p, const unsigned char* in,
                 unsigned char* out, ThreadPool* pool) {
  const Layout L(p);
  switch (p.elem_size()) {
    case 1:
      return RunTyped<1>(config, L, in, out, pool);
    case 2:
      return RunTyped<2>(config, L, in, out, pool);
    case 4:
      return RunTyped<4>(config, L, in, out, pool);
    case 8:
      return RunTyped<8>(config, L, in, out, pool);
    case 16:
      return RunTyped<16>(config, L, in, out, pool);
  }
  return Status::InvalidArgument("cpu: unsupported element size " + std::to_string(p.elem_size()));
}

std::optional<int> ParseCpuMax(const std::string& s) {
  const std::string t = Trim(s);
  const size_t space = t.find(' ');
  if (space == std::string::npos) return std::nullopt;
  const std::string_view quota = std::string_view(t).substr(0, space);
  const std::optional<int64_t> period = ParseInt(Trim(t.substr(space + 1)));
  if (quota == "max" || !period || *period <= 0) return std::nullopt;
  const std::optional<int64_t> q = ParseInt(quota);
  if (!q || *q <= 0) return std::nullopt;
  return static_cast<int>(std::clamp<int64_t>(*q / *period, 1, 1 << 20));
}

std::optional<int64_t> ParseCacheSize(const std::string& s) {
  std::string t = Trim(s);
  if (t.empty()) return std::nullopt;
  int64_t mult = 1;
  switch (t.back()) {
    case 'K':
    case 'k':
      mult = int64_t{1} << 10;
      break;
    case 'M':
    case 'm':
      mult = int64_t{1} << 20;
      break;
    case 'G':
    case 'g':
      mult = int64_t{1} << 30;
      break;
  }
  if (mult != 1) t.pop_back();
  const std::optional<int64_t> v = ParseInt(t);
  if (!v || *v <= 0 || *v > (int64_t{1} << 40)) return std::nullopt;
  return *v * mult;
}

}  // namespace cpu_internal

// ---------------------------------------------------------------------------------------------
// CpuBackend

CpuBackend::CpuBackend(CpuBackendOptions options) : options_(options) {
  const HostInfo host = ReadHostInfo();
  const UsableCpus usable = ReadUsableCpus();
  max_threads_ = options_.max_threads > 0 ? options_.max_threads : usable.count;
  llc_bytes_ = host.l3 ? *host.l3 : host.l2 ? *host.l2 : kDefaultLlcBytes;
  cache_source_ = host.cache_source;
  pool_ = std::make_shared<ThreadPool>(max_threads_, usable.cpus);
  isas_ = cpu_simd::SupportedIsas();

  auto size_str = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "0"; };
  device_.backend = "cpu";
  device_.index = 0;
  device_.name = host.model;
  device_.memory_bytes = PhysicalMemoryBytes();
  device_.attributes = {
      {"cores", std::to_string(host.cores)},
      {"logical_cpus", std::to_string(host.logical)},
      {"threads_max", std::to_string(max_threads_)},
      {"cpus_usable", std::to_string(usable.count)},
      {"simd", cpu_simd::IsaName(isas_.back())},
      {"l1d_bytes", size_str(host.l1d)},
      {"l2_bytes", size_str(host.l2)},
      {"l3_bytes", size_str(host.l3)},
      {"arch", host.arch},
  };
  Fnv1a64 h;
  h.Add(host.model);
  h.Add(host.arch);
  h.Add(std::to_string(host.cores));
  h.Add(std::to_string(host.logical));
  h.Add(size_str(host.l1d));
  h.Add(size_str(host.l2));
  h.Add(size_str(host.l3));
  device_.uuid = options_.instance_id.empty() ? "cpu-" + h.Hex() : options_.instance_id;
  device_.library_version = kLibraryVersion;
}

CpuBackend::~CpuBackend() = default;

std::vector<Candidate> CpuBackend::Candidates(const Problem& p) const {
  std::vector<Candidate> out;
  const bool valid = ValidateProblem(p).ok();
  const bool parallel = valid && p.bytes() >= kCpuMinParallelBytes && max_threads_ > 1;
  const int all = parallel ? max_threads_ : 1;
  const cpu_simd::Isa best = isas_.back();

  // SIMD: the best level on all threads, in every square blocking smaller than the matrix (only
  // b4 for parallel problems, see below) and in each column-walk shape whose block is smaller
  // than the matrix; streaming stores
  // where the output rows allow them and the output is at least kCpuMinStreamingBytes (the timed
  // runs are of cold caches: from there on streaming stores may win, the tuner decides). For
  // parallel problems also one single-threaded and (where the CPU has a wider level) one
  // base-level candidate, for comparison.
  CpuConfig c;
  c.kind = CpuConfig::Kind::kSimd;
  c.isa = static_cast<int>(best);
  c.threads = all;
  const bool nt = valid && (p.out_ld() * p.elem_size()) % 64 == 0 &&
                  p.out_alloc_bytes() >= kCpuMinStreamingBytes;
  auto push = [&] {
    c.nt = false;
    out.push_back(c.ToCandidate());
    if (nt) {
      c.nt = true;
      out.push_back(c.ToCandidate());
    }
  };
  const int64_t micro = valid ? cpu_simd::MicroEdge(best, p.elem_size()) : 1;
  int64_t covered = 0;  // the previous block's edge in elements
  for (int block : kSimdBlocks) {
    // A block as large as the matrix walks it like the previous one: skip the duplicate.
    if (valid && covered >= std::max(p.rows, p.cols)) break;
    covered = micro * block;
    // Parallel problems: neither row by row (b1: each output line is written alone) nor b16 (its
    // 1024-byte-square blocks are what the column walks do better); they never won there, and
    // fewer candidates keep a 64 MiB tune quick.
    if (parallel && block != 4) continue;
    c.block = block;
    push();
  }
  c.block = 1;
  bool whole = false;  // a previous shape's block already covers the whole matrix
  for (const auto& [wrun, rrun] : kSimdRuns) {
    const bool covers =
        valid && p.rows * p.elem_size() <= wrun && p.cols * p.elem_size() <= rrun;
    if (covers && whole) continue;
    whole = whole || covers;
    c.wrun = wrun;
    c.rrun = rrun;
    push();
  }
  c.wrun = 0;
  c.rrun = 0;
  c.nt = false;
  c.block = kSimdBlocks[1];
  if (parallel) {
    c.threads = 1;
    out.push_back(c.ToCandidate());
    c.threads = all;
  }
  if (parallel && best != cpu_simd::Isa::kBase) {
    c.isa = static_cast<int>(cpu_simd::Isa::kBase);
    out.push_back(c.ToCandidate());
  }

  // Portable scalar blocks (every size, or 32 and 64 on parallel problems) and the naive loops,
  // for problems small enough to time them quickly: above kCpuMaxNaiveBytes the scalar blocks are
  // 10 to 30 times slower than the SIMD ones and each of their runs costs as much tune time as a
  // dozen SIMD runs.
  if (!valid || p.bytes() <= kCpuMaxNaiveBytes) {
    c = CpuConfig{};
    c.kind = CpuConfig::Kind::kTiled;
    c.threads = all;
    for (int tile : kTiles) {
      if (parallel && tile != 32 && tile != 64) continue;
      c.tile = tile;
      out.push_back(c.ToCandidate());
    }
    c = CpuConfig{};
    c.kind = CpuConfig::Kind::kNaive;
    out.push_back(c.ToCandidate());
    c.kind = CpuConfig::Kind::kNaiveColWrite;
    out.push_back(c.ToCandidate());
  }
  if (options_.enable_test_faults) {
    CpuConfig t;
    t.kind = CpuConfig::Kind::kTestSkipLast;
    out.push_back(t.ToCandidate());
    if (p.out_ld() > p.rows) {
      t.kind = CpuConfig::Kind::kTestGapWrite;
      out.push_back(t.ToCandidate());
    }
  }
  return out;
}

StatusOr<std::unique_ptr<Session>> CpuBackend::Open(const Problem& p) {
  TR_RETURN_IF_ERROR(ValidateProblem(p, device_.memory_bytes));
  // Input, output and reference must fit, without the rotating buffers (those adapt).
  const uint64_t footprint =
      static_cast<uint64_t>(p.in_alloc_bytes()) + 2 * static_cast<uint64_t>(p.out_alloc_bytes());
  if (device_.memory_bytes > 0 && footprint > device_.memory_bytes)
    return Status::ResourceExhausted("cpu: " + p.ToString() + " needs " +
                                     std::to_string(footprint) + " bytes, the host has " +
                                     std::to_string(device_.memory_bytes));
  // ...and fit in what is available now (MemAvailable, the cgroup's limit), so that a large
  // problem is refused instead of getting the daemon OOM-killed. The rotating buffers take at most
  // a quarter of what is left.
  uint64_t memory_bytes = device_.memory_bytes;
  if (auto available = ReadAvailableMemory(options_.memory)) {
    if (footprint > available->bytes)
      return Status::ResourceExhausted(
          "cpu: " + p.ToString() + " needs " + std::to_string(footprint) +
          " bytes (input, output and reference), only " + std::to_string(available->bytes) +
          " bytes are available (" + available->source + ")");
    const uint64_t left = available->bytes - footprint;
    memory_bytes = memory_bytes > 0 ? std::min(memory_bytes, left) : left;
  }
  auto session = std::make_unique<CpuSession>(p, pool_, max_threads_, llc_bytes_, memory_bytes,
                                              options_.enable_test_faults);
  TR_RETURN_IF_ERROR(session->Init());
  return std::unique_ptr<Session>(std::move(session));
}

}  // namespace transposed
