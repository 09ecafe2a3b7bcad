#include "server/polite.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

namespace transposed {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

double WindowInterval(const PoliteOptions& o) {
  return std::min(o.window_sample_interval_seconds, o.sample_interval_seconds);
}

Status CheckPoliteOptions(const PoliteOptions& o) {
  if (!(o.busy_utilization_percent > 0 && o.busy_utilization_percent <= 100))
    return Status::InvalidArgument("--busy-utilization: must be in (0, 100], got " +
                                   std::to_string(o.busy_utilization_percent));
  if (!(o.duty_cycle >= 0 && o.duty_cycle <= 1))
    return Status::InvalidArgument("--background-duty-cycle: must be in [0, 1], got " +
                                   std::to_string(o.duty_cycle));
  if (!(o.max_wait_seconds > 0 && o.max_wait_seconds <= 7 * 24 * 3600))
    return Status::InvalidArgument("--background-max-wait: must be in (0, 604800] seconds, got " +
                                   std::to_string(o.max_wait_seconds));
  if (!(o.sample_interval_seconds > 0 && o.sample_interval_seconds <= 3600))
    return Status::InvalidArgument("--load-sample-interval: must be in (0, 3600] seconds, got " +
                                   std::to_string(o.sample_interval_seconds));
  if (!(o.fleet_defer_seconds >= 0 && o.fleet_defer_seconds <= 3600))
    return Status::InvalidArgument("--fleet-defer: must be in [0, 3600] seconds, got " +
                                   std::to_string(o.fleet_defer_seconds));
  if (!(o.settle_seconds >= 0 && o.settle_seconds <= 60))
    return Status::InvalidArgument("--load-settle: must be in [0, 60] seconds, got " +
                                   std::to_string(o.settle_seconds));
  if (!(o.window_sample_interval_seconds > 0 && o.window_sample_interval_seconds <= 60))
    return Status::InvalidArgument("--window-sample-interval: must be in (0, 60] seconds, got " +
                                   std::to_string(o.window_sample_interval_seconds));
  if (!(o.remeasure_idle_seconds >= 0 && o.remeasure_idle_seconds <= 3600))
    return Status::InvalidArgument("--remeasure-idle-window: must be in [0, 3600] seconds, got " +
                                   std::to_string(o.remeasure_idle_seconds));
  if (!(o.ceiling_drop >= 0 && o.ceiling_drop < 1))
    return Status::InvalidArgument("--contention-ceiling-drop: must be in [0, 1), got " +
                                   std::to_string(o.ceiling_drop));
  if (!(o.evidence_seconds >= 0 && o.evidence_seconds <= 24 * 3600))
    return Status::InvalidArgument("--contention-evidence: must be in [0, 86400] seconds, got " +
                                   std::to_string(o.evidence_seconds));
  return Status::OK();
}

LoadBoard::LoadBoard(size_t devices, PoliteOptions options) : options_(std::move(options)) {
  MutexLock l(&mu_);
  loads_.resize(devices);
  own_work_.resize(devices);
  idle_ceilings_.resize(devices);
}

void LoadBoard::MarkOwnWork(int d) {
  MutexLock l(&mu_);
  own_work_[d] = std::chrono::steady_clock::now();
}

LoadState LoadBoard::StateOf(const DeviceLoad& l, int64_t now_ms) const {
  LoadState s = ClassifyLoad(l.sample, options_.busy_utilization_percent);
  if (s != LoadState::kUnknown) return s;
  if (!l.tune_contention.empty() &&
      now_ms - l.tune_contention_at_unix_ms <= options_.evidence_seconds * 1000)
    return LoadState::kBusy;
  return LoadState::kUnknown;
}

DeviceLoad LoadBoard::Sample(int d, Backend& backend, bool settle) {
  LoadSample sample = backend.SampleLoad();  // no lock held: a request to the worker
  // Busy right after the daemon's own work: maybe only that work, still in the driver's window.
  // Taken again at the window interval until it reads idle or settle_seconds have passed (the
  // driver's window may be far shorter than settle_seconds: the next tune need not wait it out).
  while (settle && ClassifyLoad(sample, options_.busy_utilization_percent) == LoadState::kBusy) {
    std::chrono::steady_clock::time_point own;
    {
      MutexLock l(&mu_);
      own = own_work_[d];
    }
    const double since = SecondsSince(own);
    if (own == std::chrono::steady_clock::time_point{} || since >= options_.settle_seconds) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(
        std::min(options_.settle_seconds - since, WindowInterval(options_))));
    sample = backend.SampleLoad();
  }
  const int64_t now = NowUnixMs();
  MutexLock l(&mu_);
  DeviceLoad& load = loads_[d];
  const LoadState before = load.state;
  const bool first = load.sampled_at_unix_ms == 0;
  load.sample = std::move(sample);
  load.sampled_at_unix_ms = now;
  load.state = StateOf(load, now);
  if (first || load.state != before) {
    spdlog::info("device {} load {} ({}{})", d, LoadStateName(load.state),
                 DescribeLoad(load.sample),
                 load.tune_contention.empty() ? "" : "; last tune: " + load.tune_contention);
  }
  return load;
}

