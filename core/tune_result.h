// The result of tuning one problem on one device: every candidate's result and the winner.
//
// Candidate, Phase, CandidateResult, TuneResult and AnswerSource are defined once here and
// mapped once per format: proto/transposed/v1 (server/grpc/convert.cc), SQLite (store/rows.cc's
// column tables; schema in store/schema.md) and the worker protocol.
// Plain value types; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/measurement.h"
#include "core/problem.h"
#include "core/time_breakdown.h"

namespace transposed {

// A candidate configuration as the tuner sees it: the backend's stable name and its parameters.
// Name and parameters must round-trip through the backend's own config type.
struct Candidate {
  std::string name;                        // e.g. "tile32x32.rows8.vec16.pad1"
  std::map<std::string, int64_t> params;   // e.g. {"tile_rows":32, "tile_cols":32, ...}
};

// Where a candidate's last result comes from (tuner/tuner.h describes the search).
enum class Phase {
  kCheck,    // failed its bit-exact check (or could not run)
  kQuick,    // measured in the quick pass over all candidates
  kFinal,    // re-measured side by side with the other leaders
  kSkipped,  // not reached within the time budget
};

// "check", "quick", "final", "skipped": the names stored and sent on the wire.
std::string_view PhaseName(Phase p);
std::optional<Phase> ParsePhase(std::string_view name);

struct CandidateResult {
  Candidate candidate;
  Measurement measurement;
  Phase phase = Phase::kQuick;
};

// How a stored result came into this daemon's database.
enum class Origin {
  kTuned,     // tuned by this daemon
  kImported,  // imported (ImportEntries, --seed)
  kPeer,      // fetched from a peer daemon of the same device class on a miss (--peer)
  kShared,    // read from the shared store (--shared-store): measured by a node of the class
};
// "tuned", "imported", "peer", "shared": the names stored in the database.
std::string_view OriginName(Origin o);
std::optional<Origin> ParseOrigin(std::string_view name);

struct TuneResult {
  Problem problem;
  DeviceInfo device;  // the device instance it was measured on
  Origin origin = Origin::kTuned;
  Candidate best;
  Measurement best_measurement;
  Measurement ceiling;
  std::vector<CandidateResult> candidates;  // every candidate's last result
  int tried = 0;
  int valid = 0;
  int total = 0;                // candidates the backend offers; total - tried were skipped
  bool incumbent_kept = false;  // TuneOptions::incumbent won again
  double tune_seconds = 0;
  int64_t tuned_at_unix_ms = 0;
  // Non-empty: measured while the device was busy with other work, and the evidence ("device
  // busy: utilization 97%, 1 other process; winner rel_spread 0.41"; server/polite.h). Such a
  // result never replaces one measured on an idle device, and is measured again once idle.
  std::string contention;
  // Where this process's tune spent its time (tuner/tuner.h); diagnostics, not stored or sent.
  TimeBreakdown breakdown;

  double gbps() const { return EffectiveGBps(problem.bytes(), best_measurement.median_s); }
  double ceiling_gbps() const { return EffectiveGBps(problem.bytes(), ceiling.median_s); }
};

// How an answer was produced: read from the store, or tuned by this request (or the tune it
// joined).
// kPeer: fetched from a peer daemon by this request (or the lookup it joined), then stored.
// kShared: read from the shared store (--shared-store), tuned there by another node of the
// class (this request may have waited for that node's tune), then stored.
// kNearest / kHeuristic: an ANSWER_NOW miss answered at once (server/answer_now.h) while the
// real tune runs in the background.
// kPrevious: a stored entry of another kernel library version (an upgrade) whose variant still
// exists with the same parameters, answered at once as provisional while it is re-checked and
// re-measured in the background (server/previous_entry.h).
enum class AnswerSource { kCache, kTuned, kPeer, kNearest, kHeuristic, kShared, kPrevious };
// "cache" / "tuned" / "peer" / "nearest" / "heuristic" / "shared" / "previous"
const char* AnswerSourceName(AnswerSource s);

}  // namespace transposed
