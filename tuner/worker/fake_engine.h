// FakeEngine: a stand-in device for tests without a GPU, served by the real serve loop
// (serve.h) in the test-only executable transposed-fake-worker (fake_worker_main.cc).
//
// Describe returns a made-up device; its family (family.h) is a fixed list: `candidates` names
// ("fake.c0", "fake.c1", ...), plus kFakeFaultCandidate when `with_fault`, plus the stand-in for
// a member that canonicalizes NaNs (kFakeValueExactCandidate, param canonicalizes_nan = 1, so
// offered only to a problem that asks for value-exact answers where its dtype tells them apart,
// f32/f64; the fastest of all; its Check fails on a bit-exact problem, as the CUDA engine's
// does); Open/Check/Close succeed; Measure returns timings derived from the candidate's name and
// the open problem (SecondsFor), so tests can see which problem a session had open, after
// `measure_delay_s` (a slow device: tests of what must not wait behind a measurement); Load
// reports the busy signal scripted in `load_file` (source "fake"). It fails
// like a real device does:
//   kFakeFaultCandidate       breaks the engine (broken() = true): a fatal answer, then exit
//   options.crash_on          aborts the process (SIGABRT) without answering
//
// Thread-safety: none (one serve loop).
#pragma once

#include <chrono>
#include <string>

#include "tuner/worker/engine.h"

namespace transposed::worker {

inline constexpr char kFakeFaultCandidate[] = "test.fault.illegal_address";
inline constexpr char kFakeValueExactCandidate[] = "fake.value_exact";

struct FakeEngineOptions {
  int index = 0;
  std::string backend = "fake";
  int candidates = 4;
  bool with_fault = false;
  std::string crash_on;  // candidate name that aborts the process; empty: none
  double measure_delay_s = 0;  // each Measure and MeasureCeiling sleeps this long first
  // The scripted busy signal: each Load reads this file, "UTILIZATION OTHER_PROCESSES" (two
  // integers); a test rewrites it to make the device busy or idle. Empty, missing or unreadable:
  // a sample without a source.
  std::string load_file;
  // As the driver does, the utilization counts the fake's own measurements: for this long after
  // its last Measure or MeasureCeiling, Load reports 100%.
  double own_utilization_s = 0;
  // While the scripted load reads busy (utilization >= 50% and another process), every
  // measurement reports this many times as long (a job sharing the device; 1: no effect).
  double busy_slowdown = 1;
  // Every measurement, the copy ceiling included, reports this many times as long, always: a
  // device that runs slow (the health probe's tests, server/device_health.h; 1: no effect).
  double slowdown = 1;
};

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options) : o_(std::move(options)) {}
  StatusOr<DeviceInfo> Describe() override;
  CandidateFamily Family() override;
  Status Open(const Problem& p) override;
  Status Close() override;
  Status Check(const Candidate& c) override;
  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) override;
  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) override;
  LoadSample Load() override;
  bool broken() const override { return broken_; }
  // The fake has no phases inside a request (the serve loop still times each request).
  TimeBreakdown TakePhases() override { return {}; }

 private:
  // Fails the way `name` is set up to fail (fault, crash, no open problem).
  Status Run(const std::string& name);
  Measurement Measured(const std::string& name) const;
  // slowdown, times busy_slowdown while the scripted load reads busy.
  double Slowdown() const;
  void Delay() const;  // sleeps measure_delay_s

 public:
  // The median the fake reports for `name` ("copy": the ceiling) on problem `p`: deterministic,
  // and different for different names and problem sizes (so tests see which problem was open).
  static double SecondsFor(const std::string& name, const Problem& p);

 private:

  const FakeEngineOptions o_;
  bool open_ = false;
  bool broken_ = false;
  Problem problem_;  // the open one
  std::chrono::steady_clock::time_point last_measured_{};  // for own_utilization_s
};

}  // namespace transposed::worker
