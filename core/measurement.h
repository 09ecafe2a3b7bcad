// Measurement: the timing of one candidate (or of the device's copy ceiling), MeasureMethod, how
// it was taken, and MeasureOptions, how long to measure.
//
// Defined once here and mapped once per format: proto/transposed/v1 (server/grpc/convert.cc), the
// SQLite `entries`/`candidates` columns (store/rows.cc's column tables; the method as one JSON
// column), the worker protocol (tuner/worker/codec.cc).
// Plain value types; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace transposed {

struct MeasureOptions {
  int warmup = 2;            // untimed runs first
  int min_samples = 5;       // timed runs: at least this many...
  double min_seconds = 0.01; // ...and at least this much timed time in total
  int max_samples = 10000;   // hard cap
  // Buffer placements (separate allocations) to take the figure over, for problems big enough
  // for it (core/placements.h): the median of the per-placement medians. 1: the open problem's
  // buffers only. A backend without the rule (the CPU) measures one.
  int placements = 1;
  // Screening (0: off): a measurement whose first timed run already took at least this long
  // stops there and reports that run as its only sample (CUDA: the warm-up launch is that run,
  // and the measurement has warmup 0). The tuner's quick pass sets it to a multiple of the best
  // time known (tuner.h), so that a candidate clearly out of the race costs one run instead of
  // warmup + min_samples. CUDA honours it only for a launch long enough to be timed alone (the
  // harness's min_sample_seconds).
  double cutoff_s = 0;
};

// How a measurement was taken: one record for every backend; a field a backend has no value for
// stays at its zero value.
struct MeasureMethod {
  std::string timer;                // "steady_clock" (CPU), "cuda_event" (CUDA)
  std::string op;                   // what was timed: "transpose", or the ceiling's copy
                                    // ("memcpy" on the CPU, "memcpy_d2d" / "copy16_kernel")
  int launches_per_sample = 0;      // back-to-back runs per timed sample (CUDA; CPU: 1)
  int buffers = 0;                  // rotating input/output buffer pairs
  int64_t working_set_bytes = 0;    // bytes the rotation touches
  int64_t cache_bytes = 0;          // the cache the working set is sized against (L2 / LLC)
  bool working_set_capped = false;  // memory capped the working set below its target
  int threads = 0;                  // CPU threads of the run
  int sm_clock_khz = 0;             // rated clocks of the device (CUDA)
  int memory_clock_khz = 0;
  int preempted_retaken = 0;        // runs re-taken because a thread was preempted (CPU)
  int preempted_kept = 0;           // disturbed runs kept after the re-take limit (CPU)
  std::map<std::string, double> alternatives_median_s;  // ceiling: every copy tried, its median
  int final_rounds = 0;             // tuner: interleaved final rounds combined into this one
  int placements = 0;               // buffer placements the figure is the median over (CUDA;
                                    // core/placements.h); 0: not recorded (one)
  double remeasured_after_rel_spread = 0;  // tuner: re-measured after this spread (0: not)
  double remeasured_after_slowdown = 0;  // tuner: re-measured after its final median came out
                                         // this many times its quick one (0: not)

  bool operator==(const MeasureMethod& o) const;
  bool operator!=(const MeasureMethod& o) const { return !(*this == o); }
};

// Times in seconds.
struct Measurement {
  bool valid = false;
  std::string error;       // why not valid (check failed, launch failed, worker died...)
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int samples = 0;
  int warmup = 0;
  MeasureMethod method;

  double rel_spread() const { return median_s > 0 ? (max_s - min_s) / median_s : 0; }
  // Fills median/min/max/samples from raw samples; valid = !samples.empty().
  static Measurement FromSamples(std::vector<double> samples_s, int warmup, MeasureMethod method);
  static Measurement Invalid(std::string error);
};

}  // namespace transposed
