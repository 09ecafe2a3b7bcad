// DeviceLoad: how busy a device is with work that is not the daemon's own tunes (issue 26).
//
// The worker process that owns a GPU samples the driver's view of it (NVML, loaded at run time:
// tuner/cuda/nvml_probe.h) between requests: the device's utilization and the compute processes
// on it other than the worker itself. That sample (LoadSample) crosses the worker protocol; the
// daemon classifies it (ClassifyLoad: busy at or above a utilization threshold) and adds the
// tunes' own evidence of contention (ContentionOf: a winner or ceiling whose samples spread wide,
// a final pass that slowed down, a copy ceiling far below the device's idle ceiling at that size,
// core/idle_ceilings.h) into one signal per device (DeviceLoad), shown in ListDevices,
// the metrics and the log. Without a source (no NVML, a CPU) the state is kUnknown, never an
// error.
// Plain value types and pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/tune_result.h"

namespace transposed {

// What a device's load source saw at one moment. utilization_percent / other_processes are -1
// when not known (source empty: no source; `detail` says why).
struct LoadSample {
  std::string source;            // "nvml", "fake"; empty: none
  std::string detail;            // why there is no source ("libnvidia-ml.so.1: not found")
  int utilization_percent = -1;  // share of the last sample period a kernel ran (0..100)
  int other_processes = -1;      // compute processes on the device besides the worker
};

enum class LoadState { kUnknown, kIdle, kBusy };
// "unknown", "idle", "busy": the names sent on the wire and used as metric labels.
std::string_view LoadStateName(LoadState s);

// The one signal of a device (the service keeps it per device, refreshed by its tune thread).
struct DeviceLoad {
  LoadState state = LoadState::kUnknown;
  LoadSample sample;                 // the latest
  int64_t sampled_at_unix_ms = 0;    // 0: never sampled
  // The latest tune's own evidence of contention (ContentionOf), empty when it showed none, and
  // when that tune ended.
  std::string tune_contention;
  int64_t tune_contention_at_unix_ms = 0;
  // The latest tune's copy ceiling and the device's idle ceiling at its size (IdleCeilings: the
  // reference the ceiling's drop is judged against), GB/s; 0: not known.
  double tune_ceiling_gbps = 0;
  double idle_ceiling_gbps = 0;
  // Background tunes (nobody waits for them) now deferred or throttled on this device, and those
  // abandoned since start, with the latest one's problem and reason.
  int background_waiting = 0;
  int64_t background_abandoned = 0;
  std::string last_abandoned;  // "<problem key>: <reason>"
};

// kBusy when the sample's utilization is >= busy_utilization_percent and another process holds
// the device (or the processes are not known); kIdle otherwise (with no other process, the
// utilization is the daemon's own last tune); kUnknown without a utilization.
LoadState ClassifyLoad(const LoadSample& s, double busy_utilization_percent);

// "utilization 97%, 1 other process" / "unknown: <detail>": for logs and contention marks.
std::string DescribeLoad(const LoadSample& s);

// The spread ((max - min) / median) above which a tune's own samples count as evidence of
// contention. Not the tuner's noisy limit (0.2): on an idle H200 (2026-11-27, docs/performance/polite.md)
// winners and ceilings of 6 new problems spread 0.22-0.34, as much as the tunes beside a
// job (0.19-0.41); only a spread beyond the median itself is taken as contention.
inline constexpr double kContentionRelSpread = 1.0;

// Samples shorter than this are bound by the launch, not by memory: their spread is host and launch
// jitter, not another process (deploy/gpu.sh run, 2026-11-27, H100 and H200: 256x256 and
// 1000x1000 f32, 4-8 us samples, spread 1.2-61 with nothing else on the device; each such mark
// queued two re-measures that ran beside the user-path benchmark). Their spread is not evidence.
inline constexpr double kContentionMinSampleSeconds = 50e-6;

// The evidence of contention a tune's own result carries, empty when none: the winner's or the
// ceiling's samples (of at least kContentionMinSampleSeconds) spread more than max_rel_spread
// ((max - min) / median), the tuner
// re-measured its winner after the final pass slowed down (MeasureMethod::
// remeasured_after_slowdown), or its copy ceiling fell more than max_ceiling_drop (a fraction,
// 0 < x < 1; 0: not judged) below idle_ceiling_gbps, the device's idle ceiling at the problem's
// size (IdleCeilings::ReferenceFor; 0: not known).
std::string ContentionOf(const TuneResult& r, double max_rel_spread = kContentionRelSpread,
                         double idle_ceiling_gbps = 0, double max_ceiling_drop = 0);

}  // namespace transposed
