// IdleCeilings: the copy ceilings one device reached while idle, by problem size: the reference
// a tune's own ceiling is judged against (issue 26: a drop of the ceiling measured during a tune
// is evidence of contention, part of the one busy signal, core/device_load.h).
//
// A tune's ceiling is a plain copy of the problem's bytes through rotating buffers larger than
// the L2 cache (the tuner's MeasureCeiling): a job that shares the device's memory bandwidth or
// its time slices makes it slower. What the device reaches idle depends on the size (small copies
// are bound by the launch latency), so the reference of a size is a lower bound of the idle
// ceiling there, from the nearest idle sizes on either side (at most kMaxSizeRatio away):
//   - a larger size B that reached G GB/s: G * b / B (copying fewer bytes never takes longer);
//   - a smaller or equal size B that reached G GB/s: G (a larger copy is at least as fast per
//     byte once the buffers exceed the cache);
// the larger of the two bounds. Without an idle size that near there is no reference (0): the
// ceiling is then no evidence either way.
// Bounded: at most kMaxPoints sizes (the oldest added goes first).
// Thread-compatible value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>

namespace transposed {

class IdleCeilings {
 public:
  static constexpr size_t kMaxPoints = 512;
  static constexpr double kMaxSizeRatio = 4;

  // An idle ceiling of `gbps` for a copy of `bytes` (the best one per size is kept). Ignored
  // unless both are > 0.
  void Add(int64_t bytes, double gbps);
  // The idle ceiling a copy of `bytes` reaches at least (GB/s), 0 when no idle size is near.
  double ReferenceFor(int64_t bytes) const;
  size_t size() const { return points_.size(); }

 private:
  std::map<int64_t, double> points_;  // bytes -> the best idle ceiling seen (GB/s)
  std::deque<int64_t> order_;         // sizes in the order first added, for the bound
};

// How far a tune's ceiling fell below the device's idle ceiling at its size: 1 - gbps /
// reference, 0 when it did not fall or without a reference (reference <= 0 or gbps <= 0).
double CeilingDrop(double gbps, double reference_gbps);

}  // namespace transposed
