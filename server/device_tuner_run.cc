// DeviceTuner::RunJob (device_tuner.h) in its steps: ask the fleet, measure (polite or direct),
// judge contention, keep (the store's policy), publish; then the waiters are answered.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include "core/device_class.h"
#include "server/device_tuner.h"

namespace transposed {

// What Measure() found, for the later steps.
struct DeviceTuner::Measured {
  StatusOr<TuneResult> result = Status::Cancelled("not measured");
  DeviceLoad load_before;  // the device's load right before the tune
  bool busy_before = false;
  bool throttled = false;  // a polite tune that was throttled
  TuneOptions options;     // as run (options.incumbent: the stored winner it started from)
  bool has_previous = false;
  std::string previous_contention;  // of the stored result
  double seconds = 0;
};

void DeviceTuner::RunJob(const std::shared_ptr<TuneJob>& job) {
  StatusOr<TuneResult> result = Status::Cancelled("the tune was cancelled before it started");
  AnswerSource source = AnswerSource::kTuned;
  if (stopping_.load()) {
    result = Status::Cancelled("the daemon is shutting down");
  } else if (!job->abandoned.empty()) {
    result = Status::Unavailable("problem: the background tune of " + job->problem.ToString() +
                                 " was abandoned: " + job->abandoned);
  } else if (!job->cancel.load()) {
    if (std::optional<TuneResult> from_peer = AskPeers(*job)) {
      source = AnswerSource::kPeer;
      result = std::move(*from_peer);
    }
  }
  if (source != AnswerSource::kPeer && !stopping_.load() && !job->cancel.load() &&
      job->abandoned.empty()) {
    Measured m = Measure(job);
    if (m.result.ok()) {
      JudgeContention(*job, m);
      Keep(*job, m);
    } else {
      failed_.fetch_add(1);
      spdlog::info("tune failed device={} problem={} status={}", index_, job->key,
                   m.result.status().ToString());
    }
    if (options_.observer != nullptr)
      options_.observer->OnTuneFinished(index_, m.result.status(), m.seconds);
    result = std::move(m.result);
  }
  Publish(*job, result);
  FinishJob(job, std::move(result), source);
}

std::optional<TuneResult> DeviceTuner::AskPeers(const TuneJob& job) {
  // A miss asks the peers of the class first (never a forced tune: that asks for a fresh one).
  if (job.forced || !options_.peer_lookup) return std::nullopt;
  std::optional<TuneResult> from_peer = options_.peer_lookup(device_, job.problem);
  // Only an answer for this very problem (its exactness included: a peer that predates
  // value-exact answers its bit-exact entry) and this device class.
  if (!from_peer || ClassOf(from_peer->device).key != class_ ||
      !(from_peer->problem == job.problem))
    return std::nullopt;
  from_peer->origin = Origin::kPeer;
  auto merged = ctx_.store->Merge(*from_peer);
  ctx_.answers->Invalidate();
  if (!merged.ok())
    spdlog::error("peer result device={} problem={}: saving failed: {}", index_, job.key,
                  merged.status().ToString());
  spdlog::info(
      "tune skipped device={} problem={}: peer result variant={} gbps={:.2f} "
      "measured_on={}",
      index_, job.key, from_peer->best.name, from_peer->gbps(), from_peer->device.uuid);
  return from_peer;
}

DeviceTuner::Measured DeviceTuner::Measure(const std::shared_ptr<TuneJob>& job) {
  LoadBoard& board = *ctx_.load_board;
  const std::string& key = job->key;
  Measured m;
  // The device's load right before the tune: a busy device makes a background tune polite
  // (polite.h) and marks the result as measured under contention.
  m.load_before = board.Sample(index_, *backend_);
  m.busy_before = m.load_before.state == LoadState::kBusy;
  std::optional<PoliteBackend> polite;
  if (m.busy_before && job->background.load() && options_.polite.duty_cycle > 0) {
    polite.emplace(backend_.get(), &board, index_, job->queued_at, &job->cancel,
                   [job] { return !job->background.load(); });
    board.AddWaiting(index_, 1);
    spdlog::info(
        "tune throttled device={} problem={}: the device is busy ({}); at most {:.0f}% "
        "of its time until it is idle",
        index_, key, DescribeLoad(m.load_before.sample), options_.polite.duty_cycle * 100);
  }
  started_.fetch_add(1);
  if (options_.observer != nullptr) options_.observer->OnTuneStarted(index_);
  spdlog::info("tune start device={} problem={}", index_, key);
  const auto start = std::chrono::steady_clock::now();
  auto on_progress = [&](const CandidateResult& c, int index, int total) {
    spdlog::debug("tune device={} problem={} candidate={} gbps={:.2f} valid={} phase={}{}", index_,
                  key, c.candidate.name,
                  EffectiveGBps(job->problem.bytes(), c.measurement.median_s), c.measurement.valid,
                  PhaseName(c.phase),
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
  m.options = job->options;
  if (auto previous = ctx_.store->Lookup(fingerprint_, job->problem);
      previous.ok() && previous->has_value()) {
    m.options.incumbent = (*previous)->best.name;
    m.previous_contention = (*previous)->contention;
    // An entry of another kernel library version (an upgrade) is re-validated here: never kept
    // over what this build measures.
    m.has_previous = (*previous)->device.library_version == device_.library_version;
  }
  if (polite) {
    // Its budget is of device time: the wall time it may take grows as its share shrinks,
    // bounded by the wait for an idle window.
    TuneOptions options = m.options;
    options.budget_seconds = std::min(options.budget_seconds / options_.polite.duty_cycle,
                                      options_.polite.max_wait_seconds);
    m.result = RunTune(*polite, job->problem, options, on_progress, &job->cancel);
    board.AddWaiting(index_, -1);
    m.throttled = polite->throttled();
    if (!polite->abandoned().empty()) {
      job->abandoned = polite->abandoned();
      board.RecordAbandoned(index_, key, job->abandoned);
      m.result = Status::Unavailable("problem: the background tune of " + job->problem.ToString() +
                                     " was abandoned: " + job->abandoned);
    }
  } else {
    m.result = RunTune(*backend_, job->problem, m.options, on_progress, &job->cancel);
  }
  board.MarkOwnWork(index_);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (m.result.ok()) m.result->device = device_;
  return m;
}

void DeviceTuner::JudgeContention(const TuneJob& job, Measured& m) {
  TuneResult& result = *m.result;
  // Measured under contention: the device was busy when it began, or its own measurements say
  // so. Such a result never replaces one measured on an idle device. Not on the CPU backend:
  // its host is shared by design, and its spreads say nothing of a job's GPU.
  const bool gpu = device_.backend != "cpu";
  // Its copy ceiling against the device's idle ceiling at that size (polite.h).
  const int64_t bytes = job.problem.bytes();
  const double ceiling = result.ceiling.valid ? result.ceiling_gbps() : 0;
  const double idle_ceiling = gpu ? ctx_.load_board->IdleCeilingFor(index_, bytes) : 0;
  const std::string evidence =
      gpu ? ContentionOf(result, kContentionRelSpread, idle_ceiling, options_.polite.ceiling_drop)
          : "";
  std::string contention = evidence;
  if (m.busy_before) {
    const std::string why = m.load_before.sample.utilization_percent >= 0
                                ? DescribeLoad(m.load_before.sample)
                                : "the last tune showed " + m.load_before.tune_contention;
    contention = "device busy: " + why + (contention.empty() ? "" : "; " + contention);
  }
  if (m.throttled) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "; throttled to %.0f%% of the device",
                  options_.polite.duty_cycle * 100);
    contention += buf;
  }
  result.contention = contention;
  ctx_.load_board->RecordTune(index_, evidence, ceiling, idle_ceiling);
  if (gpu && contention.empty()) ctx_.load_board->AddIdleCeiling(index_, bytes, ceiling);
}

void DeviceTuner::Keep(const TuneJob& job, Measured& m) {
  TuneResult& result = *m.result;
  const std::string& key = job.key;
  const std::string& contention = result.contention;
  const bool downgrade = !contention.empty() && m.has_previous && m.previous_contention.empty();
  // A read-only database (said once at start): the answer is served, not stored.
  const auto store_start = std::chrono::steady_clock::now();
  const bool writable = ctx_.store->read_only().empty() && !downgrade;
  Status saved = writable ? ctx_.store->SaveTune(result) : Status::OK();
  if (downgrade) {
    spdlog::info(
        "tune device={} problem={}: measured under contention ({}); the stored "
        "result, measured on an idle device, is kept",
        index_, key, contention);
  } else if (writable && saved.ok()) {
    NoteContended(job.problem, contention);
  }
  // Before the tune leaves the flight: a request that then misses it reads the store.
  ctx_.answers->Invalidate();
  // The tuner as a health probe: this device's copy ceiling against its class's.
  if (options_.health != nullptr && result.ceiling.valid)
    options_.health->Observe(index_, class_, device_.uuid, result.problem.bytes(),
                             result.ceiling_gbps(), !contention.empty());
  result.breakdown.Add(
      "daemon.store",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - store_start).count());
  if (!saved.ok()) {
    // The answer is still good; the next request will tune again.
    spdlog::error("tune device={} problem={}: saving the result failed: {}", index_, key,
                  saved.ToString());
  }
  completed_.fetch_add(1);
  spdlog::info(
      "tune done device={} problem={} variant={} gbps={:.2f} ceiling_gbps={:.2f} "
      "seconds={:.3f} tried={} of={} valid={} previous={} previous_kept={} stored={}{}",
      index_, key, result.best.name, result.gbps(), result.ceiling_gbps(), result.tune_seconds,
      result.tried, result.total, result.valid,
      m.options.incumbent.empty() ? "-" : m.options.incumbent, result.incumbent_kept,
      writable && saved.ok() ? "yes" : "no",
      contention.empty() ? "" : " contention=\"" + contention + "\"");
  spdlog::debug("tune breakdown device={} problem={} {}", index_, key, result.breakdown.ToString());
}

void DeviceTuner::Publish(const TuneJob& job, const StatusOr<TuneResult>& result) {
  if (options_.shared == nullptr) return;
  // The class gets the winner (kept only if faster than its stored one); a failed tune gives
  // the lease up so that another node of the class may tune.
  if (result.ok())
    options_.shared->Publish(*result, job.lease);
  else
    options_.shared->Release(device_, job.problem, job.lease);
}

}  // namespace transposed
