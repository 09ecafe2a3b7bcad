// The offline evaluation of the ANSWER_NOW answer (issue 26 item 5): how close the configuration
// a daemon answers at once, before any tune, comes to the tuned winner, on measured data.
//
// Input: transpose_bench's --all-csv files (bench/run_gpu.sh writes bench_all.csv and
// random_all.csv on every GPU run): one row per problem and configuration with its measured
// bandwidth. Each file set is one device. For every problem P of the set:
//   valid    the candidates the daemon offers P (kernels::CandidateConfigs, bit-exact: the CUDA
//            backend's list without vendor libraries) that were measured on P without error;
//   winner   the fastest of them (what an exhaustive tune stores);
//   stored   the winners of the other problems as TuneResults (leave-one-out: a database that
//            holds every other problem of the set), or, with `store_size` k > 0, of k other
//            problems drawn from `seed` (a sparse database, as on a fresh node), or none (cold);
//   answer   ChooseFirstAnswer(P, stored, valid): the function the daemon's ANSWER_NOW calls;
//   ratio    the answer's measured bandwidth on P over the winner's.
// Rows of one problem from several files (two runs of the listed shapes) are averaged per
// configuration. Summary: median, p10 (the value at index floor(0.1 * (n - 1)) of the ascending
// ratios), worst, how many reach 0.9.
// Plain functions over values; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "core/tune_result.h"

namespace transposed::bench {

// One problem with every configuration's measured bandwidth (GB/s), by configuration name.
struct MeasuredProblem {
  Problem problem;
  std::map<std::string, double> gbps;
};

// Parses one --all-csv file (header names the columns; "problem" optional, "dtype", "rows",
// "cols", "batch", "config", "gbps" required, "ld_in", "ld_out", "method", "error" optional:
// rows with an error or a method other than "family" are skipped). Problems in first-seen order,
// merged into `into` by Problem::Key() (a configuration measured again is averaged).
Status ParseAllConfigsCsv(const std::string& text, std::vector<MeasuredProblem>* into);

struct EvalOptions {
  int store_size = -1;  // -1: every other problem (leave-one-out); 0: none (cold); k: k drawn
  uint64_t seed = 1;    // the draw of a sparse store
};

struct EvalRow {
  Problem problem;
  std::string answer, winner;
  AnswerSource source = AnswerSource::kHeuristic;
  std::string nearest;  // the stored problem whose winner was answered (kNearest)
  double answer_gbps = 0, winner_gbps = 0;
  double ratio() const { return winner_gbps > 0 ? answer_gbps / winner_gbps : 0; }
};

struct EvalSummary {
  int n = 0, at_least_0_9 = 0, nearest = 0, heuristic = 0;
  double median = 0, p10 = 0, worst = 0;
  std::string worst_problem;
};

// Problems with no measured valid candidate are left out (counted in *skipped when given).
std::vector<EvalRow> Evaluate(const std::vector<MeasuredProblem>& set, const EvalOptions& o,
                              int* skipped = nullptr);
EvalSummary Summarize(const std::vector<EvalRow>& rows);

}  // namespace transposed::bench
