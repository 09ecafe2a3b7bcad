// GpuMeasurer: what the `transposed-worker` process does on its one GPU, behind a plain C++ face.
//
// It owns the CUDA context of one device, the open problem's rotating input/output buffers, the
// reference output and the timers; CudaEngine (cuda_engine.h) serves it through the worker
// protocol (tuner/worker/). Buffers are allocated once per Open and reused by every Check/Measure of
// that problem; a measurement asking for several placements (MeasureOptions::placements, the
// tuner's final pass) of a problem beyond a few L2 sizes is taken over that many buffer sets, the
// extra ones allocated on the first such ask and kept until the problem closes (the rule:
// core/placements.h; a fallback to one set, when they do not fit, is said on stderr, the daemon's
// log). After a sticky CUDA error (illegal address, launch failure...) context_broken()
// turns true and every later call fails; the process must then exit.
//
// Thread-safety: none; one thread (the worker's request loop) uses it.
#pragma once

#include <memory>

#include "core/problem.h"
#include "core/status.h"
#include "core/time_breakdown.h"
#include "tuner/backend.h"

namespace transposed::cuda_worker {

class GpuMeasurer {
 public:
  virtual ~GpuMeasurer() = default;
  virtual StatusOr<DeviceInfo> Describe() = 0;
  // Allocates and fills buffers for `p`, replacing any open problem. RESOURCE_EXHAUSTED when it
  // does not fit in the device's free memory.
  virtual Status Open(const Problem& p) = 0;
  virtual Status Close() = 0;
  virtual Status Check(const Candidate& c) = 0;
  virtual StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) = 0;
  virtual StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) = 0;
  virtual bool context_broken() const = 0;
  // The phases timed inside requests since the last call (worker::Engine::TakePhases).
  virtual TimeBreakdown TakePhases() = 0;
};

// Visible CUDA devices (0 with a reason when there is no driver or no device).
StatusOr<int> CudaDeviceCount();

// Selects the device and creates its context. enable_test_faults makes kFaultCandidateName a
// known candidate.
StatusOr<std::unique_ptr<GpuMeasurer>> CreateGpuMeasurer(int device, bool enable_test_faults);

}  // namespace transposed::cuda_worker
