// tune_eval: the search-quality evaluation of the CUDA backend (issue #4).
//
// For each benchmark problem (or, with --random N, N problems drawn from a seed by the same
// generator transpose_bench uses: bench/problems.h) it runs RunTune twice on the first GPU: with
// the default options (the daemon's fast tune) and exhaustively (every valid candidate
// long-measured side by side).
// It prints one CSV row per problem: the fast tune's seconds, pick, GB/s and share of the copy
// ceiling, the exhaustive winner and its GB/s, the fast pick's GB/s as the exhaustive run
// measured it, and whether that is within 2% of the exhaustive winner. Exit status 1 if any tune
// failed. Worker: --worker, else $TRANSPOSED_WORKER, else next to this binary. The seed is printed
// and taken fresh unless --seed is given.
//   --only A[,B...]   the problems whose name ("16384x16384 f32") contains one of the substrings
//   --fast-only       no exhaustive tune (the exhaustive columns stay empty)
//   --repeat N        each fast tune N times (its winner and GB/s per repeat, in the CSV)
//   --fast NAME:SPEC  a fast tune with other options than the daemon's (repeatable; each problem
//                     is then tuned by every variant, rows tagged NAME), SPEC a comma list of
//                     quick=W/N/S/M, final=W/N/S/M (MeasureOptions warmup/min_samples/
//                     min_seconds/max_samples), finalists=N, margin=F, prune=F, cutoff=F (the
//                     quick pass's screening, TuneOptions::quick_cutoff; 0: off)
//   --breakdown FILE  where each fast tune spent its time (TuneResult::breakdown), one CSV row
//                     per phase: problem,repeat,phase,seconds,count; a summary line on stderr
//   tune_eval [--worker PATH] [--csv FILE] [--only SUBSTRING] [options above]
//   tune_eval --random N [--seed S] [--max-mib M] [--worker PATH] [--csv FILE] [options above]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/problems.h"
#include "tuner/cuda/cuda_backend.h"
#include "tuner/tuner.h"

