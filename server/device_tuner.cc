// DeviceTuner (device_tuner.h): its queue and flight, the tune thread's loop, idle windows,
// re-measurements, the shared store's outcomes and the answers. A job's steps are in
// device_tuner_run.cc.
#include "server/device_tuner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/device_class.h"

namespace transposed {

namespace {

DeviceInfo WithIndex(DeviceInfo d, int index) {
  d.index = index;
  return d;
}

}  // namespace

DeviceTuner::DeviceTuner(int index, std::unique_ptr<Backend> backend, TunerContext context)
    : index_(index),
      backend_(std::move(backend)),
      device_(WithIndex(backend_->device(), index)),
      fingerprint_(device_.Fingerprint()),
      class_(ClassOf(device_).key),
      ctx_(std::move(context)),
      options_(*ctx_.options) {}

DeviceTuner::~DeviceTuner() {
  for (auto& job : Stop()) {
    job->cancel.store(true);
    for (auto& w : job->Finish()) w->Answer(Status::Cancelled("the daemon is shutting down"));
  }
  Join();
}

void DeviceTuner::Start() {
  MutexLock j(&join_mu_);
  if (!thread_.joinable() && !stopping_.load()) thread_ = std::thread([this] { TuneLoop(); });
}

std::vector<std::shared_ptr<TuneJob>> DeviceTuner::Stop() {
  std::vector<std::shared_ptr<TuneJob>> jobs;
  MutexLock l(&mu_);
  stopping_.store(true);
  if (running_) jobs.push_back(running_);
  for (auto& job : queue_) jobs.push_back(std::move(job));
  queue_.clear();
  // Jobs waiting for the shared store are in neither (answering one twice is harmless).
  for (auto& [key, job] : inflight_) jobs.push_back(job);
  inflight_.clear();
  wake_.SignalAll();
  return jobs;
}

void DeviceTuner::Join() {
  MutexLock j(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

int DeviceTuner::QueueDepth() const {
  MutexLock l(&mu_);
  return static_cast<int>(queue_.size()) + (running_ ? 1 : 0);
}

TunerCounters DeviceTuner::counters() const {
  TunerCounters c;
  c.started = started_.load();
  c.completed = completed_.load();
  c.failed = failed_.load();
  return c;
}

TuneOptions DeviceTuner::DefaultTuneOptions() const {
  TuneOptions options = options_.tune;
  options.budget_seconds = options_.tune_budget_seconds;
  return options;
}

Status DeviceTuner::CheckQueueLocked() const {
  // Local work only: the tunes queued here. A miss waiting for another node's tune (the shared
  // store) holds no place in this queue (16 misses of a job's shape list on a node would fill
  // it with waits); those are bounded apart, kWaitingPerQueueSlot per place, since each may come
  // back to tune here (the store down, or this node taking the lease).
  const int queued = static_cast<int>(queue_.size());
  const int max_waiting = options_.max_queued_tunes * kWaitingPerQueueSlot;
  if (queued < options_.max_queued_tunes && shared_waiting_ < max_waiting) return Status::OK();
  // Every queued tune and the running one may take up to their budget.
  double wait = running_ ? running_->options.budget_seconds : 0;
  for (const auto& job : queue_) wait += job->options.budget_seconds;
  const std::string what =
      queued >= options_.max_queued_tunes
          ? std::to_string(queued) + " tunes are already queued (at most " +
                std::to_string(options_.max_queued_tunes) + ", --max-queued-tunes)"
          : std::to_string(shared_waiting_) +
                " misses already wait for the class's tunes (at most " +
                std::to_string(max_waiting) + ", " + std::to_string(kWaitingPerQueueSlot) +
                " x --max-queued-tunes)";
  return Status::ResourceExhausted(
      "device " + std::to_string(index_) + ": " + what + "; retry in about " +
      std::to_string(static_cast<int>(wait + 1)) + " s, or ask with policy CACHE_ONLY");
}

std::shared_ptr<TuneJob> DeviceTuner::EnqueueLocked(const Problem& problem, TuneOptions options,
                                                    bool forced, bool background) {
  auto job = std::make_shared<TuneJob>();
  job->background.store(background);
  job->problem = problem;
  job->key = problem.Key();
  job->options = std::move(options);
  job->forced = forced;
  if (!forced && options_.shared != nullptr) {
    // A miss asks the class first; the job goes on the queue only if it is to tune here
    // (OnSharedOutcome). Resolve() only queues: it never blocks under mu_.
    ++shared_waiting_;
    auto done = [this, job](SharedOutcome outcome) { OnSharedOutcome(job, std::move(outcome)); };
    // A busy device asks the class's idle nodes first (polite.h); Get() takes only the board's
    // own lock.
    if (options_.polite.fleet_defer_seconds > 0 &&
        ctx_.load_board->Get(index_).state == LoadState::kBusy) {
      spdlog::info(
          "device={} problem={}: the device is busy; asking the class's idle nodes "
          "to tune it (waiting up to {:.0f} s)",
          index_, problem.Key(), options_.polite.fleet_defer_seconds);
      options_.shared->ResolveDeferred(device_, problem, options_.polite.fleet_defer_seconds,
                                       std::move(done));
    } else {
      options_.shared->Resolve(device_, problem, std::move(done));
    }
    return job;
  }
  queue_.push_back(job);
  wake_.Signal();
  return job;
}

std::shared_ptr<TuneJob> DeviceTuner::PopLocked() {
  if (queue_.empty()) return nullptr;
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [](const std::shared_ptr<TuneJob>& j) { return !j->background.load(); });
  if (it == queue_.end()) it = queue_.begin();
  std::shared_ptr<TuneJob> job = std::move(*it);
  queue_.erase(it);
  return job;
}

bool DeviceTuner::HasUrgentLocked() const {
  if (running_ && !running_->background.load()) return true;
  for (const auto& job : queue_)
    if (!job->background.load()) return true;
  return false;
}

StatusOr<std::optional<TuneResult>> DeviceTuner::Join(const Problem& problem, TuneOptions options,
                                                      bool background,
                                                      const std::shared_ptr<Waiter>& waiter) {
  MutexLock l(&mu_);
  if (stopping_.load()) return Status::Cancelled("the daemon is shutting down");
  auto it = inflight_.find(problem.Key());
  if (it != inflight_.end()) {
    it->second->Join(waiter, background);
    return std::optional<TuneResult>();
  }
  // A tune of this problem may have finished between the caller's lookup and now: it saves
  // before it leaves the flight, so a second lookup under mu_ cannot miss a finished tune.
  TR_ASSIGN_OR_RETURN(std::optional<TuneResult> hit, LookupCurrent(problem));
  if (hit.has_value()) return hit;
  TR_RETURN_IF_ERROR(CheckQueueLocked());
  auto job = EnqueueLocked(problem, std::move(options), /*forced=*/false, background);
  inflight_[job->key] = job;
  job->Join(waiter, background);
  return std::optional<TuneResult>();
}

StatusOr<std::optional<TuneResult>> DeviceTuner::LookupCurrent(const Problem& problem) const {
  TR_ASSIGN_OR_RETURN(std::optional<TuneResult> hit, ctx_.answers->LookupByClass(class_, problem));
  if (hit.has_value() && hit->device.library_version != device_.library_version)
    return std::optional<TuneResult>();
  return hit;
}

StoredVerdict DeviceTuner::Judge(const TuneResult& stored, const Problem& problem) const {
  if (stored.device.library_version == device_.library_version) return StoredVerdict::kCurrent;
  return JudgeStored(stored, backend_->Candidates(problem), device_.library_version);
}

StatusOr<std::optional<TuneResult>> DeviceTuner::QueueBackground(const Problem& problem) {
  MutexLock l(&mu_);
  if (stopping_.load()) return Status::Cancelled("the daemon is shutting down");
  if (inflight_.count(problem.Key()) != 0) return std::optional<TuneResult>();
  // As in Join: a tune may have finished since the caller's lookup.
  TR_ASSIGN_OR_RETURN(std::optional<TuneResult> hit, LookupCurrent(problem));
  if (hit.has_value()) return hit;
  if (Status full = CheckQueueLocked(); !full.ok()) {
    spdlog::warn("answer_now device={} problem={}: background tune not queued: {}", index_,
                 problem.Key(), full.message());
    return std::optional<TuneResult>();
  }
  // Nobody waits for it: it runs to the end and is stored like any other tune.
  auto job = EnqueueLocked(problem, DefaultTuneOptions(), /*forced=*/false, /*background=*/true);
  inflight_[job->key] = job;
  return std::optional<TuneResult>();
}

Status DeviceTuner::QueueForced(const Problem& problem, TuneOptions options,
                                const std::shared_ptr<Waiter>& waiter) {
  MutexLock l(&mu_);
  TR_RETURN_IF_ERROR(CheckQueueLocked());
  if (stopping_.load()) return Status::Cancelled("the daemon is shutting down");
  auto job = EnqueueLocked(problem, std::move(options), /*forced=*/true, /*background=*/false);
  // GetConfig requests arriving from now on join this tune unless one is already in flight.
  inflight_.emplace(job->key, job);
  job->Join(waiter, /*background_waiter=*/false);
  return Status::OK();
}

bool DeviceTuner::OfferWanted(const Problem& problem) {
  const LoadState state = ctx_.load_board->Get(index_).state;
  if (state == LoadState::kBusy) return false;
  MutexLock l(&mu_);
  if (stopping_.load() || HasUrgentLocked()) return false;  // busy with its own
  // A device whose load is not known (the CPU backend, a GPU without NVML) takes the class's
  // work only while it has none of its own: a node that holds its lease budget leaves problems
  // to the class (server/fleet/fleet_flight.h), and an idle CPU node is the one to take them.
  if (state != LoadState::kIdle && (running_ || !queue_.empty())) return false;
  // Behind its own background tunes and the class's earlier wants, within --max-queued-tunes: a
  // model asks for many problems at once, and each want is published once (taking only the
  // first while a tune ran left the rest to the busy node: 2 of 6 on the fake worker).
  if (!CheckQueueLocked().ok()) return false;
  if (inflight_.count(problem.Key()) != 0) return true;
  // Stored here already (before the shared store had it): the class gets it without a tune.
  auto hit = LookupCurrent(problem);
  if (hit.ok() && hit->has_value()) {
    options_.shared->Publish(**hit, "");
    return true;
  }
  spdlog::info(
      "tune for the class device={} problem={}: a busy node of the class asked for "
      "an idle one",
      index_, problem.Key());
  auto job = EnqueueLocked(problem, DefaultTuneOptions(), /*forced=*/false, /*background=*/true);
  inflight_[job->key] = job;
  return true;
}

void DeviceTuner::RecallFromStore() {
  // The idle ceilings a tune's ceiling is judged against (the newest IdleCeilings::kMaxPoints
  // results measured on this very device while it was idle; GPU backends only, polite.h).
  if (device_.backend != "cpu") {
    StoreFilter idle;
    idle.device_fingerprint = fingerprint_;
    idle.contended = false;
    auto entries = ctx_.store->List(idle, false, static_cast<int>(IdleCeilings::kMaxPoints));
    if (!entries.ok()) {
      spdlog::warn("device {}: reading its idle ceilings from the store failed: {}", index_,
                   entries.status().ToString());
    } else {
      for (const TuneResult& r : *entries)
        if (r.ceiling.valid)
          ctx_.load_board->AddIdleCeiling(index_, r.problem.bytes(), r.ceiling_gbps());
    }
  }
  // Results stored as measured under contention before a restart: measured again once idle.
  if (!options_.polite.remeasure_contended) return;
  StoreFilter contended;
  contended.device_fingerprint = fingerprint_;
  contended.contended = true;
  auto entries = ctx_.store->List(contended, false, static_cast<int>(kMaxContended));
  if (!entries.ok()) {
    spdlog::warn("device {}: reading its results measured under contention failed: {}", index_,
                 entries.status().ToString());
    return;
  }
  for (const TuneResult& r : *entries) NoteContended(r.problem, r.contention);
  if (!entries->empty())
    spdlog::info(
        "device {}: {} stored result{} measured under contention, to measure again once "
        "the device is idle",
        index_, entries->size(), entries->size() == 1 ? "" : "s");
}

void DeviceTuner::TuneLoop() {
  using SteadyClock = std::chrono::steady_clock;
  auto duration = [](double seconds) {
    return std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(seconds));
  };
  const auto interval = duration(options_.polite.sample_interval_seconds);
  const auto window_interval = duration(WindowInterval(options_.polite));
  const auto remeasure_window = duration(options_.polite.remeasure_idle_seconds);
  SteadyClock::time_point last_sample{};  // never
  // Re-measurements start only once the device has read idle for a whole remeasure window,
  // sampled at the window interval meanwhile: a job that runs in bursts (a duty cycle) reads
  // idle between them, and one idle sample every idle interval would start a re-measure beside
  // its next burst.
  bool idle = false;  // every sample since idle_since read idle
  SteadyClock::time_point idle_since{};
  bool confirming = false;  // a re-measure is pending and the window has not passed yet
  RecallFromStore();
  while (true) {
    std::shared_ptr<TuneJob> job;
    bool sample_due = false;
    {
      MutexLock l(&mu_);
      // While idle, the device is sampled every interval (the busy signal stays current for
      // ListDevices and the metrics, and an idle device re-measures contended results).
      while (!stopping_.load() && queue_.empty()) {
        const auto now = SteadyClock::now();
        const auto every = confirming ? window_interval : interval;
        if (now - last_sample >= every) {
          sample_due = true;
          break;
        }
        wake_.WaitFor(&mu_, last_sample + every - now);
      }
      if (!sample_due) {
        if (queue_.empty()) return;  // stopping, nothing left to run
        job = PopLocked();
        running_ = job;
      }
    }
    if (sample_due) {
      last_sample = SteadyClock::now();
      const DeviceLoad load = ctx_.load_board->Sample(index_, *backend_);
      confirming = false;
      if (!options_.polite.remeasure_contended) continue;
      if (load.state == LoadState::kBusy) {
        idle = false;
        continue;
      }
      if (!idle) idle = true, idle_since = last_sample;
      if (last_sample - idle_since >= remeasure_window) {
        QueueRemeasure();
      } else {
        confirming = RemeasurePending();
      }
      continue;
    }
    if (job->background.load() && options_.polite.duty_cycle <= 0 && !AwaitWindow(job)) {
      if (job->abandoned.empty()) continue;  // back in the queue behind an urgent job
    }
    RunJob(job);                       // clears running_ before it answers the waiters
    last_sample = SteadyClock::now();  // RunJob sampled the device
    // A busy reading (the tune's sample, or its contention evidence) starts the window again.
    if (ctx_.load_board->Get(index_).state == LoadState::kBusy) idle = false;
  }
}

bool DeviceTuner::AwaitWindow(const std::shared_ptr<TuneJob>& job) {
  LoadBoard& board = *ctx_.load_board;
  bool counted = false;
  bool run = false;
  std::string last;
  while (!stopping_.load() && !job->cancel.load()) {
    const DeviceLoad load = board.Sample(index_, *backend_);
    last = DescribeLoad(load.sample);
    if (load.state != LoadState::kBusy || !job->background.load()) {
      run = true;
      break;
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - job->queued_at).count();
    if (waited >= options_.polite.max_wait_seconds) {
      job->abandoned = "no idle window within " +
                       std::to_string(static_cast<int>(options_.polite.max_wait_seconds)) +
                       " s (--background-max-wait): the device stayed busy (" + last + ")";
      break;
    }
    if (!counted) {
      counted = true;
      board.AddWaiting(index_, 1);
      spdlog::info("tune deferred device={} problem={}: the device is busy ({})", index_,
                   job->problem.Key(), last);
    }
    MutexLock l(&mu_);
    const bool urgent = std::any_of(queue_.begin(), queue_.end(),
                                    [](const auto& j) { return !j->background.load(); });
    if (urgent) {
      // A caller waits for another tune: it goes first, this one waits on in the queue.
      queue_.push_front(job);
      running_.reset();
      break;
    }
    // Sampled at the window interval: the tune starts soon after the job goes idle.
    wake_.WaitFor(&mu_, std::chrono::duration<double>(WindowInterval(options_.polite)));
  }
  if (counted) board.AddWaiting(index_, -1);
  if (!job->abandoned.empty()) board.RecordAbandoned(index_, job->problem.Key(), job->abandoned);
  // Stopping or cancelled: RunJob answers it so.
  return run || stopping_.load() || job->cancel.load() || !job->abandoned.empty();
}

void DeviceTuner::NoteContended(const Problem& problem, const std::string& contention) {
  MutexLock l(&mu_);
  const std::string key = problem.Key();
  if (contention.empty()) {
    contended_.erase(key);
    return;
  }
  if (contended_.size() >= kMaxContended && contended_.find(key) == contended_.end()) return;
  contended_.emplace(key, std::make_pair(problem, 0));
}

bool DeviceTuner::RemeasurePending() {
  MutexLock l(&mu_);
  for (const auto& [key, entry] : contended_)
    if (entry.second < kMaxRemeasures && inflight_.count(key) == 0) return true;
  return false;
}

void DeviceTuner::QueueRemeasure() {
  MutexLock l(&mu_);
  if (stopping_.load() || !queue_.empty() || running_) return;
  for (auto& [key, entry] : contended_) {
    auto& [problem, tries] = entry;
    if (tries >= kMaxRemeasures) continue;
    if (inflight_.count(key) != 0) continue;
    ++tries;
    auto job = std::make_shared<TuneJob>();
    job->problem = problem;
    job->key = key;
    job->options = DefaultTuneOptions();
    job->background.store(true);
    job->remeasure = true;
    job->forced = true;  // a fresh measurement here, never a peer's result
    spdlog::info(
        "re-measure queued device={} problem={}: its result was measured under "
        "contention (attempt {} of {})",
        index_, key, tries, kMaxRemeasures);
    inflight_[key] = job;
    queue_.push_back(job);
    return;  // one at a time
  }
}

void DeviceTuner::OnSharedOutcome(const std::shared_ptr<TuneJob>& job, SharedOutcome outcome) {
  {
    MutexLock l(&mu_);
    --shared_waiting_;
  }
  if (outcome.kind == SharedOutcome::Kind::kFound) {
    TuneResult r = std::move(*outcome.result);
    r.origin = Origin::kShared;
    // Stored before the job leaves the flight, so a request that misses it there finds it stored.
    if (ctx_.store->read_only().empty()) {
      auto merged = ctx_.store->Merge(r);
      ctx_.answers->Invalidate();  // a miss of it may be cached
      if (!merged.ok())
        spdlog::error("shared result device={} problem={}: saving failed: {}", index_,
                      job->problem.Key(), merged.status().ToString());
    }
    spdlog::info(
        "tune skipped device={} problem={}: shared result variant={} gbps={:.2f} "
        "measured_on={}",
        index_, job->problem.Key(), r.best.name, r.gbps(), r.device.uuid);
    FinishJob(job, std::move(r), AnswerSource::kShared);
    return;
  }
  if (outcome.kind == SharedOutcome::Kind::kUnavailable)
    spdlog::debug("device={} problem={}: tuning locally ({})", index_, job->problem.Key(),
                  outcome.reason);
  MutexLock l(&mu_);
  if (stopping_.load()) return;  // Stop() handed its waiters to be answered
  job->lease = std::move(outcome.lease);
  queue_.push_back(job);
  wake_.Signal();
}

void DeviceTuner::FinishJob(const std::shared_ptr<TuneJob>& job, StatusOr<TuneResult> result,
                            AnswerSource source) {
  std::vector<std::shared_ptr<Waiter>> waiters;
  {
    MutexLock l(&mu_);
    auto it = inflight_.find(job->key);
    if (it != inflight_.end() && it->second == job) inflight_.erase(it);
    // Leave the queue before answering, so a caller that reads the queue depth after its answer
    // never sees its own finished tune still counted.
    if (running_ == job) running_.reset();
    waiters = job->Finish();
  }
  if (waiters.empty()) return;
  StatusOr<ConfigAnswer> answer = result.status();
  if (result.ok()) {
    // measured_on: this device after a tune, the peer's instance for a peer's result.
    DeviceInfo measured_on = result->device;
    measured_on.index = ctx_.local_index_of ? ctx_.local_index_of(measured_on) : -1;
    answer = ConfigAnswer{std::move(result).value(), source, index_, std::move(measured_on)};
    answer->result.device = device_;
  }
  for (const auto& w : waiters) w->Answer(answer);
}

}  // namespace transposed
