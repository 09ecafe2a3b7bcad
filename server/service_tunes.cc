// TransposeService's device tune threads (service.h): each takes its device's queued jobs one
// at a time, asks the peers and the shared store first (a GetConfig miss), tunes, stores and
// answers the job's waiters.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include "core/device_class.h"
#include "core/text.h"
#include "server/service.h"
#include "server/service_job.h"

namespace transposed {

void TransposeService::RecallFromStore(int device) {
  // The idle ceilings a tune's ceiling is judged against (the newest IdleCeilings::kMaxPoints
  // results measured on this very device while it was idle; GPU backends only, polite.h).
  if (devices_[device].backend != "cpu") {
    StoreFilter idle;
    idle.device_fingerprint = fingerprints_[device];
    idle.contended = false;
    auto entries = store_->List(idle, false, static_cast<int>(IdleCeilings::kMaxPoints));
    if (!entries.ok()) {
      spdlog::warn("device {}: reading its idle ceilings from the store failed: {}", device,
                   entries.status().ToString());
    } else {
      for (const TuneResult& r : *entries)
        if (r.ceiling.valid)
          load_board_.AddIdleCeiling(device, r.problem.bytes(), r.ceiling_gbps());
    }
  }
  // Results stored as measured under contention before a restart: measured again once idle.
  if (!options_.polite.remeasure_contended) return;
  StoreFilter contended;
  contended.device_fingerprint = fingerprints_[device];
  contended.contended = true;
  auto entries = store_->List(contended, false, static_cast<int>(kMaxContended));
  if (!entries.ok()) {
    spdlog::warn("device {}: reading its results measured under contention failed: {}", device,
                 entries.status().ToString());
    return;
  }
  for (const TuneResult& r : *entries) NoteContended(device, r.problem, r.contention);
  if (!entries->empty())
    spdlog::info("device {}: {} stored result{} measured under contention, to measure again once "
                 "the device is idle", device, entries->size(), entries->size() == 1 ? "" : "s");
}

std::shared_ptr<TransposeService::Job> TransposeService::PopLocked(int device) {
  auto& queue = queues_[device];
  if (queue.empty()) return nullptr;
  auto it = std::find_if(queue.begin(), queue.end(),
                         [](const std::shared_ptr<Job>& j) { return !j->background.load(); });
  if (it == queue.end()) it = queue.begin();
  std::shared_ptr<Job> job = std::move(*it);
  queue.erase(it);
  return job;
}

void TransposeService::TuneLoop(int device) {
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
  RecallFromStore(device);
  while (true) {
    std::shared_ptr<Job> job;
    bool sample_due = false;
    {
      MutexLock l(&mu_);
      // While idle, the device is sampled every interval (the busy signal stays current for
      // ListDevices and the metrics, and an idle device re-measures contended results).
      while (!shutdown_.load() && queues_[device].empty()) {
        const auto now = SteadyClock::now();
        const auto every = confirming ? window_interval : interval;
        if (now - last_sample >= every) {
          sample_due = true;
          break;
        }
        wake_[device]->WaitFor(&mu_, last_sample + every - now);
      }
      if (!sample_due) {
        if (queues_[device].empty()) return;  // shutting down, nothing left to run
        job = PopLocked(device);
        running_[device] = job;
      }
    }
    if (sample_due) {
      last_sample = SteadyClock::now();
      const DeviceLoad load = load_board_.Sample(device, *backends_[device]);
      confirming = false;
      if (!options_.polite.remeasure_contended) continue;
      if (load.state == LoadState::kBusy) {
        idle = false;
        continue;
      }
      if (!idle) idle = true, idle_since = last_sample;
      if (last_sample - idle_since >= remeasure_window) {
        QueueRemeasure(device);
      } else {
        confirming = RemeasurePending(device);
      }
      continue;
    }
    if (job->background.load() && options_.polite.duty_cycle <= 0 && !AwaitWindow(device, job)) {
      if (job->abandoned.empty()) continue;  // back in the queue behind an urgent job
    }
    RunJob(device, job);  // clears running_[device] before it answers the waiters
    last_sample = SteadyClock::now();  // RunJob sampled the device
    // A busy reading (the tune's sample, or its contention evidence) starts the window again.
    if (load_board_.Get(device).state == LoadState::kBusy) idle = false;
  }
}

bool TransposeService::AwaitWindow(int device, const std::shared_ptr<Job>& job) {
  bool counted = false;
  bool run = false;
  std::string last;
  while (!shutdown_.load() && !job->cancel.load()) {
    const DeviceLoad load = load_board_.Sample(device, *backends_[device]);
    last = DescribeLoad(load.sample);
    if (load.state != LoadState::kBusy || !job->background.load()) {
      run = true;
      break;
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                        job->queued_at).count();
    if (waited >= options_.polite.max_wait_seconds) {
      job->abandoned = "no idle window within " +
                       std::to_string(static_cast<int>(options_.polite.max_wait_seconds)) +
                       " s (--background-max-wait): the device stayed busy (" + last + ")";
      break;
    }
    if (!counted) {
      counted = true;
      load_board_.AddWaiting(device, 1);
      spdlog::info("tune deferred device={} problem={}: the device is busy ({})", device,
                   job->problem.Key(), last);
    }
    MutexLock l(&mu_);
    const bool urgent = std::any_of(queues_[device].begin(), queues_[device].end(),
                                    [](const auto& j) { return !j->background.load(); });
    if (urgent) {
      // A caller waits for another tune: it goes first, this one waits on in the queue.
      queues_[device].push_front(job);
      running_[device].reset();
      break;
    }
    // Sampled at the window interval: the tune starts soon after the job goes idle.
    wake_[device]->WaitFor(&mu_, std::chrono::duration<double>(WindowInterval(options_.polite)));
  }
  if (counted) load_board_.AddWaiting(device, -1);
  if (!job->abandoned.empty()) load_board_.RecordAbandoned(device, job->problem.Key(),
                                                           job->abandoned);
  // Shut down or cancelled: RunJob answers it so.
  return run || shutdown_.load() || job->cancel.load() || !job->abandoned.empty();
}

bool TransposeService::HasUrgentLocked(int device) const {
  if (running_[device] && !running_[device]->background.load()) return true;
  for (const auto& job : queues_[device])
    if (!job->background.load()) return true;
  return false;
}

void TransposeService::OnWanted(const std::string& cls, const Problem& problem) {
  for (size_t d = 0; d < classes_.size(); ++d) {
    if (classes_[d] != cls || load_board_.Get(static_cast<int>(d)).state != LoadState::kIdle)
      continue;
    MutexLock l(&mu_);
    if (shutdown_.load() || HasUrgentLocked(static_cast<int>(d))) continue;  // busy with its own
    // Behind its own background tunes and the class's earlier wants, within --max-queued-tunes: a
    // model asks for many problems at once, and each want is published once (taking only the
    // first while a tune ran left the rest to the busy node: 2 of 6 on the fake worker).
    if (!CheckQueueLocked(static_cast<int>(d)).ok()) continue;
    const std::string key = fingerprints_[d] + "|" + problem.Key();
    if (inflight_.count(key) != 0) return;
    // Stored here already (before the shared store had it): the class gets it without a tune.
    auto hit = answers_.LookupByClass(cls, problem);
    if (hit.ok() && hit->has_value()) {
      options_.shared->Publish(**hit, "");
      return;
    }
    spdlog::info("tune for the class device={} problem={}: a busy node of the class asked for "
                 "an idle one", d, problem.Key());
    TuneOptions options = options_.tune;
    options.budget_seconds = options_.tune_budget_seconds;
    inflight_[key] = EnqueueLocked(static_cast<int>(d), problem, std::move(options),
                                   /*forced=*/false, /*background=*/true);
    return;
  }
}

void TransposeService::NoteContended(int device, const Problem& problem,
                                     const std::string& contention) {
  MutexLock l(&mu_);
  auto& set = contended_[device];
  const std::string key = problem.Key();
  if (contention.empty()) {
    set.erase(key);
    return;
  }
  if (set.size() >= kMaxContended && set.find(key) == set.end()) return;
  set.emplace(key, std::make_pair(problem, 0));
}

bool TransposeService::RemeasurePending(int device) {
  MutexLock l(&mu_);
  for (const auto& [key, entry] : contended_[device]) {
    if (entry.second < kMaxRemeasures && inflight_.count(fingerprints_[device] + "|" + key) == 0)
      return true;
  }
  return false;
}

void TransposeService::QueueRemeasure(int device) {
  MutexLock l(&mu_);
  if (shutdown_.load() || !queues_[device].empty() || running_[device]) return;
  for (auto& [key, entry] : contended_[device]) {
    auto& [problem, tries] = entry;
    if (tries >= kMaxRemeasures) continue;
    const std::string job_key = fingerprints_[device] + "|" + key;
    if (inflight_.count(job_key) != 0) continue;
    ++tries;
    TuneOptions options = options_.tune;
    options.budget_seconds = options_.tune_budget_seconds;
    auto job = std::make_shared<Job>();
    job->device = device;
    job->problem = problem;
    job->key = job_key;
    job->options = std::move(options);
    job->background.store(true);
    job->remeasure = true;
    job->forced = true;  // a fresh measurement here, never a peer's result
    spdlog::info("re-measure queued device={} problem={}: its result was measured under "
                 "contention (attempt {} of {})", device, key, tries, kMaxRemeasures);
    inflight_[job_key] = job;
    queues_[device].push_back(job);
    return;  // one at a time
  }
}

void TransposeService::RunJob(int device, const std::shared_ptr<Job>& job) {
  StatusOr<TuneResult> result = Status::Cancelled("the tune was cancelled before it started");
  AnswerSource source = AnswerSource::kTuned;
  if (shutdown_.load()) {
    result = Status::Cancelled("the daemon is shutting down");
  } else if (!job->abandoned.empty()) {
    result = Status::Unavailable("problem: the background tune of " + job->problem.ToString() +
                                 " was abandoned: " + job->abandoned);
  } else if (!job->cancel.load()) {
    const std::string key = job->problem.Key();
    // A miss asks the peers of the class first (never a forced tune: that asks for a fresh one).
    std::optional<TuneResult> from_peer;
    if (!job->forced && options_.peer_lookup) {
      from_peer = options_.peer_lookup(devices_[device], job->problem);
      // Only an answer for this very problem (its exactness included: a peer that predates
      // value-exact answers its bit-exact entry) and this device class.
      if (from_peer && (ClassOf(from_peer->device).key != classes_[device] ||
                        !(from_peer->problem == job->problem))) {
        from_peer.reset();
      }
    }
    if (from_peer) {
      from_peer->origin = Origin::kPeer;
      auto merged = store_->Merge(*from_peer);
      answers_.Invalidate();
      if (!merged.ok())
        spdlog::error("peer result device={} problem={}: saving failed: {}", device, key,
                      merged.status().ToString());
      spdlog::info("tune skipped device={} problem={}: peer result variant={} gbps={:.2f} "
                   "measured_on={}",
                   device, key, from_peer->best.name, from_peer->gbps(), from_peer->device.uuid);
      source = AnswerSource::kPeer;
      result = std::move(*from_peer);
    }
  }
  if (source != AnswerSource::kPeer && !shutdown_.load() && !job->cancel.load() &&
      job->abandoned.empty()) {
    const std::string key = job->problem.Key();
    // The device's load right before the tune: a busy device makes a background tune polite
    // (polite.h) and marks the result as measured under contention.
    const DeviceLoad load_before = load_board_.Sample(device, *backends_[device]);
    const bool busy_before = load_before.state == LoadState::kBusy;
    std::optional<PoliteBackend> polite;
    if (busy_before && job->background.load() && options_.polite.duty_cycle > 0) {
      polite.emplace(backends_[device].get(), &load_board_, device, job->queued_at, &job->cancel,
                     [job] { return !job->background.load(); });
      load_board_.AddWaiting(device, 1);
      spdlog::info("tune throttled device={} problem={}: the device is busy ({}); at most {:.0f}% "
                   "of its time until it is idle", device, key, DescribeLoad(load_before.sample),
                   options_.polite.duty_cycle * 100);
    }
    tunes_started_.fetch_add(1);
    if (options_.observer != nullptr) options_.observer->OnTuneStarted(device);
    spdlog::info("tune start device={} problem={}", device, key);
    const auto start = std::chrono::steady_clock::now();
    auto on_progress = [&](const CandidateResult& c, int index, int total) {
      spdlog::debug("tune device={} problem={} candidate={} gbps={:.2f} valid={} phase={}{}",
                    device, key, c.candidate.name,
                    EffectiveGBps(job->problem.bytes(), c.measurement.median_s),
                    c.measurement.valid, PhaseName(c.phase),
                    c.measurement.valid ? "" : " error=\"" + c.measurement.error + "\"");
      // Every waiter that asked for them (Tune, TuneMany; not GetConfig) sees the results.
      std::vector<std::shared_ptr<Waiter>> waiters;
      {
        MutexLock l(&job->mu);
        waiters = job->waiters;
      }
      for (const auto& w : waiters)
        if (auto fn = w->progress()) fn(c, index, total);
    };
    // A re-tune starts from the cached winner: it stays unless beaten side by side.
    TuneOptions options = job->options;
    std::string previous_contention;
    bool has_previous = false;
    if (auto previous = store_->Lookup(fingerprints_[device], job->problem);
        previous.ok() && previous->has_value()) {
      options.incumbent = (*previous)->best.name;
      previous_contention = (*previous)->contention;
      has_previous = true;
    }
    if (polite) {
      // Its budget is of device time: the wall time it may take grows as its share shrinks,
      // bounded by the wait for an idle window.
      options.budget_seconds = std::min(options.budget_seconds / options_.polite.duty_cycle,
                                        options_.polite.max_wait_seconds);
      result = RunTune(*polite, job->problem, options, on_progress, &job->cancel);
      load_board_.AddWaiting(device, -1);
      if (!polite->abandoned().empty()) {
        job->abandoned = polite->abandoned();
        load_board_.RecordAbandoned(device, key, job->abandoned);
        result = Status::Unavailable("problem: the background tune of " +
                                     job->problem.ToString() + " was abandoned: " +
                                     job->abandoned);
      }
    } else {
      result = RunTune(*backends_[device], job->problem, options, on_progress, &job->cancel);
    }
    load_board_.MarkOwnWork(device);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (result.ok()) {
      result->device = devices_[device];
      // Measured under contention: the device was busy when it began, or its own measurements
      // say so. Such a result never replaces one measured on an idle device. Not on the CPU
      // backend: its host is shared by design, and its spreads say nothing of a job's GPU.
      const bool gpu = devices_[device].backend != "cpu";
      // Its copy ceiling against the device's idle ceiling at that size (polite.h).
      const int64_t bytes = job->problem.bytes();
      const double ceiling = result->ceiling.valid ? result->ceiling_gbps() : 0;
      const double idle_ceiling = gpu ? load_board_.IdleCeilingFor(device, bytes) : 0;
      const std::string evidence =
          gpu ? ContentionOf(*result, kContentionRelSpread, idle_ceiling,
                             options_.polite.ceiling_drop)
              : "";
      std::string contention = evidence;
      if (busy_before) {
        const std::string why = load_before.sample.utilization_percent >= 0
                                    ? DescribeLoad(load_before.sample)
                                    : "the last tune showed " + load_before.tune_contention;
        contention = "device busy: " + why + (contention.empty() ? "" : "; " + contention);
      }
      if (polite && polite->throttled()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "; throttled to %.0f%% of the device",
                      options_.polite.duty_cycle * 100);
        contention += buf;
      }
      result->contention = contention;
      load_board_.RecordTune(device, evidence, ceiling, idle_ceiling);
      if (gpu && contention.empty()) load_board_.AddIdleCeiling(device, bytes, ceiling);
      const bool downgrade = !contention.empty() && has_previous && previous_contention.empty();
      // A read-only database (said once at start): the answer is served, not stored.
      const auto store_start = std::chrono::steady_clock::now();
      const bool writable = store_->read_only().empty() && !downgrade;
      Status saved = writable ? store_->SaveTune(*result) : Status::OK();
      if (downgrade) {
        spdlog::info("tune device={} problem={}: measured under contention ({}); the stored "
                     "result, measured on an idle device, is kept", device, key, contention);
      } else if (writable && saved.ok()) {
        NoteContended(device, job->problem, contention);
      }
      // Before the tune leaves inflight_: a request that then misses it reads the store.
      answers_.Invalidate();
      result->breakdown.Add("daemon.store", std::chrono::duration<double>(
                                                std::chrono::steady_clock::now() - store_start)
                                                .count());
      if (!saved.ok()) {
        // The answer is still good; the next request will tune again.
        spdlog::error("tune device={} problem={}: saving the result failed: {}", device, key,
                      saved.ToString());
      }
      tunes_completed_.fetch_add(1);
      spdlog::info(
          "tune done device={} problem={} variant={} gbps={:.2f} ceiling_gbps={:.2f} "
          "seconds={:.3f} tried={} of={} valid={} previous={} previous_kept={} stored={}{}",
          device, key, result->best.name, result->gbps(), result->ceiling_gbps(),
          result->tune_seconds, result->tried, result->total, result->valid,
          options.incumbent.empty() ? "-" : options.incumbent, result->incumbent_kept,
          writable && saved.ok() ? "yes" : "no",
          contention.empty() ? "" : " contention=\"" + contention + "\"");
      spdlog::debug("tune breakdown device={} problem={} {}", device, key,
                    result->breakdown.ToString());
    } else {
      tunes_failed_.fetch_add(1);
      spdlog::info("tune failed device={} problem={} status={}", device, key,
                   result.status().ToString());
    }
    if (options_.observer != nullptr)
      options_.observer->OnTuneFinished(device, result.status(), seconds);
  }
  if (options_.shared != nullptr) {
    // The class gets the winner (kept only if faster than its stored one); a failed tune gives
    // the lease up so that another node of the class may tune.
    if (result.ok())
      options_.shared->Publish(*result, job->lease);
    else
      options_.shared->Release(devices_[device], job->problem, job->lease);
  }
  FinishJob(device, job, std::move(result), source);
}