void LoadBoard::RecordTune(int d, const std::string& contention, double ceiling_gbps,
                           double idle_ceiling_gbps) {
  MutexLock l(&mu_);
  DeviceLoad& load = loads_[d];
  load.tune_ceiling_gbps = ceiling_gbps;
  load.idle_ceiling_gbps = idle_ceiling_gbps;
  load.tune_contention = contention;
  load.tune_contention_at_unix_ms = contention.empty() ? 0 : NowUnixMs();
  load.state = StateOf(load, NowUnixMs());
}

void LoadBoard::AddIdleCeiling(int d, int64_t bytes, double gbps) {
  MutexLock l(&mu_);
  idle_ceilings_[d].Add(bytes, gbps);
}

double LoadBoard::IdleCeilingFor(int d, int64_t bytes) const {
  MutexLock l(&mu_);
  return idle_ceilings_[d].ReferenceFor(bytes);
}

void LoadBoard::AddWaiting(int d, int delta) {
  MutexLock l(&mu_);
  loads_[d].background_waiting = std::max(0, loads_[d].background_waiting + delta);
}

void LoadBoard::RecordAbandoned(int d, const std::string& problem, const std::string& reason) {
  spdlog::warn("tune abandoned device={} problem={} reason=\"{}\"", d, problem, reason);
  MutexLock l(&mu_);
  ++loads_[d].background_abandoned;
  loads_[d].last_abandoned = problem + ": " + reason;
}

DeviceLoad LoadBoard::Get(int d) const {
  MutexLock l(&mu_);
  return loads_[d];
}

std::vector<DeviceLoad> LoadBoard::All() const {
  MutexLock l(&mu_);
  return loads_;
}

// --- PoliteBackend ----------------------------------------------------------------------------

class PoliteBackend::PoliteSession : public Session {
 public:
  PoliteSession(PoliteBackend* owner, std::unique_ptr<Session> inner)
      : owner_(owner), inner_(std::move(inner)) {}

  Status Check(const Candidate& c) override {
    const auto start = std::chrono::steady_clock::now();
    Status s = inner_->Check(c);
    owner_->After(SecondsSince(start));
    return s;
  }
  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& opt) override {
    const auto start = std::chrono::steady_clock::now();
    auto m = inner_->Measure(c, opt);
    owner_->After(SecondsSince(start));
    return m;
  }
  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& opt) override {
    const auto start = std::chrono::steady_clock::now();
    auto m = inner_->MeasureCeiling(opt);
    owner_->After(SecondsSince(start));
    return m;
  }
  TimeBreakdown TakePhases() override { return inner_->TakePhases(); }

 private:
  PoliteBackend* const owner_;
  std::unique_ptr<Session> inner_;
};

PoliteBackend::PoliteBackend(Backend* inner, LoadBoard* board, int device,
                             std::chrono::steady_clock::time_point since,
                             std::atomic<bool>* cancel, std::function<bool()> waited_for)
    : inner_(inner), board_(board), device_(device), since_(since), cancel_(cancel),
      waited_for_(std::move(waited_for)) {}

PoliteBackend::~PoliteBackend() = default;

StatusOr<std::unique_ptr<Session>> PoliteBackend::Open(const Problem& p) {
  TR_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, inner_->Open(p));
  return std::unique_ptr<Session>(std::make_unique<PoliteSession>(this, std::move(s)));
}

void PoliteBackend::Resample(bool settle) {
  const DeviceLoad load = board_->Sample(device_, *inner_, settle);
  last_sample_ = std::chrono::steady_clock::now();
  state_ = load.state;
  last_load_ = DescribeLoad(load.sample);
}

void PoliteBackend::After(double call_s) {
  const PoliteOptions& o = board_->options();
  board_->MarkOwnWork(device_);
  if (waited_for_ && waited_for_()) return;  // a caller waits for it now: full speed
  if (!abandoned_.empty() || cancel_->load()) return;
  if (state_ != LoadState::kBusy) {
    // Full speed: has a job come back? (Settling: its own call just ended.)
    if (SecondsSince(last_sample_) >= o.sample_interval_seconds) Resample(/*settle=*/true);
    if (state_ != LoadState::kBusy) return;
  }
  throttled_ = true;
  if (SecondsSince(since_) >= o.max_wait_seconds) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "the device stayed busy for %.0f s (%s); throttled to %.0f%% "
                  "of its time, the tune did not finish", o.max_wait_seconds, last_load_.c_str(),
                  o.duty_cycle * 100);
    abandoned_ = buf;
    cancel_->store(true);
    return;
  }
  if (o.duty_cycle <= 0 || o.duty_cycle >= 1) return;
  // Sleep so that the calls take at most duty_cycle of the time (the samples' own time counts as
  // sleep: they run no GPU work), in slices that notice a cancellation (shutdown), a caller
  // joining, or an idle sample (the job went idle: full speed from now on).
  const double want = call_s * (1 - o.duty_cycle) / o.duty_cycle;
  const auto start = std::chrono::steady_clock::now();
  constexpr double kSlice = 0.05;
  while (!cancel_->load() && !(waited_for_ && waited_for_())) {
    if (SecondsSince(last_sample_) >= WindowInterval(o)) {
      Resample(/*settle=*/false);
      if (state_ != LoadState::kBusy) break;
    }
    const double left = want - SecondsSince(start);
    if (left <= 0) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(left, kSlice)));
  }
  slept_s_ += SecondsSince(start);
}

}  // namespace transposed
