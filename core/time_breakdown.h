// TimeBreakdown: where the wall time of a piece of work went, phase by phase.
//
// A tune's breakdown (TuneResult::breakdown) is filled by the tuner (its phases: open, check,
// quick, final...), by an out-of-process session (each request's round trip) and by the measuring
// worker (inside a request: the check's poison, launch and compare; a measurement's warm-up and
// samples). Phase names are dotted paths, "worker.check.compare"; the same name added twice sums
// its seconds and counts. Mapped once to the worker protocol (tuner/worker/codec.cc); diagnostics
// only: not stored, not on the public wire.
// Plain value type; thread-compatible.
#pragma once

#include <string>
#include <vector>

namespace transposed {

struct PhaseTime {
  std::string phase;
  double seconds = 0;
  int count = 0;
};

class TimeBreakdown {
 public:
  // Adds `seconds` (and `count` occurrences) to `phase`, appended at the end if new.
  void Add(const std::string& phase, double seconds, int count = 1);
  // Adds every phase of `other`.
  void Merge(const TimeBreakdown& other);
  // Seconds of `phase` (0 if absent).
  double seconds(const std::string& phase) const;
  int count(const std::string& phase) const;
  const std::vector<PhaseTime>& phases() const { return phases_; }
  bool empty() const { return phases_.empty(); }
  void clear() { phases_.clear(); }
  // "tune.check=0.412s/30 worker.check.compare=0.101s/30 ...", in insertion order.
  std::string ToString() const;

 private:
  std::vector<PhaseTime> phases_;  // few phases: a linear search is fine
};

}  // namespace transposed