void TransposeService::OnSharedOutcome(const std::shared_ptr<Job>& job, SharedOutcome outcome) {
  const int device = job->device;
  {
    MutexLock l(&mu_);
    --shared_waiting_[device];
  }
  if (outcome.kind == SharedOutcome::Kind::kFound) {
    TuneResult r = std::move(*outcome.result);
    r.origin = Origin::kShared;
    // Stored before the job leaves inflight_, so a request that misses it there finds it stored.
    if (store_->read_only().empty()) {
      auto merged = store_->Merge(r);
      answers_.Invalidate();  // a miss of it may be cached
      if (!merged.ok())
        spdlog::error("shared result device={} problem={}: saving failed: {}", device,
                      job->problem.Key(), merged.status().ToString());
    }
    spdlog::info("tune skipped device={} problem={}: shared result variant={} gbps={:.2f} "
                 "measured_on={}",
                 device, job->problem.Key(), r.best.name, r.gbps(), r.device.uuid);
    FinishJob(device, job, std::move(r), AnswerSource::kShared);
    return;
  }
  if (outcome.kind == SharedOutcome::Kind::kUnavailable)
    spdlog::debug("device={} problem={}: tuning locally ({})", device, job->problem.Key(),
                  outcome.reason);
  MutexLock l(&mu_);
  if (shutdown_.load()) return;  // Shutdown() answered its waiters
  job->lease = std::move(outcome.lease);
  queues_[device].push_back(job);
  wake_[device]->Signal();
}

void TransposeService::FinishJob(int device, const std::shared_ptr<Job>& job,
                                 StatusOr<TuneResult> result, AnswerSource source) {
  std::vector<std::shared_ptr<Waiter>> waiters;
  {
    MutexLock l(&mu_);
    auto it = inflight_.find(job->key);
    if (it != inflight_.end() && it->second == job) inflight_.erase(it);
    // Leave the queue before answering, so a caller that reads the queue depth after its answer
    // never sees its own finished tune still counted.
    if (running_[device] == job) running_[device].reset();
    waiters = job->Finish();
  }
  if (waiters.empty()) return;
  StatusOr<ConfigAnswer> answer = result.status();
  if (result.ok()) {
    // measured_on: this device after a tune, the peer's instance for a peer's result.
    DeviceInfo measured_on = result->device;
    measured_on.index = LocalIndexOf(measured_on);
    answer = ConfigAnswer{std::move(result).value(), source, device, std::move(measured_on)};
    answer->result.device = devices_[device];
  }
  for (const auto& w : waiters) w->Answer(answer);
}

}  // namespace transposed
