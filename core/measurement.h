// Measurement: the timing of one candidate (or of the device's copy ceiling), and MeasureOptions,
// how long to measure.
//
// Defined once here and mapped once per format: proto/transposed/v1 (server/convert.cc), the
// SQLite `entries`/`candidates` columns (server/store.cc's column tables) and the worker protocol.
// Plain value types; thread-compatible.
#pragma once

#include <string>
#include <vector>

namespace transposed {

struct MeasureOptions {
  int warmup = 2;            // untimed runs first
  int min_samples = 5;       // timed runs: at least this many...
  double min_seconds = 0.01; // ...and at least this much timed time in total
  int max_samples = 10000;   // hard cap
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
  std::string method;      // JSON object: timer, buffers rotated, working set, clocks...

  double rel_spread() const { return median_s > 0 ? (max_s - min_s) / median_s : 0; }
  // Fills median/min/max/samples from raw samples; valid = !samples.empty().
  static Measurement FromSamples(std::vector<double> samples_s, int warmup, std::string method);
  static Measurement Invalid(std::string error);
};

}  // namespace transposed
