// cpu_bench: the CPU backend's figures (docs/design/cpu-backend.md). For each problem it runs the
// tuner exactly as the daemon does (default TuneOptions, the CPU backend with its default threads)
// and prints one row: the winner, its GB/s, the memcpy ceiling measured side by side in the same
// tune, the ratio, the winner's rel_spread, whether the answer is flagged noisy, the tune's wall
// time and the 1-minute load average before the tune. The last line gives the median rel_spread
// of the winners and the worst ratio per element size.
// --all: instead of tuning, measures every candidate of each problem (or only those named with
// --candidate, repeatable) and the ceiling side by side in `--rounds` rounds (default 5), each
// round rotating who goes first, with the tuner's final-pass options; prints each candidate's
// GB/s at the median of its rounds' medians and its ratio to the ceiling's.
// --problem ROWS COLS DTYPE LD_IN LD_OUT: that problem instead of the square ones (LD 0: dense).
// --in-l1: the register micro-kernels alone, on the calling thread with the data in L1: for every
// instruction-set level this CPU runs and every element size, cpu_simd::RectKernel (plain stores)
// over 128 input rows of 128 bytes (whole micro-tiles; input and output 16 KiB each), repeated
// for 40 ms, best of 5, output checked; GB/s = 2 x bytes / time. Pin it (taskset -c N) for a
// per-core figure.
// --store-pattern ROWS LINES STRIDE THREADS (x86-64): streaming stores alone, in the pattern of a
// transpose's output: whole 64-byte lines to ROWS rows STRIDE bytes apart, LINES consecutive
// lines to each row in turn, then the next LINES of every row, over a 64 MiB region per thread,
// THREADS threads at once; the fastest of 5 passes, GB/s of bytes written by all.
// --copy MIB SET_MIB (x86-64): copies of MIB MiB on the calling thread, rotating through buffer
// pairs that cover SET_MIB MiB (2 MiB aligned, transparent huge pages advised, as the sessions'),
// by glibc memcpy, `rep movsb` and a streaming-store loop (movntdq), interleaved; the median of
// each, as effective GB/s (2 x bytes / time, as the ceiling's).
//   cpu_bench [--only SUBSTRING] [--threads N] [--budget SECONDS]
//             [--problem ROWS COLS DTYPE LD_IN LD_OUT]
//             [--all [--candidate NAME]... [--rounds N]] | --in-l1
//             | --store-pattern ROWS LINES STRIDE THREADS | --copy MIB SET_MIB
#include <sys/mman.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tuner/cpu/cpu_backend.h"
#include "tuner/cpu/cpu_simd.h"
#include "tuner/tuner.h"

