// FakeBackend: a scripted Backend test double for the tuner and for anything built on top of it
// (the service's tune threads, the store, the RPCs).
//
// Each fake candidate has a scripted outcome: the check status, the median of each successive
// Measure call (the k-th call reports times_s[min(k, size-1)]; with several buffer placements
// asked, combined with other_placements_s), a measurement error, and real
// time to spend in Check (to exercise budgets). The backend counts Open/Check/Measure/ceiling
// calls and logs them in order ("open", "ceiling", "check:NAME", "measure:NAME"), so tests can
// see what the tuner did and in which order. No timing is real except check_sleep_s.
//
// Thread-safety: all methods may be called from any thread; the counters and the log are
// guarded by a mutex. Sessions share the backend's state (they may outlive the backend).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/placements.h"
#include "core/problem.h"
#include "core/status.h"
#include "tuner/backend.h"

namespace transposed {

struct FakeCandidate {
  std::string name;
  // Median reported by the k-th Measure of this candidate: times_s[min(k, size - 1)].
  std::vector<double> times_s = {1e-3};
  Status check_status;    // non-OK: Check fails with it
  Status measure_status;  // non-OK: Measure calls from number measure_fails_from on fail with it
  int measure_fails_from = 0;  // 0-based call number
  double check_sleep_s = 0;    // real time spent in each Check
  // Medians on buffer placements 1, 2...: a Measure asking for several placements reports the
  // combination (core/placements.h CombinePlacements) of times_s's pick (placement 0) and these,
  // as the CUDA worker does for a big problem. Empty: every placement measures alike.
  std::vector<double> other_placements_s;
};

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(std::vector<FakeCandidate> candidates, double ceiling_s = 5e-4)
      : state_(std::make_shared<State>()) {
    state_->candidates = std::move(candidates);
    state_->ceiling_s = ceiling_s;
    device_.backend = "fake";
    device_.uuid = "fake-0";
    device_.name = "Fake Device";
    device_.memory_bytes = uint64_t{1} << 30;
    device_.attributes = {{"kind", "scripted"}};
    device_.library_version = "fake";
  }

  const DeviceInfo& device() const override { return device_; }
  DeviceInfo& mutable_device() { return device_; }

