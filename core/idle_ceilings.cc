#include "core/idle_ceilings.h"

#include <algorithm>

namespace transposed {

void IdleCeilings::Add(int64_t bytes, double gbps) {
  if (bytes <= 0 || !(gbps > 0)) return;
  auto [it, inserted] = points_.emplace(bytes, gbps);
  if (!inserted) {
    it->second = std::max(it->second, gbps);
    return;
  }
  order_.push_back(bytes);
  if (order_.size() > kMaxPoints) {
    points_.erase(order_.front());
    order_.pop_front();
  }
}

double IdleCeilings::ReferenceFor(int64_t bytes) const {
  if (bytes <= 0 || points_.empty()) return 0;
  const double b = static_cast<double>(bytes);
  double reference = 0;
  // The nearest size at or above: its ceiling scaled down by the size ratio.
  auto above = points_.lower_bound(bytes);
  if (above != points_.end() && static_cast<double>(above->first) <= b * kMaxSizeRatio)
    reference = above->second * b / static_cast<double>(above->first);
  // The nearest size at or below: its ceiling as it is.
  auto below = points_.upper_bound(bytes);
  if (below != points_.begin()) {
    --below;
    if (static_cast<double>(below->first) * kMaxSizeRatio >= b)
      reference = std::max(reference, below->second);
  }
  return reference;
}

double CeilingDrop(double gbps, double reference_gbps) {
  if (!(reference_gbps > 0) || !(gbps > 0) || gbps >= reference_gbps) return 0;
  return 1 - gbps / reference_gbps;
}

}  // namespace transposed
