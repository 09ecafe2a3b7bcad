// answer_eval: how close the ANSWER_NOW answer comes to the tuned winner, on measured data
// (bench/answer_eval.h says how). No GPU needed: it reads transpose_bench --all-csv files of one
// device (bench/run_gpu.sh runs it on each GPU run's fresh random set; the committed samples of
// bench/data/ are the unit test's).
//   answer_eval [--store K] [--seed S] [--min-median R] [--min-p10 R] [--quiet] FILE.csv...
//     --store K       the database holds K other problems drawn by --seed (default: all others,
//                     leave-one-out; 0: cold, the family defaults only)
//     --min-median R  exit status 1 when the median ratio is below R (likewise --min-p10)
// Prints one row per problem (ratio, answer, winner, source, the stored neighbour) unless
// --quiet, then the summary line.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/answer_eval.h"

namespace transposed::bench {
namespace {

int Main(int argc, char** argv) {
  EvalOptions o;
  double min_median = 0, min_p10 = 0;
  bool quiet = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--store" && i + 1 < argc) {
      o.store_size = std::atoi(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      o.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--min-median" && i + 1 < argc) {
      min_median = std::atof(argv[++i]);
    } else if (a == "--min-p10" && i + 1 < argc) {
      min_p10 = std::atof(argv[++i]);
    } else if (a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] != '-') {
      files.push_back(a);
    } else {
      std::fprintf(stderr,
                   "usage: answer_eval [--store K] [--seed S] [--min-median R] [--min-p10 R] "
                   "[--quiet] FILE.csv...\n");
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "answer_eval: no --all-csv file given\n");
    return 2;
  }
  std::vector<MeasuredProblem> set;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::fprintf(stderr, "answer_eval: cannot read %s\n", f.c_str());
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    if (Status s = ParseAllConfigsCsv(text.str(), &set); !s.ok()) {
      std::fprintf(stderr, "answer_eval: %s: %s\n", f.c_str(), s.ToString().c_str());
      return 2;
    }
  }
  int skipped = 0;
  const std::vector<EvalRow> rows = Evaluate(set, o, &skipped);
  if (!quiet) {
    std::printf("ratio,answer_gbps,winner_gbps,problem,answer,winner,source,nearest\n");
    for (const EvalRow& r : rows)
      std::printf("%.3f,%.1f,%.1f,\"%s\",%s,%s,%s,\"%s\"\n", r.ratio(), r.answer_gbps,
                  r.winner_gbps, r.problem.ToString().c_str(), r.answer.c_str(),
                  r.winner.c_str(), AnswerSourceName(r.source), r.nearest.c_str());
  }
  const EvalSummary s = Summarize(rows);
  std::printf(
      "answer_eval: %d problems (%s), ANSWER_NOW answer / tuned winner: median %.3f, p10 %.3f, "
      "worst %.3f (%s); %d/%d >= 0.9; %d nearest, %d heuristic; %d skipped\n",
      s.n,
      o.store_size < 0   ? "leave-one-out"
      : o.store_size == 0 ? "cold store"
                          : ("store of " + std::to_string(o.store_size) + ", seed " +
                             std::to_string(o.seed))
                                .c_str(),
      s.median, s.p10, s.worst, s.worst_problem.c_str(), s.at_least_0_9, s.n, s.nearest,
      s.heuristic, skipped);
  if (s.n == 0) return 1;
  return s.median < min_median || s.p10 < min_p10 ? 1 : 0;
}

}  // namespace
}  // namespace transposed::bench

int main(int argc, char** argv) { return transposed::bench::Main(argc, argv); }
