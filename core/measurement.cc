#include "core/measurement.h"

#include <algorithm>
#include <utility>

namespace transposed {

bool MeasureMethod::operator==(const MeasureMethod& o) const {
  return timer == o.timer && op == o.op && launches_per_sample == o.launches_per_sample &&
         buffers == o.buffers && working_set_bytes == o.working_set_bytes &&
         cache_bytes == o.cache_bytes && working_set_capped == o.working_set_capped &&
         threads == o.threads && sm_clock_khz == o.sm_clock_khz &&
         memory_clock_khz == o.memory_clock_khz && preempted_retaken == o.preempted_retaken &&
         preempted_kept == o.preempted_kept && alternatives_median_s == o.alternatives_median_s &&
         final_rounds == o.final_rounds && placements == o.placements &&
         remeasured_after_rel_spread == o.remeasured_after_rel_spread &&
         remeasured_after_slowdown == o.remeasured_after_slowdown;
}

Measurement Measurement::FromSamples(std::vector<double> samples_s, int warmup,
                                     MeasureMethod method) {
  Measurement m;
  m.warmup = warmup;
  m.method = std::move(method);
  if (samples_s.empty()) {
    m.error = "no samples";
    return m;
  }
  std::sort(samples_s.begin(), samples_s.end());
  const size_t n = samples_s.size();
  m.valid = true;
  m.samples = static_cast<int>(n);
  m.min_s = samples_s.front();
  m.max_s = samples_s.back();
  m.median_s = n % 2 == 1 ? samples_s[n / 2] : 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
  return m;
}

Measurement Measurement::Invalid(std::string error) {
  Measurement m;
  m.valid = false;
  m.error = std::move(error);
  return m;
}

}  // namespace transposed