  std::vector<Candidate> Candidates(const Problem&) const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    std::vector<Candidate> out;
    int64_t i = 0;
    for (const FakeCandidate& c : state_->candidates) out.push_back({c.name, {{"index", i++}}});
    return out;
  }

  StatusOr<std::unique_ptr<Session>> Open(const Problem& p) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->opens;
    state_->log.push_back("open");
    if (!state_->open_status.ok()) return state_->open_status;
    Status v = ValidateProblem(p, device_.memory_bytes);
    if (!v.ok()) return v;
    return std::unique_ptr<Session>(new FakeSession(state_));
  }

  // While held, every Check blocks (a tune stays in flight until the test lets it go on).
  void HoldChecks(bool hold) {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->held = hold;
    }
    state_->released.notify_all();
  }

  // The median every later ceiling measurement reports (a device that got slower: contention).
  void set_ceiling_s(double s) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->ceiling_s = s;
  }

  // A cold device: the next `calls` ceiling measurements report `s` (clocks still ramping up, or
  // buffers touched for the first time), the later ones the ceiling median.
  void set_cold_ceiling(int calls, double s) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->cold_ceilings = calls;
    state_->cold_ceiling_s = s;
  }

  // Makes every later Open fail with `s`.
  void set_open_status(Status s) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->open_status = std::move(s);
  }

  int open_calls() const {
    return Get([](const State& s) { return s.opens; });
  }
  int ceiling_calls() const {
    return Get([](const State& s) { return s.ceilings; });
  }
  int check_calls(const std::string& name) const {
    return Get([&](const State& s) { return Lookup(s.checks, name); });
  }
  int measure_calls(const std::string& name) const {
    return Get([&](const State& s) { return Lookup(s.measures, name); });
  }
  // Options of every Measure call of `name`, in order.
  std::vector<MeasureOptions> measure_options(const std::string& name) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->options.find(name);
    return it == state_->options.end() ? std::vector<MeasureOptions>{} : it->second;
  }
  std::vector<std::string> log() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->log;
  }

 private:
  struct State {
    mutable std::mutex mu;
    std::condition_variable released;  // notified when held goes false
    bool held = false;
    std::vector<FakeCandidate> candidates;
    double ceiling_s = 0;
    int cold_ceilings = 0;
    double cold_ceiling_s = 0;
    Status open_status;
    int opens = 0;
    int ceilings = 0;
    std::map<std::string, int> checks, measures;
    std::map<std::string, std::vector<MeasureOptions>> options;
    std::vector<std::string> log;

    const FakeCandidate* Find(const std::string& name) const {
      for (const FakeCandidate& c : candidates)
        if (c.name == name) return &c;
      return nullptr;
    }
  };

  static int Lookup(const std::map<std::string, int>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  }
  template <typename F>
  int Get(F f) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return f(*state_);
  }

  static MeasureMethod FakeMethod() {
    MeasureMethod m;
    m.timer = "fake";
    return m;
  }

  // Samples: the scripted median, repeated as many times as the options ask (at least one); one
  // sample and no warm-up where it reaches the options' cutoff (screened, as the CUDA harness).
  static Measurement Scripted(double t, const MeasureOptions& opt) {
    if (opt.cutoff_s > 0 && t >= opt.cutoff_s)
      return Measurement::FromSamples({t}, 0, FakeMethod());
    const int n = std::max(1, std::min(opt.min_samples, std::max(1, opt.max_samples)));
    return Measurement::FromSamples(std::vector<double>(static_cast<size_t>(n), t),
                                    std::max(0, opt.warmup), FakeMethod());
  }

  class FakeSession : public Session {
   public:
    explicit FakeSession(std::shared_ptr<State> state) : state_(std::move(state)) {}

    Status Check(const Candidate& c) override {
      double sleep_s = 0;
      Status result;
      {
        std::unique_lock<std::mutex> lock(state_->mu);
        state_->released.wait(lock, [this] { return !state_->held; });
        ++state_->checks[c.name];
        state_->log.push_back("check:" + c.name);
        const FakeCandidate* f = state_->Find(c.name);
        if (f == nullptr) return Status::InvalidArgument("fake: unknown candidate " + c.name);
        sleep_s = f->check_sleep_s;
        result = f->check_status;
      }
      if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
      return result;
    }

    StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& opt) override {
      std::lock_guard<std::mutex> lock(state_->mu);
      const int k = state_->measures[c.name]++;
      state_->options[c.name].push_back(opt);
      state_->log.push_back("measure:" + c.name);
      const FakeCandidate* f = state_->Find(c.name);
      if (f == nullptr) return Status::InvalidArgument("fake: unknown candidate " + c.name);
      if (!f->measure_status.ok() && k >= f->measure_fails_from) return f->measure_status;
      if (f->times_s.empty()) return Measurement::Invalid("fake: no scripted time");
      const size_t idx = std::min(static_cast<size_t>(k), f->times_s.size() - 1);
      const int sets =
          std::min(opt.placements, 1 + static_cast<int>(f->other_placements_s.size()));
      if (sets <= 1) return Scripted(f->times_s[idx], opt);
      const MeasureOptions share = PlacementShare(opt, sets);
      std::vector<Measurement> per_set = {Scripted(f->times_s[idx], share)};
      for (int s = 1; s < sets; ++s) per_set.push_back(Scripted(f->other_placements_s[s - 1], share));
      return CombinePlacements(per_set);
    }

    StatusOr<Measurement> MeasureCeiling(const MeasureOptions& opt) override {
      std::lock_guard<std::mutex> lock(state_->mu);
      ++state_->ceilings;
      state_->log.push_back("ceiling");
      if (state_->cold_ceilings > 0) {
        --state_->cold_ceilings;
        return Scripted(state_->cold_ceiling_s, opt);
      }
      return Scripted(state_->ceiling_s, opt);
    }

   private:
    std::shared_ptr<State> state_;
  };

  std::shared_ptr<State> state_;
  DeviceInfo device_;
};

}  // namespace transposed
