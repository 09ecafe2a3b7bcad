// cpu_bench: the CPU backend's figures (docs/cpu-backend.md). For each problem it runs the tuner
// exactly as the daemon does (default TuneOptions, the CPU backend with its default threads) and
// prints one row: the winner, its GB/s, the memcpy ceiling measured side by side in the same
// tune, the ratio, the winner's rel_spread, whether the answer is flagged noisy, the tune's wall
// time and the 1-minute load average before the tune. The last line gives the median rel_spread
// of the winners and the worst ratio per element size.
//   cpu_bench [--only SUBSTRING] [--threads N] [--budget SECONDS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tuner/cpu_backend.h"
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

int Main(int argc, char** argv) {
  std::string only;
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
    } else {
      std::fprintf(stderr, "usage: cpu_bench [--only SUBSTRING] [--threads N] [--budget S]\n");
      return 2;
    }
  }
  CpuBackend backend(bo);
  const DeviceInfo& d = backend.device();
  std::printf("# %s, %s threads, simd %s, library %s\n", d.name.c_str(),
              d.attributes.at("threads_max").c_str(), d.attributes.at("simd").c_str(),
              d.library_version.c_str());
  std::printf("%-22s %-22s %8s %8s %6s %6s %5s %6s %5s\n", "problem", "winner", "GB/s", "memcpy",
              "ratio", "spread", "noisy", "tune_s", "load");
  std::vector<Problem> problems;
  for (DType t : {DType::kF32, DType::kF64, DType::kU8, DType::kF16, DType::kC128})
    for (int64_t n : {2048, 4096}) problems.push_back(Square(n, t));
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
    std::sort(spreads.begin(), spreads.end());
    const size_t n = spreads.size();
    const double median = n % 2 ? spreads[n / 2] : 0.5 * (spreads[n / 2 - 1] + spreads[n / 2]);
    std::printf("# median rel_spread %.3f;", median);
    for (const auto& [es, ratio] : worst) std::printf(" worst ratio %dB %.3f;", es, ratio);
    std::printf(" load %.2f\n", LoadAverage());
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) { return transposed::Main(argc, argv); }