namespace transposed {
namespace {

double LoadAverage() {
  std::ifstream f("/proc/loadavg");
  double v = -1;
  f >> v;
  return v;
}

Problem Square(int64_t n, DType t) {
  Problem p;
  p.rows = n;
  p.cols = n;
  p.dtype = t;
  return p;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --all: every candidate (or the named ones) and the ceiling, interleaved round by round.
int MeasureAll(CpuBackend& backend, const Problem& p, const std::vector<std::string>& names,
               const TuneOptions& to, int rounds) {
  StatusOr<std::unique_ptr<Session>> s = backend.Open(p);
  if (!s.ok()) {
    std::printf("%s: %s\n", p.ToString().c_str(), s.status().ToString().c_str());
    return 1;
  }
  std::vector<Candidate> cands;
  if (names.empty()) {
    cands = backend.Candidates(p);
  } else {
    for (const std::string& n : names) cands.push_back({n, {}});
  }
  for (const Candidate& c : cands) {
    Status st = (*s)->Check(c);
    if (!st.ok()) {
      std::printf("%s: %s\n", c.name.c_str(), st.ToString().c_str());
      return 1;
    }
  }
  const size_t n = cands.size();
  std::vector<std::vector<double>> samples(n + 1);  // [n]: the ceiling
  const double load = LoadAverage();
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k <= n; ++k) {
      const size_t who = (k + static_cast<size_t>(round)) % (n + 1);
      StatusOr<Measurement> m = who == n ? (*s)->MeasureCeiling(to.final)
                                         : (*s)->Measure(cands[who], to.final);
      if (!m.ok()) {
        std::printf("%s: %s\n", who == n ? "ceiling" : cands[who].name.c_str(),
                    m.status().ToString().c_str());
        return 1;
      }
      samples[who].push_back(m->median_s);
    }
  }
  const double ceiling = EffectiveGBps(p.bytes(), Median(samples[n]));
  std::printf("## %s, %d rounds, load %.2f -> %.2f; memcpy %.2f GB/s\n", p.ToString().c_str(),
              rounds, load, LoadAverage(), ceiling);
  for (size_t k = 0; k < n; ++k) {
    const double gbps = EffectiveGBps(p.bytes(), Median(samples[k]));
    std::printf("%-28s %8.2f %6.3f\n", cands[k].name.c_str(), gbps, gbps / ceiling);
  }
  std::fflush(stdout);
  return 0;
}

// --in-l1: RectKernel of every level and element size over 128 input rows of 128 bytes in L1.
int MeasureInL1() {
  constexpr int kRows = 128, kRowBytes = 128, kBytes = kRows * kRowBytes;
  alignas(64) static unsigned char in[kBytes], out[kBytes];
  for (int i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 131 + 7);
  using Clock = std::chrono::steady_clock;
  std::printf("# in L1, one thread, load %.2f: GB/s of RectKernel, %d input rows x %d bytes\n",
              LoadAverage(), kRows, kRowBytes);
  std::printf("%-8s %6s %6s %6s %6s %6s\n", "level", "1B", "2B", "4B", "8B", "16B");
  int wrong = 0;
  for (cpu_simd::Isa isa : cpu_simd::SupportedIsas()) {
    const cpu_simd::RectFn rect = cpu_simd::RectKernel(isa);
    std::printf("%-8s", cpu_simd::IsaName(isa));
    for (int elem : {1, 2, 4, 8, 16}) {
      const int64_t cols = kRowBytes / elem;
      const cpu_simd::Mat m{in, out, /*ldi=*/cols, /*ldo=*/kRows, elem};
      double best = 0;
      for (int trial = 0; trial < 5; ++trial) {
        int64_t calls = 0;
        const Clock::time_point t0 = Clock::now();
        double seconds = 0;
        do {
          for (int k = 0; k < 256; ++k) rect(m, 0, kRows, 0, cols, /*nt=*/false);
          calls += 256;
          seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        } while (seconds < 0.04);
        best = std::max(best, 2.0 * kBytes * static_cast<double>(calls) / seconds / 1e9);
      }
      // The output is the input transposed, so the loop measured the real work.
      for (int64_t i = 0; i < kRows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          wrong += std::memcmp(out + (j * kRows + i) * elem, in + (i * cols + j) * elem, elem) != 0;
      std::printf(" %6.1f", best);
    }
    std::printf("\n");
  }
  if (wrong > 0) std::printf("# %d elements transposed wrong\n", wrong);
  return wrong > 0 ? 1 : 0;
}

// --store-pattern: streaming line stores to `rows` rows `stride` bytes apart, `lines` per row in
// turn, over a 64 MiB region per thread; `threads` threads (pinned to the first CPUs of the
// affinity mask by the caller's taskset, if any) write their own regions at once, each pass
// started together.
int MeasureStorePattern(int64_t rows, int64_t lines, int64_t stride, int threads) {
#if defined(__x86_64__)
  constexpr int64_t kRegion = int64_t{64} << 20;
  const int64_t row_lines = stride / 64;  // whole lines of a row
  if (rows < 1 || lines < 1 || stride < 64 || stride % 16 != 0 || row_lines % lines != 0 ||
      rows * stride > kRegion || threads < 1 || threads > 64) {
    std::fprintf(stderr,
                 "cpu_bench: --store-pattern ROWS LINES STRIDE THREADS: STRIDE a multiple of 16, "
                 "at least 64; LINES dividing STRIDE / 64; ROWS x STRIDE at most 64 MiB; 1 to 64 "
                 "threads\n");
    return 2;
  }
  const int64_t groups = kRegion / (rows * stride);
  const int64_t bytes = groups * rows * row_lines * 64;  // per thread and pass
  constexpr int kPasses = 5;
  std::atomic<int> arrived{0};
  // Every thread waits for all at the start of each pass and at the end of the last.
  auto barrier = [&](int round) {
    arrived.fetch_add(1);
    while (arrived.load() < threads * round) _mm_pause();
  };
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> marks(kPasses + 1);
  auto run = [&](int t) {
    auto* base = static_cast<unsigned char*>(std::aligned_alloc(4096, kRegion));
    if (base == nullptr) std::abort();
    std::memset(base, 1, kRegion);  // the pages faulted in before timing
    const __m128i v = _mm_set1_epi8(static_cast<char>(t));
    for (int pass = 0; pass < kPasses; ++pass) {
      barrier(pass + 1);
      if (t == 0) marks[pass] = Clock::now();
      for (int64_t g = 0; g < groups; ++g) {
        unsigned char* group = base + g * rows * stride;
        for (int64_t c0 = 0; c0 < row_lines; c0 += lines)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t l = 0; l < lines; ++l) {
              auto* line = reinterpret_cast<__m128i*>(group + r * stride + (c0 + l) * 64);
              _mm_stream_si128(line, v);
              _mm_stream_si128(line + 1, v);
              _mm_stream_si128(line + 2, v);
              _mm_stream_si128(line + 3, v);
            }
      }
      _mm_sfence();
    }
    barrier(kPasses + 1);
    if (t == 0) marks[kPasses] = Clock::now();
    std::free(base);
  };
  const double load = LoadAverage();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run, t);
  run(0);
  for (std::thread& th : pool) th.join();
  // A pass ends when the next starts (every thread is through it): the fastest pass, all threads.
  double best = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    const double seconds = std::chrono::duration<double>(marks[pass + 1] - marks[pass]).count();
    best = std::max(best, static_cast<double>(bytes) * threads / seconds / 1e9);
  }
  std::printf("# store pattern: %lld rows %lld bytes apart, %lld lines per row in turn, %d "
              "threads, load %.2f -> %.2f\n%.1f GB/s written\n",
              static_cast<long long>(rows), static_cast<long long>(stride),
              static_cast<long long>(lines), threads, load, LoadAverage(), best);
  return 0;
