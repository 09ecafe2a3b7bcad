#include "core/time_breakdown.h"

#include <cstdio>

namespace transposed {

void TimeBreakdown::Add(const std::string& phase, double seconds, int count) {
  for (PhaseTime& p : phases_) {
    if (p.phase == phase) {
      p.seconds += seconds;
      p.count += count;
      return;
    }
  }
  phases_.push_back({phase, seconds, count});
}

void TimeBreakdown::Merge(const TimeBreakdown& other) {
  for (const PhaseTime& p : other.phases_) Add(p.phase, p.seconds, p.count);
}

double TimeBreakdown::seconds(const std::string& phase) const {
  for (const PhaseTime& p : phases_)
    if (p.phase == phase) return p.seconds;
  return 0;
}

int TimeBreakdown::count(const std::string& phase) const {
  for (const PhaseTime& p : phases_)
    if (p.phase == phase) return p.count;
  return 0;
}

std::string TimeBreakdown::ToString() const {
  std::string out;
  char buf[64];
  for (const PhaseTime& p : phases_) {
    std::snprintf(buf, sizeof(buf), "=%.4fs/%d", p.seconds, p.count);
    if (!out.empty()) out += ' ';
    out += p.phase;
    out += buf;
  }
  return out;
}

}  // namespace transposed
