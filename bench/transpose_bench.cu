// transpose_bench: effective bandwidth of the transpose family against the device-to-device copy
// ceiling and cuBLAS geam, on one GPU, in one run.
//
// Two modes:
//   fixed (default)   the benchmark problems of bench/problems.h;
//   --random N        N problems drawn from a seed (--seed S, else a fresh one, printed) across
//                     element sizes 1/2/4/8/16, odd and aligned shapes, skinny sides, batches and
//                     leading dimensions, 16 MiB to 2 GiB (--min-mib/--max-mib), with a summary
//                     per element size: median and worst share of the copy, ratio to cuBLAS;
//                     --kind K keeps only the drawn problems of class K (odd, aligned, skinny,
//                     batched, strided), the same problems for the same seed.
// For each problem, in the same run and through the one measurement harness the daemon's worker
// uses (transposed/kernels/harness.h: rotating pairs past 4x L2, event-timed samples, median;
// for a problem beyond a few L2 sizes, the median over --placements buffer sets allocated while
// the earlier are held, 3 by default as the daemon's final pass: core/placements.h):
//   memcpy        cudaMemcpyAsync device-to-device of the same bytes (the ceiling);
//   cublas_geam   the family's vendor member `cublas.geam` (cublasSgeam/Dgeam, op(A) = A^T; f32
//                 and f64, one matrix; dlopen'd: skipped where libcublas is absent);
//   naive, tile, tile_padded  the textbook kernels (naive, tile32x32.rows8.pad0/pad1);
//   family_best   the best of our own kernels (every non-vendor configuration EnumerateConfigs
//                 offers);
//   tuned         the best of everything, cuBLAS included: what the daemon's exhaustive search
//                 would answer.
// --problem SPEC (repeatable) measures the given problems instead of the fixed list; --config
// SUBSTR[,SUBSTR...] keeps only the configurations whose names contain one of the substrings
// (A/B runs, profiling one kernel).
// Every configuration timed (cuBLAS included) is first checked against the reference kernel on a
// poisoned output with random bits (bit-exactly; cuBLAS value-exactly: NaN payloads may change,
// see config.h); a failing one is reported and never ranked.
// Effective bandwidth is 2 * bytes / median time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/problems.h"
#include "core/placements.h"
#include "core/problem.h"
#include "transposed/kernels/config.h"
#include "transposed/kernels/harness.h"
#include "transposed/kernels/launch.h"

namespace transposed {
namespace {

using kernels::TransposeConfig;

struct Row {
  std::string problem, kind, method, config;
  Problem p;
  bool ok = false;
  std::string error;
  double median_s = 0, min_s = 0;
  int samples = 0, buffers = 0, placements = 1;
  double copy_s = 0;
  double gbps() const { return ok ? EffectiveGBps(p.bytes(), median_s) : 0; }
  double pct() const { return ok && copy_s > 0 ? 100.0 * copy_s / median_s : 0; }
};

// One buffer set's share of the timing options over `sets` sets (PlacementShare's split).
kernels::TimingOptions Share(const kernels::TimingOptions& t, int sets) {
  MeasureOptions o{t.warmup, t.min_samples, t.min_seconds, t.max_samples, sets};
  const MeasureOptions s = PlacementShare(o, sets);
  kernels::TimingOptions r = t;
  r.warmup = s.warmup;
  r.min_samples = s.min_samples;
  r.min_seconds = s.min_seconds;
  r.max_samples = s.max_samples;
  return r;
}

struct Bench {
  cudaStream_t stream = nullptr;
  std::unique_ptr<kernels::EventPool> events;
  kernels::TimingOptions timing;
  int placements = 3;    // --placements: buffer sets per figure where the problem is big enough
  std::vector<Row> all;  // every configuration of every problem
  uint64_t check_seed = 0x5eedb000;
  bool any_failed = false;
  std::vector<std::string> only;  // --config: names containing one of these (empty: every one)

  bool Wanted(const TransposeConfig& c) const {
    if (only.empty()) return true;
    const std::string n = c.Name();
    return std::any_of(only.begin(), only.end(),
                       [&](const std::string& o) { return n.find(o) != std::string::npos; });
  }

