// The tuner seam: what a measuring backend (CPU, CUDA) must provide for one device.
//
// The tuner (tuner.h) owns the search, ranking and bookkeeping; a Backend owns only how to run
// things on its device: describe it, list the candidate configurations valid for a problem, and
// open a Session that holds one problem's buffers, reference output and timers.
//
// Thread-safety: a Backend's const methods may be called from any thread. A Session is used by
// one thread at a time, and at most one Session per device measures at a time (the daemon's
// per-device worker guarantees this, so that measurements never overlap).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"

namespace transposed {

// The identity of a device. Everything here except `index` is part of the cache key root.
struct DeviceInfo {
  std::string backend;  // "cpu" or "cuda"
  int index = 0;        // position in the daemon's device list
  std::string uuid;     // GPU UUID ("GPU-...") or a stable id for a CPU
  std::string name;     // "NVIDIA H100 80GB HBM3", "AMD EPYC 7B13"...
  uint64_t memory_bytes = 0;
  // Compute capability, SM count, L2 bytes, driver and runtime versions; or cores and cache
  // sizes for a CPU. Keys are short snake_case words.
  std::map<std::string, std::string> attributes;
  std::string library_version;  // kernel library version (core/version.h)

  // Stable 16-hex-digit hash of all identity fields (not `index`).
  std::string Fingerprint() const;
};

// A candidate configuration as the tuner sees it: the backend's stable name and its parameters.
// Name and parameters must round-trip through the backend's own config type.
struct Candidate {
  std::string name;                        // e.g. "tile32x32.rows8.vec16.pad1"
  std::map<std::string, int64_t> params;   // e.g. {"tile_rows":32, "tile_cols":32, ...}
};

struct MeasureOptions {
  int warmup = 2;            // untimed runs first
  int min_samples = 5;       // timed runs: at least this many...
  double min_seconds = 0.01; // ...and at least this much timed time in total
  int max_samples = 10000;   // hard cap
};

// Timing of one candidate (or of the copy ceiling). Times in seconds.
struct Measurement {
  bool valid = false;
  std::string error;       // why not valid (check failed, launch failed, worker died...)
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int samples = 0;
  int warmup = 0;
  std::string method;      // JSON object: timer, buffers rotated, working set, clocks...

  double rel_spread() const { return median_s > 0 ? (max_s - min_s) / median_s : 0; }
  // Fills median/min/max/samples from raw samples; valid = !samples.empty().
  static Measurement FromSamples(std::vector<double> samples_s, int warmup, std::string method);
  static Measurement Invalid(std::string error);
};

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
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& device() const = 0;
  // Candidates valid for the problem, in a deterministic order. Never empty for a valid problem.
  virtual std::vector<Candidate> Candidates(const Problem& p) const = 0;
  // Allocates and fills buffers for `p`. RESOURCE_EXHAUSTED when it does not fit.
  virtual StatusOr<std::unique_ptr<Session>> Open(const Problem& p) = 0;

  // Measuring worker processes restarted after they died (the daemon's metrics read it at scrape
  // time, lock-free). An out-of-process backend calls CountWorkerRestart() for each restart.
  int64_t worker_restarts() const { return worker_restarts_.load(std::memory_order_relaxed); }
  void CountWorkerRestart() { worker_restarts_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> worker_restarts_{0};
};

}  // namespace transposed
