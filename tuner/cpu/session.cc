#include "tuner/cpu/session.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tuner/cpu/config.h"
#include "tuner/cpu/cpu_simd.h"
#include "tuner/cpu/run.h"

namespace transposed {

namespace {

using Clock = std::chrono::steady_clock;
using Byte = unsigned char;

// Warm-up runs stop after this much time (but at least one runs): a large problem's first run
// already faults in the pages and wakes the pool threads.
constexpr double kWarmupSeconds = 0.005;
constexpr int64_t kAlign = 64;

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
  // a pool thread was preempted is re-taken, at most min_samples times per call; after that, disturbed
  // runs are kept (both counts are in the method); a first sample at or over opt.cutoff_s ends the
  // measurement (screened: MeasureOptions::cutoff_s).
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
      const int64_t pre0 = ThreadPreemptions() + pool_->pool_preemptions();
      const Clock::time_point t0 = Clock::now();
      Status s = run(k);
      const Clock::time_point t1 = Clock::now();
      const int64_t preempted = ThreadPreemptions() + pool_->pool_preemptions() - pre0;
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
      if (samples.size() == 1 && opt.cutoff_s > 0 && dt >= opt.cutoff_s) break;  // screened
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

StatusOr<std::unique_ptr<Session>> OpenCpuSession(const Problem& p,
                                                  std::shared_ptr<ThreadPool> pool,
                                                  int max_threads, int64_t llc_bytes,
                                                  uint64_t memory_bytes, bool test_faults) {
  auto session = std::make_unique<CpuSession>(p, std::move(pool), max_threads, llc_bytes,
                                              memory_bytes, test_faults);
  TR_RETURN_IF_ERROR(session->Init());
  return std::unique_ptr<Session>(std::move(session));
}

}  // namespace transposed