  // Measures one problem; returns its summary rows (memcpy, geam, textbook, family_best, tuned).
  std::vector<Row> Problem1(const std::string& label, const std::string& kind, const Problem& p) {
    std::vector<Row> rows;
    auto row = [&](const std::string& method, const std::string& config) {
      Row r;
      r.problem = label;
      r.kind = kind;
      r.method = method;
      r.config = config;
      r.p = p;
      return r;
    };
    auto buffers = kernels::RotatingBuffers::Create(p, stream);
    if (!buffers.ok()) {
      Row r = row("memcpy", "D2D");
      r.error = buffers.status().ToString();
      std::printf("%s: %s\n", label.c_str(), r.error.c_str());
      any_failed = true;
      rows.push_back(r);
      return rows;
    }
    kernels::RotatingBuffers& b = **buffers;
    // The daemon's rule (core/placements.h): big problems are timed over several buffer sets.
    kernels::PlacementSets sets(&b);
    std::string fallback;
    auto planned = sets.Ensure(placements, stream, &fallback);
    if (!fallback.empty()) std::printf("%s: %s\n", label.c_str(), fallback.c_str());
    const int n_sets = planned.ok() ? *planned : 1;
    if (!planned.ok()) std::printf("%s: %s\n", label.c_str(), planned.status().ToString().c_str());
    uint64_t rotate = 0;
    // Times launch(set, pair) on each set with its share of the options: the median of the sets'
    // medians, the fastest sample of all.
    auto time = [&](Row& r, const std::function<Status(const kernels::RotatingBuffers&, int)>& launch) {
      const kernels::TimingOptions share = Share(timing, n_sets);
      std::vector<double> medians;
      r.buffers = b.pairs();
      r.placements = n_sets;
      for (int s = 0; s < n_sets; ++s) {
        const kernels::RotatingBuffers& set = sets.set(s);
        auto t = kernels::TimeLaunches([&](int i) { return launch(set, i); }, set.pairs(), &rotate,
                                       stream, *events, share);
        if (!t.ok()) {
          r.error = t.status().ToString();
          return;
        }
        medians.push_back(t->median_s());
        r.min_s = s == 0 ? t->min_s() : std::min(r.min_s, t->min_s());
        r.samples += static_cast<int>(t->samples_s.size());
      }
      r.ok = true;
      r.median_s = MedianOf(medians);
    };

    Row copy = row("memcpy", "D2D");
    time(copy, [&](const kernels::RotatingBuffers& s, int i) {
      return kernels::LaunchMemcpy(s, i, stream);
    });
    rows.push_back(copy);

    // Check, then time, every configuration the family offers for this problem.
    const std::vector<std::pair<std::string, TransposeConfig>> textbook = {
        {"naive", kernels::NaiveConfig()},
        {"tile", kernels::TextbookTileConfig()},
        {"tile_padded", kernels::TextbookPaddedTileConfig()}};
    Row best_family = row("family_best", ""), best_any = row("tuned", "");
    std::vector<Row> extra;
    for (const TransposeConfig& c : kernels::EnumerateConfigs(p)) {
      if (!kernels::VendorAvailable(c) || !Wanted(c)) continue;
      Row r = row("family", c.Name());
      auto prepared = kernels::PreparedLaunch::Prepare(c, p);
      Status st = prepared.ok() ? Status::OK() : prepared.status();
      for (int s = 0; s < n_sets; ++s)
        for (int i = 0; st.ok() && i < sets.set(s).pairs(); ++i)
          st = prepared->CheckPointers(sets.set(s).in(i), sets.set(s).out(i));
      if (st.ok()) st = b.PrepareCheck(++check_seed, stream);
      if (st.ok()) st = prepared->Run(b.in(0), b.out(0), stream);
      if (st.ok()) {
        const cudaError_t e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) st = Status::Internal(cudaGetErrorString(e));
      }
      if (st.ok()) st = b.CompareCheck(stream, c.canonicalizes_nan());
      if (!st.ok()) {
        r.error = "check failed: " + st.ToString();
        std::printf("  %s %s: %s\n", label.c_str(), c.Name().c_str(), r.error.c_str());
        // Ours must never fail; a vendor library that is not bit-exact is a finding, not a bug.
        if (!c.vendor()) any_failed = true;
      } else {
        time(r, [&](const kernels::RotatingBuffers& s, int i) {
          return prepared->Run(s.in(i), s.out(i), stream);
        });
      }
      r.copy_s = copy.ok ? copy.median_s : 0;
      all.push_back(r);
      if (c.algorithm == kernels::Algorithm::kCublasGeam) {  // (cutensor.permute: row only)
        Row g = r;
        g.method = "cublas_geam";
        extra.push_back(g);
      }
      for (const auto& [method, tc] : textbook)
        if (tc == c) {
          Row t = r;
          t.method = method;
          extra.push_back(t);
        }
      if (!r.ok) continue;
      if (!c.vendor() && (!best_family.ok || r.median_s < best_family.median_s)) {
        best_family = r;
        best_family.method = "family_best";
      }
      if (!best_any.ok || r.median_s < best_any.median_s) {
        best_any = r;
        best_any.method = "tuned";
      }
    }
    rows.insert(rows.end(), extra.begin(), extra.end());
    rows.push_back(best_family);
    rows.push_back(best_any);
    for (Row& r : rows) r.copy_s = copy.ok ? copy.median_s : 0;