#else
  (void)rows, (void)lines, (void)stride, (void)threads;
  std::fprintf(stderr, "cpu_bench: --store-pattern needs x86-64\n");
  return 2;
#endif
}

// --copy: memcpy, rep movsb and a streaming copy loop of `mib` MiB rotating through `set_mib`.
int MeasureCopy(int64_t mib, int64_t set_mib) {
#if defined(__x86_64__)
  if (mib < 1 || set_mib < 2 * mib || set_mib > 4096) {
    std::fprintf(stderr, "cpu_bench: --copy MIB SET_MIB: 1 <= MIB, 2 x MIB <= SET_MIB <= 4096\n");
    return 2;
  }
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = static_cast<size_t>(mib) << 20;
  const size_t span = (bytes + kHuge - 1) / kHuge * kHuge;
  const int pairs = static_cast<int>(set_mib / (2 * mib));
  std::vector<unsigned char*> buf(2 * static_cast<size_t>(pairs));
  for (unsigned char*& b : buf) {
    b = static_cast<unsigned char*>(std::aligned_alloc(kHuge, span));
    if (b == nullptr) return 1;
#ifdef MADV_HUGEPAGE
    madvise(b, span, MADV_HUGEPAGE);
#endif
    std::memset(b, 3, span);
  }
  auto rep_movsb = [](unsigned char* dst, const unsigned char* src, size_t n) {
    asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
  };
  auto stream_copy = [](unsigned char* dst, const unsigned char* src, size_t n) {
    for (size_t i = 0; i < n; i += 64) {
      const auto* s = reinterpret_cast<const __m128i*>(src + i);
      auto* d = reinterpret_cast<__m128i*>(dst + i);
      const __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1), c = _mm_load_si128(s + 2),
                    e = _mm_load_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    _mm_sfence();
  };
  const char* const names[] = {"memcpy", "rep_movsb", "stream_loop"};
  std::vector<double> samples[3];
  using Clock = std::chrono::steady_clock;
  const double load = LoadAverage();
  const Clock::time_point start = Clock::now();
  int64_t run = 0;
  // At least 30 copies each and half a second in all.
  while (run < 30 || std::chrono::duration<double>(Clock::now() - start).count() < 0.5) {
    for (int k = 0; k < 3; ++k, ++run) {
      const int pair = static_cast<int>(run % pairs);
      unsigned char* dst = buf[2 * static_cast<size_t>(pair) + 1];
      const unsigned char* src = buf[2 * static_cast<size_t>(pair)];
      const Clock::time_point t0 = Clock::now();
      if (k == 0) std::memcpy(dst, src, bytes);
      if (k == 1) rep_movsb(dst, src, bytes);
      if (k == 2) stream_copy(dst, src, bytes);
      samples[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  for (unsigned char* b : buf) std::free(b);
  std::printf("# copy of %lld MiB rotating through %d pairs (%lld MiB), one thread, load %.2f -> "
              "%.2f\n",
              static_cast<long long>(mib), pairs, static_cast<long long>(2 * pairs * mib), load,
              LoadAverage());
  for (int k = 0; k < 3; ++k)
    std::printf("%-12s %8.2f GB/s\n", names[k],
                EffectiveGBps(static_cast<int64_t>(bytes), Median(samples[k])));
  return 0;
#else
  (void)mib, (void)set_mib;
  std::fprintf(stderr, "cpu_bench: --copy needs x86-64\n");
  return 2;
#endif
}

int Main(int argc, char** argv) {
  std::string only;
  bool all = false;
  int rounds = 5;
  std::vector<std::string> names;
  std::vector<Problem> problems;
  CpuBackendOptions bo;
  TuneOptions to;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      bo.max_threads = std::atoi(argv[++i]);
    } else if (a == "--budget" && i + 1 < argc) {
      to.budget_seconds = std::atof(argv[++i]);
    } else if (a == "--problem" && i + 5 < argc) {
      Problem p;
      p.rows = std::atoll(argv[++i]);
      p.cols = std::atoll(argv[++i]);
      const std::optional<DType> t = ParseDType(argv[++i]);
      p.ld_in = std::atoll(argv[++i]);
      p.ld_out = std::atoll(argv[++i]);
      if (t) p.dtype = *t;
      if (!t || !ValidateProblem(p).ok()) {
        std::fprintf(stderr, "cpu_bench: bad --problem\n");
        return 2;
      }
      problems.push_back(p);
    } else if (a == "--all") {
      all = true;
    } else if (a == "--in-l1") {
      return MeasureInL1();
    } else if (a == "--copy" && i + 2 < argc) {
      return MeasureCopy(std::atoll(argv[i + 1]), std::atoll(argv[i + 2]));
    } else if (a == "--store-pattern" && i + 4 < argc) {
      return MeasureStorePattern(std::atoll(argv[i + 1]), std::atoll(argv[i + 2]),
                                 std::atoll(argv[i + 3]), std::atoi(argv[i + 4]));
    } else if (a == "--candidate" && i + 1 < argc) {
      names.push_back(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: cpu_bench [--only SUBSTRING] [--threads N] [--budget S] "
                   "[--problem ROWS COLS DTYPE LD_IN LD_OUT] "
                   "[--all [--candidate NAME]... [--rounds N]] | --in-l1 "
                   "| --store-pattern ROWS LINES STRIDE THREADS | --copy MIB SET_MIB\n");
      return 2;
    }
  }
  CpuBackend backend(bo);
  const DeviceInfo& d = backend.device();
  std::printf("# %s, %s threads, simd %s, library %s\n", d.name.c_str(),
              d.attributes.at("threads_max").c_str(), d.attributes.at("simd").c_str(),
              d.library_version.c_str());
  if (problems.empty())
    for (DType t : {DType::kF32, DType::kF64, DType::kU8, DType::kF16, DType::kC128})
      for (int64_t n : {2048, 4096}) problems.push_back(Square(n, t));
  if (all) {
    int failures = 0;
    for (const Problem& p : problems)
      if (only.empty() || p.ToString().find(only) != std::string::npos)
        failures += MeasureAll(backend, p, names, to, rounds);
    return failures > 0 ? 1 : 0;
  }
  std::printf("%-22s %-22s %8s %8s %6s %6s %5s %6s %5s\n", "problem", "winner", "GB/s", "memcpy",
              "ratio", "spread", "noisy", "tune_s", "load");
  std::vector<double> spreads;
  std::map<int, double> worst;
  int failures = 0;
  for (const Problem& p : problems) {
    if (!only.empty() && p.ToString().find(only) == std::string::npos) continue;
    const double load = LoadAverage();
    StatusOr<TuneResult> r = RunTune(backend, p, to);
    if (!r.ok()) {
      std::printf("%-22s FAILED: %s\n", p.ToString().c_str(), r.status().ToString().c_str());
      ++failures;
      continue;
    }
    const double ratio = r->ceiling_gbps() > 0 ? r->gbps() / r->ceiling_gbps() : 0;
    const double spread = r->best_measurement.rel_spread();
    spreads.push_back(spread);
    auto [it, fresh] = worst.emplace(p.elem_size(), ratio);
    if (!fresh) it->second = std::min(it->second, ratio);
    std::printf("%-22s %-22s %8.2f %8.2f %6.3f %6.3f %5s %6.2f %5.2f\n", p.ToString().c_str(),
                r->best.name.c_str(), r->gbps(), r->ceiling_gbps(), ratio, spread,
                spread > to.max_rel_spread ? "yes" : "no", r->tune_seconds, load);
    std::fflush(stdout);
  }
  if (!spreads.empty()) {
    std::printf("# median rel_spread %.3f;", Median(spreads));
    for (const auto& [es, ratio] : worst) std::printf(" worst ratio %dB %.3f;", es, ratio);
    std::printf(" load %.2f\n", LoadAverage());
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) { return transposed::Main(argc, argv); }
