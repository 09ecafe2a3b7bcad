// The tuner: given a Backend and a Problem, find the fastest valid candidate.
//
// Search: every candidate is checked bit-exact, then given a quick measurement, screened: one
// whose first launch already takes quick_cutoff times the best time known (the copy ceiling,
// measured quickly first, or the fastest candidate so far) is reported by that launch alone, so
// that candidates out of the race (tiles on a 5-row matrix) cost one launch each; the leaders are
// then re-measured side by side with longer measurements, in rounds, and the best median wins
// (each final measurement of a big problem taken over several buffer placements: TuneOptions).
// After each round, a finalist whose median so far is more than prune_margin slower than the best
// so far is dropped from the later rounds (never the incumbent; none when exhaustive). A winner
// whose rel_spread exceeds max_rel_spread, or whose final median came out more than max_slowdown
// times its quick one (the device slowed down during the final pass: it happened once on an H100, a
// winner stored at a third of its speed), is measured once more, side by side with the ceiling,
// and the answer carries that re-measurement; then it is judged again: the fastest finalist whose
// final figure beats the winner's new one by more than max_rel_spread is measured side by side
// with it (and the ceiling), and the faster of the two wins (a load that came during the final
// rounds never leaves a winner slower than a finalist it beat). A time
// budget bounds the whole tune; candidates not reached within it are recorded as skipped.
// The copy ceiling is measured in the same run (in the final rounds, side by side with the
// finalists), so every result carries its share of it. TuneResult::breakdown says where the
// tune's time went.
//
// Thread-safety: RunTune is reentrant, but the caller must not run two tunes on one device at
// once (measurements must not overlap); the daemon serialises tunes per device.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "core/tune_result.h"
#include "tuner/backend.h"

namespace transposed {

// A winner whose samples spread more than this, (max - min) / median, is not trusted: the tuner
// re-measures it once, and an answer still above it is flagged noisy (Answer.noisy).
inline constexpr double kMaxTrustedRelSpread = 0.2;
// A winner whose final median is more than this many times its quick median is re-measured once
// (the final pass ran on a disturbed device; a steady one measures both within a few percent).
inline constexpr double kMaxTrustedSlowdown = 1.5;

struct TuneOptions {
  double budget_seconds = 20.0;   // wall-time budget of one tune
  bool exhaustive = false;        // long-measure every candidate (validation of the search)
  MeasureOptions quick{1, 3, 0.002, 50};     // first pass over all candidates
  // Side-by-side re-measure of the leaders, over 3 buffer placements where the problem is big
  // enough for the backend's rule (core/placements.h): the final figure, and the winner, are the
  // median placement's, not one allocation's luck. The quick pass stays on one.
  MeasureOptions final{3, 15, 0.02, 2000, 3};
  // Quick pass screening (MeasureOptions::cutoff_s): this many times the best time known; 0: off
  // (and off when exhaustive). A screened candidate is at least this much slower than another
  // candidate or the copy, while finalists are the leaders within finalist_margin: it could be one
  // only as one of the `finalists` fastest, and the final pass then measures it in full.
  double quick_cutoff = 2.0;
  int finalists = 4;              // how many leaders the final pass re-measures
  double finalist_margin = 0.10;  // ...plus any within this fraction of the quick-pass best
  double prune_margin = 0.03;     // final rounds: drop finalists this much slower than the best
  double max_rel_spread = kMaxTrustedRelSpread;  // re-measure a winner spread wider than this
  double max_slowdown = kMaxTrustedSlowdown;     // ...or this much slower than its quick median
  // The winner so far (a re-tune): measured whatever the budget and always a finalist, so that
  // it stays the winner unless another candidate measures faster side by side with it.
  std::string incumbent;
};

// Called once per candidate result as it completes: (result, 1-based index, quick-pass total).
// The quick pass reports every candidate once, in order (index 1..total; phase "quick", "check"
// or "skipped"); then each finalist's final result follows with its own index (phase "final").
using ProgressFn = std::function<void(const CandidateResult&, int, int)>;

// Runs a tune. Errors: whatever Backend::Open returns (e.g. RESOURCE_EXHAUSTED); NOT_FOUND
// ("no valid candidate") if every candidate failed; CANCELLED if *cancel became true.
StatusOr<TuneResult> RunTune(Backend& backend, const Problem& problem, const TuneOptions& options,
                             const ProgressFn& progress = nullptr,
                             const std::atomic<bool>* cancel = nullptr);

}  // namespace transposed