    std::printf("\n%-34s %-12s %-36s %10s %9s %7s\n", label.c_str(), "method", "config",
                "median_us", "GB/s", "%copy");
    for (const Row& r : rows) {
      if (r.ok) {
        std::printf("%-34s %-12s %-36s %10.2f %9.1f %6.1f%%\n", "", r.method.c_str(),
                    r.config.c_str(), r.median_s * 1e6, r.gbps(), r.pct());
      } else {
        std::printf("%-34s %-12s %-36s  failed: %s\n", "", r.method.c_str(), r.config.c_str(),
                    r.error.c_str());
      }
    }
    std::fflush(stdout);
    return rows;
  }
};

void WriteCsv(const std::string& path, const std::vector<Row>& rows, uint64_t seed) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f,
               "problem,kind,dtype,rows,cols,batch,ld_in,ld_out,bytes,method,config,median_us,"
               "min_us,gbps,pct_of_copy,samples,buffers,placements,seed,error\n");
  for (const Row& r : rows) {
    std::string err = r.error;
    std::replace(err.begin(), err.end(), ',', ';');
    std::replace(err.begin(), err.end(), '\n', ' ');
    std::fprintf(f, "\"%s\",%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%s,%s,%.3f,%.3f,%.1f,%.1f,%d,%d,%d,",
                 r.problem.c_str(), r.kind.c_str(), std::string(DTypeName(r.p.dtype)).c_str(),
                 static_cast<long long>(r.p.rows), static_cast<long long>(r.p.cols),
                 static_cast<long long>(r.p.batch), static_cast<long long>(r.p.in_ld()),
                 static_cast<long long>(r.p.out_ld()), static_cast<long long>(r.p.bytes()),
                 r.method.c_str(), r.config.c_str(), r.median_s * 1e6, r.min_s * 1e6, r.gbps(),
                 r.pct(), r.samples, r.buffers, r.placements);
    if (seed) {
      std::fprintf(f, "%llu", static_cast<unsigned long long>(seed));
    }
    std::fprintf(f, ",%s\n", err.c_str());
  }
  std::fclose(f);
}

const Row* Find(const std::vector<Row>& rows, size_t from, size_t to, const std::string& method) {
  for (size_t i = from; i < to; ++i)
    if (rows[i].method == method) return &rows[i];
  return nullptr;
}

// One line per problem: copy GB/s and every method's GB/s (share of the copy).
void PrintSummary(const std::vector<Row>& summary) {
  const char* const kCols[] = {"cublas_geam", "naive", "tile", "tile_padded", "family_best",
                               "tuned"};
  std::printf("\n%-30s %9s %13s %13s %13s %13s %13s %13s  %s\n", "problem", "copy GB/s", "geam",
              "naive", "tile", "tile_padded", "family_best", "tuned", "tuned config");
  for (size_t i = 0; i < summary.size();) {
    size_t j = i;
    while (j < summary.size() && summary[j].problem == summary[i].problem) ++j;
    const Row* copy = Find(summary, i, j, "memcpy");
    const Row* tuned = Find(summary, i, j, "tuned");
    std::printf("%-30s %9.0f", summary[i].problem.c_str(), copy ? copy->gbps() : 0.0);
    for (const char* col : kCols) {
      const Row* r = Find(summary, i, j, col);
      char buf[64] = "-";
      if (r && r->ok) std::snprintf(buf, sizeof(buf), "%.0f (%.0f%%)", r->gbps(), r->pct());
      if (r && !r->ok) std::snprintf(buf, sizeof(buf), "failed");
      std::printf(" %13s", buf);
    }
    std::printf("  %s\n", tuned && tuned->ok ? tuned->config.c_str() : "-");
    i = j;
  }
}

