#include "tuner/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/placements.h"

namespace transposed {
namespace {

using Clock = std::chrono::steady_clock;

// The final pass splits options.final into this many interleaved rounds.
constexpr int kFinalRounds = 3;
// At most this many distinct errors are quoted in a NOT_FOUND message.
constexpr int kQuotedErrors = 3;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs fn() and adds its wall time to `phase` of *b.
template <typename Fn>
auto Timed(TimeBreakdown* b, const char* phase, Fn&& fn) {
  const Clock::time_point t0 = Clock::now();
  auto r = fn();
  b->Add(phase, SecondsSince(t0));
  return r;
}

bool Cancelled(const std::atomic<bool>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_relaxed);
}

// One round's share of the final options: the sample targets divided by the round count (at
// least one sample each); every round warms up, since other candidates ran in between.
MeasureOptions RoundOptions(const MeasureOptions& final_opt, int rounds) {
  MeasureOptions o = final_opt;
  o.min_samples = std::max(1, (final_opt.min_samples + rounds - 1) / rounds);
  o.min_seconds = final_opt.min_seconds / rounds;
  o.max_samples = std::max(o.min_samples, (final_opt.max_samples + rounds - 1) / rounds);
  return o;
}

// Accumulates a candidate's (or the ceiling's) rounds of the final pass.
struct RoundAccumulator {
  std::vector<Measurement> rounds;
  std::string error;  // first failure; a failed round disqualifies the candidate

  void Add(const StatusOr<Measurement>& m) {
    if (!error.empty()) return;
    if (!m.ok()) {
      error = m.status().ToString();
    } else if (!m->valid) {
      error = m->error.empty() ? "invalid measurement" : m->error;
    } else {
      rounds.push_back(*m);
    }
  }

  // The median of the round medians (robust to one disturbed round), the extreme min and max,
  // and the total sample count: the combination of core/placements.h, over rounds instead of
  // buffer placements (the method is the last round's, with its count of final rounds).
  Measurement Combine() const {
    if (!error.empty()) return Measurement::Invalid(error);
    if (rounds.empty()) return Measurement::Invalid("no final round completed");
    Measurement c = CombinePlacements(rounds);
    c.method = rounds.back().method;
    c.method.final_rounds = static_cast<int>(rounds.size());
    return c;
  }
};

std::string NotFoundMessage(const Problem& problem, const std::vector<CandidateResult>& results) {
  std::vector<std::string> errors;
  for (const CandidateResult& r : results) {
    if (r.measurement.valid || r.measurement.error.empty()) continue;
    std::string e = r.candidate.name + ": " + r.measurement.error;
    if (std::find(errors.begin(), errors.end(), e) == errors.end()) errors.push_back(e);
    if (static_cast<int>(errors.size()) == kQuotedErrors) break;
  }
  std::string msg = "no valid candidate for " + problem.ToString();
  if (results.empty()) return msg + ": the backend offers no candidate";
  msg += ": ";
  for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "; " : "") + errors[i];
  return msg;
}

}  // namespace

