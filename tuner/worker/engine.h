// Engine: what a measuring worker process does on its one device, behind a plain C++ face.
//
// The worker's serve loop (serve.h) feeds an Engine the requests of the worker protocol
// (worker.proto). The candidates of a problem are not the engine's to list one by one: it
// describes its family (family.h) and FamilyCandidates computes them, in the worker and in the
// daemon alike. CudaEngine (tuner/cuda/) owns a CUDA context; FakeEngine (fake_engine.h) fakes
// a device for tests without a GPU. An Engine holds at most one open problem: Open replaces it.
// After an unrecoverable error (a sticky CUDA error) broken() turns true; the serve loop then
// answers with a fatal error and the process exits.
//
// Thread-safety: none; the serve loop's one thread uses it.
#pragma once

#include <vector>

#include "core/device.h"
#include "core/device_load.h"
#include "core/measurement.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/time_breakdown.h"
#include "core/tune_result.h"
#include "tuner/worker/family.h"

namespace transposed::worker {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual StatusOr<DeviceInfo> Describe() = 0;
  // The candidates it offers (family.h), described once: the daemon gets this with the device in
  // the describe answer and lists a problem's candidates itself (FamilyCandidates), as the serve
  // loop does for a candidates request.
  virtual CandidateFamily Family() = 0;
  // Allocates and fills buffers for `p`, replacing any open problem. RESOURCE_EXHAUSTED when it
  // does not fit.
  virtual Status Open(const Problem& p) = 0;
  virtual Status Close() = 0;
  virtual Status Check(const Candidate& c) = 0;
  virtual StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) = 0;
  virtual StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) = 0;
  // How busy the device is with work other than this process's (core/device_load.h); a sample
  // without a source (never an error) when the engine cannot tell.
  virtual LoadSample Load() = 0;
  virtual bool broken() const = 0;
  // The phases recorded inside requests since the last call ("worker.check.compare"...), then
  // forgotten; the serve loop sends them with each response (worker.proto PhaseTime).
  virtual TimeBreakdown TakePhases() = 0;
};

}  // namespace transposed::worker
