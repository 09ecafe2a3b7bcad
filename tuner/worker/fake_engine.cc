#include "tuner/worker/fake_engine.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/hash.h"

namespace transposed::worker {

StatusOr<DeviceInfo> FakeEngine::Describe() {
  DeviceInfo d;
  d.backend = o_.backend;
  d.index = o_.index;
  d.uuid = "GPU-fake-" + std::to_string(o_.index);
  d.name = "Fake GPU";
  d.memory_bytes = uint64_t{1} << 34;
  d.attributes = {{"fake", "1"}};
  d.library_version = "fake";
  return d;
}

CandidateFamily FakeEngine::Family() {
  CandidateFamily f;
  for (int i = 0; i < o_.candidates; ++i) f.fixed.push_back({"fake.c" + std::to_string(i), {{"c", i}}});
  if (o_.with_fault) f.fixed.push_back({kFakeFaultCandidate, {}});
  f.fixed.push_back({kFakeValueExactCandidate, {{"canonicalizes_nan", 1}}});
  return f;
}

Status FakeEngine::Open(const Problem& p) {
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  problem_ = p;
  open_ = true;
  return Status::OK();
}

Status FakeEngine::Close() {
  open_ = false;
  return Status::OK();
}

Status FakeEngine::Run(const std::string& name) {
  if (!open_) return Status::FailedPrecondition("no problem is open in the worker");
  if (name == kFakeFaultCandidate) {
    broken_ = true;
    return Status::Internal("running " + name + ": cudaErrorIllegalAddress (fake illegal address)");
  }
  if (!o_.crash_on.empty() && name == o_.crash_on) std::abort();
  if (name == kFakeValueExactCandidate && problem_.Normalized().exactness != Exactness::kValue)
    return Status::FailedPrecondition(name + ": canonicalizes NaNs, and the problem asks for a "
                                             "bit-exact transpose");
  return Status::OK();
}

double FakeEngine::SecondsFor(const std::string& name, const Problem& p) {
  // Faster than every other name (their factor is at least 1).
  if (name == kFakeValueExactCandidate) return 0.5e-9 * static_cast<double>(1 + p.bytes() / 4096);
  Fnv1a64 h;
  h.Add(name);
  return 1e-9 * static_cast<double>(1 + h.value() % 1000) *
         static_cast<double>(1 + p.bytes() / 4096);
}

double FakeEngine::Slowdown() const {
  if (o_.busy_slowdown == 1 || o_.load_file.empty()) return o_.slowdown;
  std::ifstream in(o_.load_file);
  int utilization = -1;
  int others = -1;
  return o_.slowdown *
         (in >> utilization >> others && utilization >= 50 && others > 0 ? o_.busy_slowdown : 1);
}

Measurement FakeEngine::Measured(const std::string& name) const {
  const double t = SecondsFor(name, problem_) * Slowdown();
  MeasureMethod method;
  method.timer = "fake";
  method.op = name == "copy" ? "copy" : "transpose";
  method.launches_per_sample = 1;
  method.buffers = 1;
  method.working_set_bytes = problem_.in_alloc_bytes() + problem_.out_alloc_bytes();
  return Measurement::FromSamples({t, t * 1.01, t * 0.99}, 1, method);
}

Status FakeEngine::Check(const Candidate& c) { return Run(c.name); }

LoadSample FakeEngine::Load() {
  LoadSample s;
  if (o_.load_file.empty()) {
    s.detail = "the fake device has no load script";
    return s;
  }
  std::ifstream in(o_.load_file);
  int utilization = -1;
  int others = -1;
  if (!(in >> utilization >> others) || utilization < 0 || utilization > 100 || others < 0) {
    s.detail = "no load in " + o_.load_file;
    return s;
  }
  s.source = "fake";
  if (std::chrono::duration<double>(std::chrono::steady_clock::now() - last_measured_).count() <
      o_.own_utilization_s)
    utilization = 100;  // its own kernels, still in the driver's window
  s.utilization_percent = utilization;
  s.other_processes = others;
  return s;
}

void FakeEngine::Delay() const {
  if (o_.measure_delay_s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.measure_delay_s));
}

StatusOr<Measurement> FakeEngine::Measure(const Candidate& c, const MeasureOptions&) {
  Delay();
  TR_RETURN_IF_ERROR(Run(c.name));
  last_measured_ = std::chrono::steady_clock::now();
  return Measured(c.name);
}

StatusOr<Measurement> FakeEngine::MeasureCeiling(const MeasureOptions&) {
  Delay();
  TR_RETURN_IF_ERROR(Run("copy"));
  last_measured_ = std::chrono::steady_clock::now();
  return Measured("copy");
}

}  // namespace transposed::worker
