#include "core/placements.h"

#include <algorithm>

namespace transposed {

PlacementPlan PlanPlacements(int wanted, int64_t pair_bytes, int64_t set_bytes, int64_t l2_bytes,
                             int64_t free_bytes, const PlacementRule& rule) {
  PlacementPlan plan;
  wanted = std::min(wanted, kMaxPlacements);
  if (wanted <= 1) return plan;
  // An unknown L2 (0) makes no problem big: the rule needs the device's L2 size.
  if (l2_bytes <= 0 || pair_bytes <= rule.l2_multiple * l2_bytes) return plan;
  const double extra = static_cast<double>(wanted - 1) * static_cast<double>(set_bytes);
  const double room = rule.free_fraction * static_cast<double>(std::max<int64_t>(0, free_bytes));
  if (extra > room) {
    plan.fallback = "one buffer placement instead of " + std::to_string(wanted) + ": " +
                    std::to_string(wanted - 1) + " more sets of " + std::to_string(set_bytes) +
                    " bytes exceed " + std::to_string(static_cast<int>(rule.free_fraction * 100)) +
                    "% of the " + std::to_string(free_bytes) + " bytes free";
    return plan;
  }
  plan.placements = wanted;
  return plan;
}

MeasureOptions PlacementShare(const MeasureOptions& o, int placements) {
  const int k = std::max(1, placements);
  if (k == 1) return o;
  MeasureOptions s = o;
  s.warmup = std::max(1, (o.warmup + k - 1) / k);
  s.min_samples = std::max(1, (o.min_samples + k - 1) / k);
  s.min_seconds = o.min_seconds / k;
  s.max_samples = std::max(s.min_samples, (o.max_samples + k - 1) / k);
  s.placements = 1;
  return s;
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Measurement CombinePlacements(const std::vector<Measurement>& per_set) {
  if (per_set.empty()) return Measurement::Invalid("no buffer placement measured");
  for (const Measurement& m : per_set) {
    if (!m.valid) return Measurement::Invalid(m.error.empty() ? "invalid measurement" : m.error);
  }
  Measurement c;
  c.valid = true;
  c.min_s = per_set.front().min_s;
  c.max_s = per_set.front().max_s;
  std::vector<double> medians;
  for (const Measurement& m : per_set) {
    medians.push_back(m.median_s);
    c.min_s = std::min(c.min_s, m.min_s);
    c.max_s = std::max(c.max_s, m.max_s);
    c.samples += m.samples;
    c.warmup += m.warmup;
  }
  c.median_s = MedianOf(std::move(medians));
  c.method = per_set.front().method;
  c.method.placements = static_cast<int>(per_set.size());
  return c;
}

}  // namespace transposed
