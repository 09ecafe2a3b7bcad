// Percentile: the percentile of a sample of timings, for the tests that time a real daemon
// (lookups during a tune, the fleet's herd and failures). Nearest rank from below: the value at
// index min(n - 1, floor(p / 100 * n)) of the sorted sample; 0 for an empty one.
// Header-only. Thread-safe (no state).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace transposed::testing {

// p in percent: 50 is the median, 100 the maximum.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  return v[i];
}

}  // namespace transposed::testing