// Random mode: per element size, the share of the copy of `tuned` and of `family_best` (median,
// worst) and the ratio tuned / cuBLAS and family_best / cuBLAS where geam applies.
void PrintRandomSummary(const std::vector<Row>& summary, uint64_t seed) {
  struct Acc {
    std::vector<double> tuned, family, tuned_vs_geam, family_vs_geam;
    int n = 0, n64 = 0;
    std::vector<double> tuned64;
  };
  std::map<int, Acc> by;
  for (size_t i = 0; i < summary.size();) {
    size_t j = i;
    while (j < summary.size() && summary[j].problem == summary[i].problem) ++j;
    const Row* tuned = Find(summary, i, j, "tuned");
    const Row* fam = Find(summary, i, j, "family_best");
    const Row* geam = Find(summary, i, j, "cublas_geam");
    Acc& a = by[summary[i].p.elem_size()];
    ++a.n;
    if (tuned && tuned->ok) {
      a.tuned.push_back(tuned->pct());
      if (summary[i].p.bytes() >= (int64_t{64} << 20)) a.tuned64.push_back(tuned->pct());
    }
    if (fam && fam->ok) a.family.push_back(fam->pct());
    if (geam && geam->ok && tuned && tuned->ok)
      a.tuned_vs_geam.push_back(geam->median_s / tuned->median_s);
    if (geam && geam->ok && fam && fam->ok)
      a.family_vs_geam.push_back(geam->median_s / fam->median_s);
    i = j;
  }
  std::printf("\nrandom problems, seed %llu: share of the same-run cudaMemcpy D2D\n",
              static_cast<unsigned long long>(seed));
  std::printf("%-6s %4s %14s %14s %16s %16s %18s %18s\n", "elem", "n", "tuned median",
              "tuned worst", ">=64MiB median", ">=64MiB worst", "tuned/geam min", "ours/geam min");
  for (auto& [e, a] : by) {
    auto worst = [](const std::vector<double>& v) {
      return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
    };
    // An element size with no problem of 64 MiB or more prints "-", not a 0% median.
    char m64[32] = "-", w64[32] = "-";
    if (!a.tuned64.empty()) {
      std::snprintf(m64, sizeof(m64), "%.1f%% (%zu)", MedianOf(a.tuned64), a.tuned64.size());
      std::snprintf(w64, sizeof(w64), "%.1f%%", worst(a.tuned64));
    }
    char g1[32] = "-", g2[32] = "-";
    if (!a.tuned_vs_geam.empty())
      std::snprintf(g1, sizeof(g1), "%.3f (%zu)", worst(a.tuned_vs_geam), a.tuned_vs_geam.size());
    if (!a.family_vs_geam.empty())
      std::snprintf(g2, sizeof(g2), "%.3f", worst(a.family_vs_geam));
    std::printf("%-6d %4d %13.1f%% %13.1f%% %16s %16s %18s %18s\n", e, a.n, MedianOf(a.tuned),
                worst(a.tuned), m64, w64, g1, g2);
  }
}

// "[BATCHx]ROWSxCOLS DTYPE [ld_in=N] [ld_out=N]" (Problem::ToString's form), or nullopt.
std::optional<Problem> ParseProblem(const std::string& spec) {
  std::istringstream in(spec);
  std::string dims, dtype, extra;
  if (!(in >> dims >> dtype)) return std::nullopt;
  std::vector<int64_t> n;
  std::istringstream d(dims);
  for (std::string part; std::getline(d, part, 'x');) {
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1) return std::nullopt;
    n.push_back(v);
  }
  const std::optional<DType> t = ParseDType(dtype);
  if (!t || n.size() < 2 || n.size() > 3) return std::nullopt;
  Problem p = bench::MakeProblem(n[n.size() - 2], n.back(), *t, n.size() == 3 ? n[0] : 1);
  while (in >> extra) {
    const size_t eq = extra.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string value = extra.substr(eq + 1);
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v < 1) return std::nullopt;  // as the dimensions
    if (extra.substr(0, eq) == "ld_in") {
      p.ld_in = v;
    } else if (extra.substr(0, eq) == "ld_out") {
      p.ld_out = v;
    } else {
      return std::nullopt;
    }
  }
  if (!ValidateProblem(p).ok()) return std::nullopt;
  return p;
}