namespace transposed {
namespace {

// "W/N/S/M": warmup, min_samples, min_seconds, max_samples.
StatusOr<MeasureOptions> ParseMeasureOptions(const std::string& v) {
  MeasureOptions o;
  if (std::sscanf(v.c_str(), "%d/%d/%lf/%d", &o.warmup, &o.min_samples, &o.min_seconds,
                  &o.max_samples) != 4 ||
      o.warmup < 0 || o.min_samples < 1 || o.min_seconds < 0 || o.max_samples < o.min_samples)
    return Status::InvalidArgument("'" + v + "' is not W/N/S/M (warmup >= 0, 1 <= N <= M, S >= 0)");
  return o;
}

// "NAME:quick=W/N/S/M,final=W/N/S/M,finalists=N,margin=F,prune=F,cutoff=F" (every key optional).
StatusOr<std::pair<std::string, TuneOptions>> ParseVariant(const std::string& spec) {
  const size_t colon = spec.find(':');
  std::pair<std::string, TuneOptions> v{spec.substr(0, colon), TuneOptions{}};
  if (v.first.empty()) return Status::InvalidArgument("no NAME before ':'");
  if (colon == std::string::npos) return v;
  std::string rest = spec.substr(colon + 1);
  for (size_t at = 0; at < rest.size();) {
    const size_t comma = std::min(rest.find(',', at), rest.size());
    const std::string kv = rest.substr(at, comma - at);
    at = comma + 1;
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq), val = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (key == "quick" || key == "final") {
      TR_ASSIGN_OR_RETURN(MeasureOptions o, ParseMeasureOptions(val));
      MeasureOptions& target = key == "quick" ? v.second.quick : v.second.final;
      o.placements = target.placements;  // the daemon's buffer placements stay
      target = o;
    } else if (key == "finalists") {
      v.second.finalists = std::max(1, std::atoi(val.c_str()));
    } else if (key == "prune") {
      v.second.prune_margin = std::max(0.0, std::atof(val.c_str()));
    } else if (key == "cutoff") {
      v.second.quick_cutoff = std::max(0.0, std::atof(val.c_str()));
    } else if (key == "margin") {
      v.second.finalist_margin = std::max(0.0, std::atof(val.c_str()));
    } else {
      return Status::InvalidArgument("unknown key '" + key + "'");
    }
  }
  return v;
}

int Main(int argc, char** argv) {
  CudaBackendOptions bo;
  std::string csv_path, only;
  int random_n = 0;
  uint64_t seed = 0;
  bool seed_given = false;
  int64_t max_mib = 2048;
  bool fast_only = false;
  int repeat = 1;
  std::string breakdown_path;
  std::vector<std::pair<std::string, TuneOptions>> variants;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--fast" && i + 1 < argc) {
      auto v = ParseVariant(argv[++i]);
      if (!v.ok()) {
        std::fprintf(stderr, "tune_eval: --fast %s: %s\n", argv[i], v.status().ToString().c_str());
        return 2;
      }
      variants.push_back(std::move(*v));
    } else if (a == "--fast-only") {
      fast_only = true;
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::clamp(std::atoi(argv[++i]), 1, 100);
    } else if (a == "--breakdown" && i + 1 < argc) {
      breakdown_path = argv[++i];
    } else if (a == "--random" && i + 1 < argc) {
      random_n = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
      seed_given = true;
    } else if (a == "--max-mib" && i + 1 < argc) {
      max_mib = std::max(16, std::atoi(argv[++i]));
    } else if (a == "--worker" && i + 1 < argc) {
      bo.worker_path = argv[++i];
    } else if (a == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: tune_eval [--worker PATH] [--csv FILE] [--only SUBSTRING]\n"
                   "       tune_eval --random N [--seed S] [--max-mib M] [--worker PATH] "
                   "[--csv FILE]\n"
                   "       either with [--fast-only] [--repeat N] [--breakdown FILE] "
                   "[--fast NAME:SPEC]...\n");
      return 2;
    }
  }
  auto backends = MakeCudaBackends(bo);
  if (!backends.ok()) {
    std::fprintf(stderr, "tune_eval: %s\n", backends.status().ToString().c_str());
    return 1;
  }
  if (backends->empty()) {
    std::fprintf(stderr, "tune_eval: no GPU visible\n");
    return 1;
  }
  Backend& gpu = *(*backends)[0];
  const DeviceInfo& d = gpu.device();
  std::fprintf(stderr, "device: %s %s cc %s\n", d.name.c_str(), d.uuid.c_str(),
               d.attributes.count("compute_capability")
                   ? d.attributes.at("compute_capability").c_str()
                   : "?");

  std::ofstream csv_file;
  if (!csv_path.empty()) csv_file.open(csv_path);
  auto emit = [&](const std::string& line) {
    std::cout << line << "\n" << std::flush;
    if (csv_file.is_open()) csv_file << line << "\n" << std::flush;
  };
  emit(
      "problem,bytes,candidates,tune_s,pick,pick_gbps,ceiling_gbps,pick_pct_ceiling,"
      "exhaustive_s,exhaustive_best,exhaustive_best_gbps,pick_gbps_in_exhaustive,"
      "pick_vs_best_pct,within_2pct,kind,elem,seed,repeat,variant");
  std::ofstream breakdown_file;
  if (!breakdown_path.empty()) {
    breakdown_file.open(breakdown_path);
    breakdown_file << "problem,variant,repeat,phase,seconds,count\n";
  }

  std::vector<bench::RandomProblem> problems;
  if (random_n > 0) {
    if (!seed_given) seed = bench::FreshSeed();
    std::fprintf(stderr, "random mode: %d problems, seed %llu (repeat with --seed %llu)\n",
                 random_n, static_cast<unsigned long long>(seed),
                 static_cast<unsigned long long>(seed));
    problems = bench::RandomProblems(seed, random_n, int64_t{16} << 20, max_mib << 20);
  } else {
    for (const Problem& p : bench::BenchmarkProblems()) problems.push_back({"fixed", p});
  }
  struct PerSize {
    int n = 0, within = 0;
    double slowest_1g = 0;  // slowest fast tune of a problem up to 1 GiB
  };
  std::map<std::pair<std::string, int>, PerSize> per_size;  // (variant, element size)
  std::map<std::string, PerSize> per_variant;  // slowest_1g: the slowest fast tune of any size

  if (variants.empty()) variants.push_back({"default", TuneOptions{}});  // the daemon's
  TuneOptions exhaustive;
  exhaustive.exhaustive = true;
  exhaustive.budget_seconds = 600;
  exhaustive.final = MeasureOptions{3, 30, 0.06, 20000};

  int failures = 0, within = 0, rows = 0;
  double worst_tune = 0;
  for (const bench::RandomProblem& rp : problems) {
    const Problem& p = rp.problem;
    if (!only.empty()) {
      // --only A,B: the problems whose name contains one of the substrings.
      bool match = false;
      for (size_t at = 0; at <= only.size() && !match;) {
        const size_t comma = std::min(only.find(',', at), only.size());
        match = p.ToString().find(only.substr(at, comma - at)) != std::string::npos;
        at = comma + 1;
      }
      if (!match) continue;
    }
    std::vector<TuneResult> fasts;  // variant-major, then repeat
    for (int vk = 0; vk < static_cast<int>(variants.size()) * repeat; ++vk) {
      const int k = vk % repeat;
      const std::string& vname = variants[vk / repeat].first;
      auto f = RunTune(gpu, p, variants[vk / repeat].second);
      if (!f.ok()) {
        std::fprintf(stderr, "%s: fast tune failed: %s\n", p.ToString().c_str(),
                     f.status().ToString().c_str());
        ++failures;
        break;
      }
      const TimeBreakdown& b = f->breakdown;
      // The round trips to the worker less the worker's own time of the requests.
      double ipc = 0;
      for (const char* ph : {"tune.open", "tune.check", "tune.quick", "tune.quick.ceiling",
                             "tune.final", "tune.final.ceiling_warmup", "tune.final.ceiling",
                             "tune.remeasure", "tune.remeasure.ceiling"})
        ipc += b.seconds(ph);
      for (const char* ph : {"worker.open", "worker.check", "worker.measure", "worker.ceiling"})
        ipc -= b.seconds(ph);
      std::fprintf(stderr,
                   "%s [%s]: fast tune %.3f s, %d candidates: check %.3f s, quick %.3f s (+ceiling "
                   "%.3f s, %d screened), final %.3f s (+ceiling %.3f s, %d rounds of finalists), open %.3f s, close %.3f s; "
                   "worker: check reference %.3f poison %.3f launch %.3f compare %.3f, measure "
                   "warm-up %.3f samples %.3f (timed %.3f); round trips %.3f s\n",
                   p.ToString().c_str(), vname.c_str(), f->tune_seconds, f->tried,
                   b.seconds("tune.check"),
                   b.seconds("tune.quick"), b.seconds("tune.quick.ceiling"),
                   b.count("worker.measure.screened"), b.seconds("tune.final"),
                   b.seconds("tune.final.ceiling") + b.seconds("tune.final.ceiling_warmup"),
                   b.count("tune.final"),
                   b.seconds("tune.open"), b.seconds("tune.close"),
                   b.seconds("worker.check.reference"),
                   b.seconds("worker.check.poison"),
                   b.seconds("worker.check.launch"), b.seconds("worker.check.compare"),
                   b.seconds("worker.measure.warmup") + b.seconds("worker.ceiling.warmup"),
                   b.seconds("worker.measure.samples") + b.seconds("worker.ceiling.samples"),
                   b.seconds("worker.measure.timed") + b.seconds("worker.ceiling.timed"), ipc);
      if (breakdown_file.is_open()) {
        for (const PhaseTime& ph : b.phases()) {
          char row[512];
          std::snprintf(row, sizeof(row), "%s,%s,%d,%s,%.6f,%d\n", p.ToString().c_str(),
                        vname.c_str(), k, ph.phase.c_str(), ph.seconds, ph.count);
          breakdown_file << row << std::flush;
        }
      }
      fasts.push_back(std::move(*f));
    }
    if (fasts.size() < variants.size() * repeat) continue;
    StatusOr<TuneResult> e = Status::Cancelled("--fast-only");
    if (!fast_only) e = RunTune(gpu, p, exhaustive);
    if (!fast_only && !e.ok()) {
      std::fprintf(stderr, "%s: exhaustive tune failed: %s\n", p.ToString().c_str(),
                   e.status().ToString().c_str());
      ++failures;
      continue;
    }
    for (int vk = 0; vk < static_cast<int>(fasts.size()); ++vk) {
      const int k = vk % repeat;
      const std::string& vname = variants[vk / repeat].first;
      const TuneResult* f = &fasts[vk];
      // The fast pick as the exhaustive run measured it (same long, side-by-side measurement).
      double pick_in_e = 0, best_e = 0, pct = 0;
      bool ok2 = false;
      if (e.ok()) {
        for (const auto& c : e->candidates) {
          if (c.candidate.name == f->best.name && c.measurement.valid) {
            pick_in_e = EffectiveGBps(p.bytes(), c.measurement.median_s);
          }
        }
        best_e = e->gbps();
        pct = best_e > 0 ? 100.0 * pick_in_e / best_e : 0;
        ok2 = pct >= 98.0;
        within += ok2 ? 1 : 0;
      }
      ++rows;
      worst_tune = std::max(worst_tune, f->tune_seconds);
      PerSize& ps = per_size[{vname, p.elem_size()}];
      PerSize& pv = per_variant[vname];
      ++pv.n;
      pv.within += ok2 ? 1 : 0;
      pv.slowest_1g = std::max(pv.slowest_1g, f->tune_seconds);
      ++ps.n;
      ps.within += ok2 ? 1 : 0;
      if (p.bytes() <= (int64_t{1} << 30)) ps.slowest_1g = std::max(ps.slowest_1g, f->tune_seconds);
      if (e.ok() && vk == 0) {
        for (const auto& c : e->candidates) {
          if (!c.measurement.valid) {
            std::fprintf(stderr, "%s: %s invalid: %s\n", p.ToString().c_str(),
                         c.candidate.name.c_str(), c.measurement.error.c_str());
          }
        }
      }
      // The fast tune's columns, the exhaustive tune's (empty without one), the problem's.
      char fast[512], exhaustive[512] = ",,,,,,", problem[256];
      std::snprintf(fast, sizeof(fast), "%s,%lld,%zu,%.3f,%s,%.1f,%.1f,%.1f",
                    p.ToString().c_str(), static_cast<long long>(p.bytes()),
                    f->candidates.size(), f->tune_seconds, f->best.name.c_str(), f->gbps(),
                    f->ceiling_gbps(), 100.0 * f->gbps() / f->ceiling_gbps());
      if (e.ok()) {
        std::snprintf(exhaustive, sizeof(exhaustive), ",%.2f,%s,%.1f,%.1f,%.2f,%s",
                      e->tune_seconds, e->best.name.c_str(), best_e, pick_in_e, pct,
                      ok2 ? "yes" : "no");
      }
      std::snprintf(problem, sizeof(problem), ",%s,%d,%llu,%d,%s", rp.kind.c_str(),
                    p.elem_size(), static_cast<unsigned long long>(seed), k, vname.c_str());
      emit(std::string(fast) + exhaustive + problem);
    }
  }
  for (const auto& [key, ps] : per_size)
    std::fprintf(stderr,
                 "[%s] elem %2d: %d/%d fast picks within 2%% of the exhaustive winner; slowest "
                 "fast tune up to 1 GiB %.3f s\n",
                 key.first.c_str(), key.second, ps.within, ps.n, ps.slowest_1g);
  if (random_n > 0)
    std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seed));
  for (const auto& [name, pv] : per_variant)
    std::fprintf(stderr,
                 "[%s]: %d/%d fast picks within 2%% of the exhaustive winner; slowest fast tune "
                 "%.3f s\n",
                 name.c_str(), pv.within, pv.n, pv.slowest_1g);
  std::fprintf(stderr,
               "summary: %d/%d fast picks within 2%% of the exhaustive winner%s; slowest "
               "fast tune %.3f s; %d failures\n",
               within, rows, fast_only ? " (--fast-only: none compared)" : "", worst_tune,
               failures);
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) { return transposed::Main(argc, argv); }