StatusOr<TuneResult> RunTune(Backend& backend, const Problem& problem, const TuneOptions& options,
                             const ProgressFn& progress, const std::atomic<bool>* cancel) {
  const Clock::time_point start = Clock::now();
  TR_RETURN_IF_ERROR(ValidateProblem(problem));

  TuneResult result;
  result.problem = problem;
  result.device = backend.device();
  TimeBreakdown* const bd = &result.breakdown;

  const std::vector<Candidate> candidates =
      Timed(bd, "tune.candidates", [&] { return backend.Candidates(problem); });
  const int total = static_cast<int>(candidates.size());
  if (candidates.empty()) return Status::NotFound(NotFoundMessage(problem, {}));

  TR_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                      Timed(bd, "tune.open", [&] { return backend.Open(problem); }));
  if (Cancelled(cancel)) return Status::Cancelled("tune cancelled");

  // The incumbent of a re-tune, if the backend still offers it.
  int incumbent = -1;
  for (int i = 0; i < total && !options.incumbent.empty(); ++i)
    if (candidates[i].name == options.incumbent) incumbent = i;
  result.total = total;

  // The best time known for the quick pass's screening: the copy ceiling, measured quickly first
  // (so that candidates out of the race are screened whatever their order), then the fastest
  // quick median so far.
  const bool screen = options.quick_cutoff > 0 && !options.exhaustive;
  double best_known_s = 0;
  if (screen) {
    StatusOr<Measurement> c = Timed(bd, "tune.quick.ceiling",
                                    [&] { return session->MeasureCeiling(options.quick); });
    if (c.ok() && c->valid) best_known_s = c->median_s;
  }

  // Quick pass: check, then measure, every candidate in order until the budget is spent.
  result.candidates.resize(candidates.size());
  for (int i = 0; i < total; ++i) {
    CandidateResult& r = result.candidates[i];
    r.candidate = candidates[i];
    if (Cancelled(cancel)) return Status::Cancelled("tune cancelled");
    // The first candidate always runs, so that any budget yields a result.
    // So does the incumbent: a small budget must not lose a known good winner.
    if (i > 0 && i != incumbent && SecondsSince(start) >= options.budget_seconds) {
      r.phase = Phase::kSkipped;
      r.measurement = Measurement::Invalid("time budget exhausted");
    } else {
      ++result.tried;
      Status check = Timed(bd, "tune.check", [&] { return session->Check(r.candidate); });
      if (!check.ok()) {
        r.phase = Phase::kCheck;
        r.measurement = Measurement::Invalid(check.ToString());
      } else {
        r.phase = Phase::kQuick;
        MeasureOptions quick = options.quick;
        if (screen && best_known_s > 0) quick.cutoff_s = options.quick_cutoff * best_known_s;
        StatusOr<Measurement> m =
            Timed(bd, "tune.quick", [&] { return session->Measure(r.candidate, quick); });
        if (!m.ok()) {
          r.measurement = Measurement::Invalid(m.status().ToString());
        } else {
          r.measurement = *m;
          if (!r.measurement.valid && r.measurement.error.empty())
            r.measurement.error = "invalid measurement";
          if (r.measurement.valid && (best_known_s == 0 || r.measurement.median_s < best_known_s))
            best_known_s = r.measurement.median_s;
        }
      }
    }
    if (progress) progress(r, i + 1, total);
  }

  // Finalists: the `finalists` fastest by quick median, plus any within the margin of the best;
  // every valid candidate when exhaustive.
  std::vector<int> ranked;
  for (int i = 0; i < total; ++i)
    if (result.candidates[i].measurement.valid) ranked.push_back(i);
  if (ranked.empty()) return Status::NotFound(NotFoundMessage(problem, result.candidates));
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) {
    return result.candidates[a].measurement.median_s < result.candidates[b].measurement.median_s;
  });
  std::vector<int> finalists;
  const double best_quick = result.candidates[ranked.front()].measurement.median_s;
  for (size_t k = 0; k < ranked.size(); ++k) {
    const double median = result.candidates[ranked[k]].measurement.median_s;
    if (options.exhaustive || static_cast<int>(k) < std::max(1, options.finalists) ||
        median <= best_quick * (1.0 + options.finalist_margin) || ranked[k] == incumbent) {
      finalists.push_back(ranked[k]);
    }
  }
  std::sort(finalists.begin(), finalists.end());  // back to candidate order for the rounds

  // Final pass: kFinalRounds rounds, each measuring every finalist and the ceiling once, the
  // starting point rotating from round to round, so that drift affects everyone alike. Round 0
  // always runs; later rounds only while the budget lasts.
  const MeasureOptions round_opt = RoundOptions(options.final, kFinalRounds);
  // The ceiling is warmed first: one round's ceiling measurement, discarded (the cost of one
  // more round's ceiling). Its first samples on a device that ran only short launches with host
  // gaps (the quick pass), or on placement buffers not yet copied through, came out slow: on an
  // idle H100, 2048x128x256 bf16 measured a ceiling spread of 1.27 at 91 us a sample, marked
  // as contention and queued a needless re-measure.
  if (Cancelled(cancel)) return Status::Cancelled("tune cancelled");
  (void)Timed(bd, "tune.final.ceiling_warmup", [&] { return session->MeasureCeiling(round_opt); });
  const int slots = static_cast<int>(finalists.size()) + 1;  // slot == finalists.size(): ceiling
  std::vector<RoundAccumulator> acc(slots);
  std::vector<bool> active(slots, true);
  for (int round = 0; round < kFinalRounds; ++round) {
    if (round > 0 && SecondsSince(start) >= options.budget_seconds) break;
    if (round > 0 && !options.exhaustive) {
      // Drop the finalists already clearly slower than the best so far (and the failed ones).
      std::vector<Measurement> so_far(slots - 1);
      double best_so_far = 0;
      for (int s = 0; s < slots - 1; ++s) {
        so_far[s] = acc[s].Combine();
        const Measurement& m = so_far[s];
        if (m.valid && (best_so_far == 0 || m.median_s < best_so_far)) best_so_far = m.median_s;
      }
      for (int s = 0; s < slots - 1; ++s) {
        if (finalists[s] == incumbent || !active[s]) continue;
        const Measurement& m = so_far[s];
        if (!m.valid || m.median_s > best_so_far * (1.0 + options.prune_margin)) {
          active[s] = false;
          bd->Add("tune.final.pruned", 0);
        }
      }
    }
    for (int s = 0; s < slots; ++s) {
      if (Cancelled(cancel)) return Status::Cancelled("tune cancelled");
      const int slot = (s + round) % slots;
      if (!active[slot]) continue;
      if (slot == slots - 1) {
        acc[slot].Add(
            Timed(bd, "tune.final.ceiling", [&] { return session->MeasureCeiling(round_opt); }));
      } else {
        acc[slot].Add(Timed(bd, "tune.final", [&] {
          return session->Measure(candidates[finalists[slot]], round_opt);
        }));
      }
    }
  }
  // The ceiling is measured in the final rounds only, side by side with the finalists.
  result.ceiling = acc[slots - 1].Combine();

  int best = -1;
  double best_quick_s = 0;  // the winner's quick-pass median
  for (int s = 0; s < slots - 1; ++s) {
    CandidateResult& r = result.candidates[finalists[s]];
    const double quick_s = r.measurement.median_s;
    r.phase = Phase::kFinal;
    r.measurement = acc[s].Combine();
    if (r.measurement.valid &&
        (best < 0 || r.measurement.median_s < result.candidates[best].measurement.median_s)) {
      best = finalists[s];
      best_quick_s = quick_s;
    }
  }
  // A winner too noisy to trust, or much slower in the final pass than in the quick one: one
  // more set of rounds, the winner and the ceiling side by side (alternating which goes first),
  // while the budget lasts. Its result replaces both, so that the answer's ratio and spread come
  // from the same, later stretch of time.
  const double spread = best >= 0 ? result.candidates[best].measurement.rel_spread() : 0;
  const double slowdown = best >= 0 && best_quick_s > 0
                              ? result.candidates[best].measurement.median_s / best_quick_s
                              : 0;
  const bool noisy = spread > options.max_rel_spread;
  const bool slowed = slowdown > options.max_slowdown;
  if (best >= 0 && (noisy || slowed) && SecondsSince(start) < options.budget_seconds) {
    RoundAccumulator again[2];  // 0: the winner, 1: the ceiling
    for (int round = 0; round < kFinalRounds; ++round) {
      if (round > 0 && SecondsSince(start) >= options.budget_seconds) break;
      for (int k = 0; k < 2; ++k) {
        if (Cancelled(cancel)) return Status::Cancelled("tune cancelled");
        if ((k + round) % 2 == 0) {
          again[0].Add(Timed(bd, "tune.remeasure",
                             [&] { return session->Measure(candidates[best], round_opt); }));
        } else {
          again[1].Add(Timed(bd, "tune.remeasure.ceiling",
                             [&] { return session->MeasureCeiling(round_opt); }));
        }
      }
    }
    Measurement winner = again[0].Combine();
    Measurement ceiling = again[1].Combine();
    if (winner.valid && ceiling.valid) {
      winner.method.remeasured_after_rel_spread = noisy ? spread : 0;
      winner.method.remeasured_after_slowdown = slowed ? slowdown : 0;
      result.candidates[best].measurement = std::move(winner);
      result.ceiling = std::move(ceiling);
    }
    // The winner measured again is judged again: the fastest finalist whose final figure beats
    // the winner's new one by more than the noise band (max_rel_spread) is measured side by side
    // with it and the ceiling (round 0 always, later rounds while the budget lasts), and the
    // faster of the two wins, with the ceiling of that same stretch. Without this a winner
    // re-measured under load kept its place over finalists measured before the load came (a
    // 512x512 f32 stored at 3.9 GB/s beside finalists at 23.5 and 22.9).
    int rival = -1;
    const double band = 1.0 + options.max_rel_spread;
    for (int s = 0; s < slots - 1; ++s) {
      const int f = finalists[s];
      const Measurement& m = result.candidates[f].measurement;
      if (f == best || !m.valid) continue;
      if (m.median_s * band < result.candidates[best].measurement.median_s &&
          (rival < 0 || m.median_s < result.candidates[rival].measurement.median_s))
        rival = f;
    }
    if (rival >= 0) {
      RoundAccumulator pair[3];  // 0: the winner, 1: the rival, 2: the ceiling
      for (int round = 0; round < kFinalRounds; ++round) {
        if (round > 0 && SecondsSince(start) >= options.budget_seconds) break;
        for (int k = 0; k < 3; ++k) {
          if (Cancelled(cancel)) return Status::Cancelled("tune cancelled");
          const int slot = (k + round) % 3;
          if (slot == 2) {
            pair[2].Add(Timed(bd, "tune.remeasure.ceiling",
                              [&] { return session->MeasureCeiling(round_opt); }));
          } else {
            const int who = slot == 0 ? best : rival;
            pair[slot].Add(Timed(bd, "tune.remeasure",
                                 [&] { return session->Measure(candidates[who], round_opt); }));
          }
        }
      }
      Measurement w = pair[0].Combine(), r = pair[1].Combine(), c = pair[2].Combine();
      const bool winner_valid = w.valid;
      const MeasureMethod& marks = result.candidates[best].measurement.method;
      for (Measurement* m : {&w, &r}) {
        m->method.remeasured_after_rel_spread = marks.remeasured_after_rel_spread;
        m->method.remeasured_after_slowdown = marks.remeasured_after_slowdown;
      }
      if (r.valid) result.candidates[rival].measurement = std::move(r);
      if (w.valid) result.candidates[best].measurement = std::move(w);
      if (c.valid) result.ceiling = std::move(c);
      const Measurement& rm = result.candidates[rival].measurement;
      if (rm.valid && (!winner_valid || rm.median_s < result.candidates[best].measurement.median_s))
        best = rival;
      bd->Add("tune.remeasure.rival", 0);
    }
  }
  if (progress) {
    for (int s = 0; s < slots - 1; ++s)
      progress(result.candidates[finalists[s]], finalists[s] + 1, total);
  }
  // Every finalist failed its re-measurement: fall back to the best quick result left.
  if (best < 0) {
    for (int i : ranked) {
      if (result.candidates[i].measurement.valid) {
        best = i;
        break;
      }
    }
  }
  for (const CandidateResult& r : result.candidates) result.valid += r.measurement.valid ? 1 : 0;
  if (best < 0) return Status::NotFound(NotFoundMessage(problem, result.candidates));

  // The device's own phases, then the session closed (buffers freed) inside the tune's time.
  bd->Merge(session->TakePhases());
  {
    const Clock::time_point t0 = Clock::now();
    session.reset();
    bd->Add("tune.close", SecondsSince(t0));
  }
  result.incumbent_kept = best == incumbent;
  result.best = result.candidates[best].candidate;
  result.best_measurement = result.candidates[best].measurement;
  result.tune_seconds = SecondsSince(start);
  bd->Add("tune.total", result.tune_seconds);
  result.tuned_at_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  return result;
}

}  // namespace transposed