int Main(int argc, char** argv) {
  std::string csv, all_csv, filter, kind;
  std::vector<Problem> given;
  std::vector<std::string> only;
  int random_n = 0;
  int placements = 3;
  uint64_t seed = 0;
  bool seed_given = false;
  int64_t min_mib = 16, max_mib = 2048;
  kernels::TimingOptions timing;
  timing.warmup = 3;
  timing.min_samples = 15;
  timing.min_seconds = 0.02;
  timing.max_samples = 200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--csv") {
      csv = next();
    } else if (a == "--all-csv") {
      all_csv = next();
    } else if (a == "--filter") {
      filter = next();
    } else if (a == "--problem") {
      const std::string spec = next();
      const std::optional<Problem> p = ParseProblem(spec);
      if (!p) {
        std::fprintf(stderr, "--problem: cannot parse '%s' (e.g. '8191x6143 u8', "
                     "'64x1000x999 f32 ld_in=1003')\n", spec.c_str());
        return 2;
      }
      given.push_back(*p);
    } else if (a == "--config") {
      std::istringstream list(next());
      for (std::string name; std::getline(list, name, ',');)
        if (!name.empty()) only.push_back(name);
    } else if (a == "--kind") {
      kind = next();
    } else if (a == "--placements") {
      placements = std::max(1, std::min(kMaxPlacements, std::atoi(next().c_str())));
    } else if (a == "--samples") {
      timing.min_samples = std::max(3, std::atoi(next().c_str()));
    } else if (a == "--random") {
      random_n = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--seed") {
      seed = std::strtoull(next().c_str(), nullptr, 10);
      seed_given = true;
    } else if (a == "--min-mib") {
      min_mib = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--max-mib") {
      max_mib = std::max(1, std::atoi(next().c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: transpose_bench [--csv PATH] [--all-csv PATH] [--filter SUBSTR] "
                   "[--samples N] [--placements N] [--problem SPEC]... "
                   "[--config SUBSTR[,SUBSTR...]]\n"
                   "       transpose_bench --random N [--seed S] [--min-mib M] [--max-mib M] "
                   "[--kind odd|aligned|skinny|batched|strided] [--csv PATH] [--all-csv PATH]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }

  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int mem_clock_khz = 0, bus_width = 0;
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, dev);
  std::printf(
      "device: %s, sm_%d%d, %d SMs, L2 %.1f MiB, %.1f GiB, memory clock %d MHz x %d bit, "
      "CUDA driver %d, runtime %d\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
      prop.totalGlobalMem / 1073741824.0, mem_clock_khz / 1000, bus_width, driver, runtime);
  const TransposeConfig geam = *TransposeConfig::FromName("cublas.geam");
  std::printf("cuBLAS: %s%s\n", kernels::VendorDescription(geam).c_str(),
              kernels::VendorAvailable(geam) ? "" : " (the cublas_geam column is skipped)");
  const TransposeConfig permute = *TransposeConfig::FromName("cutensor.permute");
  std::printf("cuTENSOR: %s%s\n", kernels::VendorDescription(permute).c_str(),
              kernels::VendorAvailable(permute) ? "" : " (cutensor.permute is skipped)");

  Bench bench;
  bench.timing = timing;
  bench.placements = placements;
  bench.only = only;
  if (cudaStreamCreateWithFlags(&bench.stream, cudaStreamNonBlocking) != cudaSuccess) return 2;
  auto events = kernels::EventPool::Create();
  if (!events.ok()) {
    std::fprintf(stderr, "%s\n", events.status().ToString().c_str());
    return 2;
  }
  bench.events = std::move(*events);

  std::vector<Row> summary;
  if (random_n > 0) {
    if (!seed_given) seed = bench::FreshSeed();
    std::printf("random mode: %d problems, seed %llu (repeat with --seed %llu), %lld..%lld MiB\n",
                random_n, static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed), static_cast<long long>(min_mib),
                static_cast<long long>(max_mib));
    for (const bench::RandomProblem& rp :
         bench::RandomProblems(seed, random_n, min_mib << 20, max_mib << 20)) {
      const std::string label = rp.problem.ToString();
      if (!filter.empty() && label.find(filter) == std::string::npos) continue;
      if (!kind.empty() && rp.kind != kind) continue;
      std::vector<Row> rows = bench.Problem1(label, rp.kind, rp.problem);
      summary.insert(summary.end(), rows.begin(), rows.end());
    }
  } else {
    for (const Problem& p : given.empty() ? bench::BenchmarkProblems() : given) {
      const std::string label = p.ToString();
      if (!filter.empty() && label.find(filter) == std::string::npos) continue;
      std::vector<Row> rows = bench.Problem1(label, "fixed", p);
      summary.insert(summary.end(), rows.begin(), rows.end());
    }
  }
  PrintSummary(summary);
  if (random_n > 0) PrintRandomSummary(summary, seed);
  if (!csv.empty()) WriteCsv(csv, summary, random_n > 0 ? seed : 0);
  if (!all_csv.empty()) WriteCsv(all_csv, bench.all, random_n > 0 ? seed : 0);
  if (bench.any_failed)
    std::printf("\nSOME CONFIGURATIONS FAILED their check or launch (see above)\n");
  return bench.any_failed ? 1 : 0;
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) { return transposed::Main(argc, argv); }
