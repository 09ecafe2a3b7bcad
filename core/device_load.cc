#include "core/device_load.h"

#include <cstdio>

#include "core/idle_ceilings.h"

namespace transposed {

std::string_view LoadStateName(LoadState s) {
  switch (s) {
    case LoadState::kIdle:
      return "idle";
    case LoadState::kBusy:
      return "busy";
    case LoadState::kUnknown:
      break;
  }
  return "unknown";
}

LoadState ClassifyLoad(const LoadSample& s, double busy_utilization_percent) {
  if (s.utilization_percent < 0) return LoadState::kUnknown;
  // With no other process on the device, the utilization is the daemon's own last tune.
  if (s.other_processes == 0) return LoadState::kIdle;
  return s.utilization_percent >= busy_utilization_percent ? LoadState::kBusy : LoadState::kIdle;
}

std::string DescribeLoad(const LoadSample& s) {
  if (s.utilization_percent < 0)
    return "unknown: " + (s.detail.empty() ? std::string("no load source") : s.detail);
  std::string out = "utilization " + std::to_string(s.utilization_percent) + "%";
  if (s.other_processes >= 0)
    out += ", " + std::to_string(s.other_processes) + " other process" +
           (s.other_processes == 1 ? "" : "es");
  return out;
}

namespace {

bool SpreadCounts(const Measurement& m, double max_rel_spread) {
  return m.valid && m.median_s >= kContentionMinSampleSeconds && m.rel_spread() > max_rel_spread;
}

}  // namespace

std::string ContentionOf(const TuneResult& r, double max_rel_spread, double idle_ceiling_gbps,
                         double max_ceiling_drop) {
  std::string out;
  auto add = [&out](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
  char buf[96];
  if (SpreadCounts(r.best_measurement, max_rel_spread)) {
    std::snprintf(buf, sizeof buf, "winner rel_spread %.2f", r.best_measurement.rel_spread());
    add(buf);
  }
  if (SpreadCounts(r.ceiling, max_rel_spread)) {
    std::snprintf(buf, sizeof buf, "ceiling rel_spread %.2f", r.ceiling.rel_spread());
    add(buf);
  }
  if (r.ceiling.valid && max_ceiling_drop > 0) {
    const double drop = CeilingDrop(r.ceiling_gbps(), idle_ceiling_gbps);
    if (drop > max_ceiling_drop) {
      std::snprintf(buf, sizeof buf,
                    "ceiling %.1f GB/s, %.0f%% below the device's idle %.1f GB/s",
                    r.ceiling_gbps(), drop * 100, idle_ceiling_gbps);
      add(buf);
    }
  }
  if (r.best_measurement.method.remeasured_after_slowdown > 0) {
    std::snprintf(buf, sizeof buf, "final pass %.1fx slower than the quick one",
                  r.best_measurement.method.remeasured_after_slowdown);
    add(buf);
  }
  return out;
}

}  // namespace transposed
