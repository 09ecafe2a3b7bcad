#include "core/measurement.h"

#include <algorithm>
#include <utility>

namespace transposed {

Measurement Measurement::FromSamples(std::vector<double> samples_s, int warmup,
                                     std::string method) {
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
