// The tuner seam: what a measuring backend (CPU, CUDA) must provide for one device.
//
// The tuner (tuner.h) owns the search, ranking and bookkeeping; a Backend owns only how to run
// things on its device: describe it, list the candidate configurations valid for a problem, and
// open a Session that holds one problem's buffers, reference output and timers. The types that
// cross boundaries (DeviceInfo, Candidate, Measurement, MeasureOptions) live in core/.
//
// Thread-safety: a Backend's const methods may be called from any thread. A Session is used by
// one thread at a time, and at most one Session per device measures at a time (the daemon's
// per-device tune thread guarantees this, so that measurements never overlap).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/device_load.h"
#include "core/measurement.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/time_breakdown.h"
#include "core/tune_result.h"

namespace transposed {

// One problem prepared on one device: input buffers filled with random data, a reference output.
class Session {
 public:
  virtual ~Session() = default;
  // Poisons the output, runs the candidate once, and compares the output bit-exact with the
  // reference. OK, or a status saying what went wrong (first mismatching index, launch error).
  virtual Status Check(const Candidate& c) = 0;
  // Times the candidate (warm-up, then repetitions until both min_samples and min_seconds).
  virtual StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& opt) = 0;
  // Times the device's copy of the same byte count (the ceiling), the same way.
  virtual StatusOr<Measurement> MeasureCeiling(const MeasureOptions& opt) = 0;
  // Phases timed inside the device since the last call (an out-of-process worker's requests and
  // their parts, "worker.check.compare"...), then forgotten; none for an in-process session,
  // whose calls the tuner times itself.
  virtual TimeBreakdown TakePhases() { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& device() const = 0;
  // Candidates valid for the problem, in a deterministic order. Never empty for a valid problem.
  // Computed in the calling process and never waits for a measurement in progress: the daemon
  // calls it on request threads (an ANSWER_NOW answer, a miss's check) while its device tunes.
  virtual std::vector<Candidate> Candidates(const Problem& p) const = 0;
  // Allocates and fills buffers for `p`. RESOURCE_EXHAUSTED when it does not fit.
  virtual StatusOr<std::unique_ptr<Session>> Open(const Problem& p) = 0;
  // How busy the device is with work other than the daemon's tunes (core/device_load.h). The
  // daemon's tune thread asks between measurements (an out-of-process backend asks its worker,
  // which then runs nothing else). Never an error: a sample without a source says why; that is
  // the default, for backends that have no source.
  virtual LoadSample SampleLoad() {
    LoadSample s;
    s.detail = "the " + device().backend + " backend has no load source";
    return s;
  }

  // Measuring worker processes restarted after they died (the daemon's metrics read it at scrape
  // time, lock-free). An out-of-process backend calls CountWorkerRestart() for each restart.
  int64_t worker_restarts() const { return worker_restarts_.load(std::memory_order_relaxed); }
  void CountWorkerRestart() { worker_restarts_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> worker_restarts_{0};
};

}  // namespace transposed
