#include "server/service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "core/text.h"

namespace transposed {

namespace {

// How often a waiting request polls its cancellation predicate and the shutdown flag.
constexpr auto kPollInterval = std::chrono::milliseconds(20);

// "rows: must be >= 1" -> "problem.rows: must be >= 1"; "rows, cols: ..." -> "problem.rows,
// problem.cols: ...". ValidateProblem names fields without a prefix; the API names them as
// fields of the request's `problem`.
std::string PrefixFields(const std::string& message, const std::string& prefix) {
  const auto colon = message.find(": ");
  if (colon == std::string::npos) return prefix + message;
  std::string fields = message.substr(0, colon);
  std::string out;
  size_t start = 0;
  while (true) {
    const auto comma = fields.find(", ", start);
    out += prefix +
           fields.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (comma == std::string::npos) break;
    out += ", ";
    start = comma + 2;
  }
  return out + message.substr(colon);
}

}  // namespace

const char* AnswerSourceName(AnswerSource s) {
  return s == AnswerSource::kCache ? "cache" : "tuned";
}

// One tuning run, shared by every request waiting for it.
struct TransposeService::Job {
  int device = 0;
  Problem problem;
  std::string key;  // fingerprint|problem key
  TuneOptions options;
  bool forced = false;              // from Tune: records progress events for its caller
  std::atomic<bool> cancel{false};  // passed to RunTune

  struct Event {
    CandidateResult result;
    int index;
    int total;
  };
  // Guarded by the service's mu_.
  int waiters = 0;
  bool done = false;
  Status status;
  std::optional<TuneResult> result;
  std::vector<Event> events;
  std::condition_variable cv;
};

struct TransposeService::Worker {
  // Guarded by the service's mu_.
  std::deque<std::shared_ptr<Job>> queue;
  std::shared_ptr<Job> running;
  std::condition_variable cv;
  std::thread thread;
};

StatusOr<std::unique_ptr<TransposeService>> TransposeService::Create(
    std::vector<std::unique_ptr<Backend>> backends, Store* store, ServiceOptions options) {
  if (backends.empty()) return Status::InvalidArgument("service: no devices to serve");
  if (store == nullptr) return Status::InvalidArgument("service: no store");
  if (options.tune_budget_seconds <= 0)
    return Status::InvalidArgument("tune budget: must be > 0 seconds, got " +
                                   std::to_string(options.tune_budget_seconds));
  std::unique_ptr<TransposeService> service(
      new TransposeService(std::move(backends), store, std::move(options)));
  for (const auto& d : service->devices_) {
    Status s = store->UpsertDevice(d);
    if (!s.ok()) {
      service->Shutdown();
      return Status(s.code(), "registering device " + std::to_string(d.index) + " (" + d.name +
                                  ") in the store: " + s.message());
    }
  }
  return service;
}

TransposeService::TransposeService(std::vector<std::unique_ptr<Backend>> backends, Store* store,
                                   ServiceOptions options)
    : backends_(std::move(backends)), store_(store), options_(std::move(options)) {
  for (size_t i = 0; i < backends_.size(); ++i) {
    DeviceInfo d = backends_[i]->device();
    d.index = static_cast<int>(i);
    fingerprints_.push_back(d.Fingerprint());
    devices_.push_back(std::move(d));
  }
  for (size_t i = 0; i < backends_.size(); ++i) workers_.push_back(std::make_unique<Worker>());
  for (size_t i = 0; i < backends_.size(); ++i)
    workers_[i]->thread = std::thread([this, i] { WorkerLoop(static_cast<int>(i)); });
}

TransposeService::~TransposeService() { Shutdown(); }

void TransposeService::Shutdown() {
  shutdown_.store(true);
  {
    std::lock_guard<std::mutex> l(mu_);
    auto cancel = [](const std::shared_ptr<Job>& job) {
      job->cancel.store(true);
      job->cv.notify_all();
    };
    for (auto& w : workers_) {
      if (w->running) cancel(w->running);
      for (auto& job : w->queue) cancel(job);
      w->cv.notify_all();
    }
    for (auto& [key, job] : inflight_) cancel(job);
  }
  std::lock_guard<std::mutex> j(join_mu_);
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

ServiceCounters TransposeService::counters() const {
  ServiceCounters c;
  c.tunes_started = tunes_started_.load();
  c.tunes_completed = tunes_completed_.load();
  c.tunes_failed = tunes_failed_.load();
  c.cache_hits = cache_hits_.load();
  c.cache_misses = cache_misses_.load();
  return c;
}

std::vector<DeviceInfo> TransposeService::ListDevices() const { return devices_; }

std::string TransposeService::DeviceList() const {
  std::string s;
  for (const auto& d : devices_) {
    if (!s.empty()) s += ", ";
    s += std::to_string(d.index) + "=" + d.backend + " '" + d.name + "' uuid=" + d.uuid;
  }
  return s;
}

StatusOr<int> TransposeService::ResolveDevice(const DeviceRef& ref,
                                              const std::string& field) const {
  const std::string have =
      " (this daemon has " + std::to_string(devices_.size()) + ": " + DeviceList() + ")";
  if (ref.index.has_value()) {
    const int i = *ref.index;
    if (i < 0 || i >= static_cast<int>(devices_.size()))
      return Status::NotFound(field + ": no device with index " + std::to_string(i) + have);
    return i;
  }
  if (ref.uuid.has_value()) {
    for (const auto& d : devices_)
      if (d.uuid == *ref.uuid) return d.index;
    return Status::NotFound(field + ": no device with uuid " + Quote(*ref.uuid) + have);
  }
  return 0;
}

Status TransposeService::CheckProblem(const Problem& problem, int device) const {
  Status s = ValidateProblem(problem, devices_[device].memory_bytes);
  if (!s.ok()) return Status(s.code(), PrefixFields(s.message(), "problem."));
  if (backends_[device]->Candidates(problem).empty()) {
    return Status::InvalidArgument("problem: no kernel configuration of device " +
                                   std::to_string(device) + " (" + devices_[device].backend +
                                   ") supports " + problem.ToString());
  }
  return Status::OK();
}

std::shared_ptr<TransposeService::Job> TransposeService::EnqueueLocked(int device,
                                                                       const Problem& problem,
                                                                       TuneOptions options,
                                                                       bool forced) {
  auto job = std::make_shared<Job>();
  job->device = device;
  job->problem = problem;
  job->key = fingerprints_[device] + "|" + problem.Key();
  job->options = std::move(options);
  job->forced = forced;
  workers_[device]->queue.push_back(job);
  workers_[device]->cv.notify_one();
  return job;
}

StatusOr<ConfigAnswer> TransposeService::GetConfig(const ConfigRequest& request,
                                                   const RequestContext& ctx) {
  TR_ASSIGN_OR_RETURN(const int device, ResolveDevice(request.device));
  const Problem& problem = request.problem;
  TR_RETURN_IF_ERROR(CheckProblem(problem, device));
  const std::string& fp = fingerprints_[device];

  auto from_cache = [&](TuneResult r) {
    cache_hits_.fetch_add(1);
    r.device = devices_[device];
    return ConfigAnswer{std::move(r), AnswerSource::kCache, device};
  };

  // The fast path: no service lock, only the store's own short one.
  {
    TR_ASSIGN_OR_RETURN(auto hit, store_->Lookup(fp, problem));
    if (hit.has_value()) return from_cache(std::move(*hit));
  }
  if (request.cache_only) {
    cache_misses_.fetch_add(1);
    return Status::NotFound("problem: no cached configuration for " + problem.ToString() +
                            " on device " + std::to_string(device) + " (policy CACHE_ONLY)");
  }

  std::shared_ptr<Job> job;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_.load()) return Status::Cancelled("the daemon is shutting down");
    const std::string key = fp + "|" + problem.Key();
    auto it = inflight_.find(key);
    if (it != inflight_.end()) {
      job = it->second;
    } else {
      // A tune of this problem may have finished between the lookup above and now: it saves
      // before it leaves inflight_, so a second lookup under mu_ cannot miss a finished tune.
      TR_ASSIGN_OR_RETURN(auto hit, store_->Lookup(fp, problem));
      if (hit.has_value()) return from_cache(std::move(*hit));
      TuneOptions options = options_.tune;
      options.budget_seconds = options_.tune_budget_seconds;
      job = EnqueueLocked(device, problem, std::move(options), /*forced=*/false);
      inflight_[key] = job;
    }
    cache_misses_.fetch_add(1);
    ++job->waiters;
  }
  return Wait(job, nullptr, ctx);
}

StatusOr<ConfigAnswer> TransposeService::Tune(const ForcedTuneRequest& request,
                                              const TuneProgressFn& progress,
                                              const RequestContext& ctx) {
  TR_ASSIGN_OR_RETURN(const int device, ResolveDevice(request.device));
  TR_RETURN_IF_ERROR(CheckProblem(request.problem, device));
  if (!std::isfinite(request.budget_seconds) || request.budget_seconds < 0 ||
      request.budget_seconds > kMaxTuneBudgetSeconds) {
    return Status::InvalidArgument("budget_seconds: must be >= 0 (0: the daemon's default) and <= " +
                                   std::to_string(static_cast<int>(kMaxTuneBudgetSeconds)) +
                                   ", got " + std::to_string(request.budget_seconds));
  }
  TuneOptions options = options_.tune;
  options.budget_seconds =
      request.budget_seconds > 0 ? request.budget_seconds : options_.tune_budget_seconds;
  options.exhaustive = request.exhaustive;

  std::shared_ptr<Job> job;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_.load()) return Status::Cancelled("the daemon is shutting down");
    job = EnqueueLocked(device, request.problem, std::move(options), /*forced=*/true);
    // GetConfig requests arriving from now on join this tune unless one is already in flight.
    inflight_.emplace(job->key, job);
    ++job->waiters;
  }
  return Wait(job, progress, ctx);
}

StatusOr<ConfigAnswer> TransposeService::Wait(const std::shared_ptr<Job>& job,
                                              const TuneProgressFn& progress,
                                              const RequestContext& ctx) {
  size_t seen = 0;
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    if (progress && seen < job->events.size()) {
      std::vector<Job::Event> fresh(job->events.begin() + static_cast<std::ptrdiff_t>(seen),
                                    job->events.end());
      seen = job->events.size();
      l.unlock();
      for (const auto& e : fresh) progress(e.result, e.index, e.total);
      l.lock();
      continue;
    }
    if (job->done) break;
    bool client_gone = false;
    if (ctx.is_cancelled) {
      l.unlock();
      client_gone = ctx.is_cancelled();
      l.lock();
      if (job->done) continue;  // deliver what finished meanwhile (events first)
    }
    if (client_gone || shutdown_.load()) {
      if (--job->waiters == 0) {
        // Nobody wants this tune any more: stop it, and let later requests start a fresh one.
        job->cancel.store(true);
        auto it = inflight_.find(job->key);
        if (it != inflight_.end() && it->second == job) inflight_.erase(it);
      }
      return Status::Cancelled(client_gone ? "the client cancelled the request"
                                           : "the daemon is shutting down");
    }
    job->cv.wait_for(l, kPollInterval);
  }
  --job->waiters;
  if (!job->status.ok()) return job->status;
  ConfigAnswer answer{*job->result, AnswerSource::kTuned, job->device};
  answer.result.device = devices_[job->device];
  return answer;
}

void TransposeService::WorkerLoop(int device) {
  Worker& w = *workers_[device];
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      w.cv.wait(l, [&] { return shutdown_.load() || !w.queue.empty(); });
      if (w.queue.empty()) return;  // shutting down, nothing left to cancel
      job = std::move(w.queue.front());
      w.queue.pop_front();
      w.running = job;
    }
    RunJob(device, job);
    std::lock_guard<std::mutex> l(mu_);
    w.running.reset();
  }
}

void TransposeService::RunJob(int device, const std::shared_ptr<Job>& job) {
  StatusOr<TuneResult> result = Status::Cancelled("the tune was cancelled before it started");
  if (shutdown_.load()) {
    result = Status::Cancelled("the daemon is shutting down");
  } else if (!job->cancel.load()) {
    const std::string key = job->problem.Key();
    tunes_started_.fetch_add(1);
    spdlog::info("tune start device={} problem={}", device, key);
    auto on_progress = [&](const CandidateResult& c, int index, int total) {
      spdlog::debug("tune device={} problem={} candidate={} gbps={:.2f} valid={} phase={}{}",
                    device, key, c.candidate.name,
                    EffectiveGBps(job->problem.bytes(), c.measurement.median_s),
                    c.measurement.valid, c.phase,
                    c.measurement.valid ? "" : " error=\"" + c.measurement.error + "\"");
      if (!job->forced) return;
      std::lock_guard<std::mutex> l(mu_);
      job->events.push_back(Job::Event{c, index, total});
      job->cv.notify_all();
    };
    result = RunTune(*backends_[device], job->problem, job->options, on_progress, &job->cancel);
    if (result.ok()) {
      result->device = devices_[device];
      Status saved = store_->SaveTune(*result);
      if (!saved.ok()) {
        // The answer is still good; the next request will tune again.
        spdlog::error("tune device={} problem={}: saving the result failed: {}", device, key,
                      saved.ToString());
      }
      tunes_completed_.fetch_add(1);
      spdlog::info(
          "tune done device={} problem={} variant={} gbps={:.2f} ceiling_gbps={:.2f} "
          "seconds={:.3f} tried={} valid={}",
          device, key, result->best.name, result->gbps(), result->ceiling_gbps(),
          result->tune_seconds, result->tried, result->valid);
    } else {
      tunes_failed_.fetch_add(1);
      spdlog::info("tune failed device={} problem={} status={}", device, key,
                   result.status().ToString());
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  job->done = true;
  if (result.ok()) {
    job->result = std::move(result).value();
  } else {
    job->status = result.status();
  }
  auto it = inflight_.find(job->key);
  if (it != inflight_.end() && it->second == job) inflight_.erase(it);
  job->cv.notify_all();
}

StatusOr<StoreFilter> TransposeService::ResolveQuery(const EntryQuery& query) const {
  StoreFilter filter = query.filter;
  if (query.device.has_value()) {
    TR_ASSIGN_OR_RETURN(const int device, ResolveDevice(*query.device, "filter.device"));
    const std::string& fp = fingerprints_[device];
    if (!filter.device_fingerprint.empty() && filter.device_fingerprint != fp) {
      return Status::InvalidArgument("filter.device_fingerprint: " +
                                     Quote(filter.device_fingerprint) +
                                     " contradicts filter.device (device " +
                                     std::to_string(device) + " has fingerprint " + fp + ")");
    }
    filter.device_fingerprint = fp;
  }
  return filter;
}

StatusOr<std::vector<TuneResult>> TransposeService::ListEntries(const EntryQuery& query,
                                                                bool include_candidates,
                                                                int limit) {
  if (limit < 0)
    return Status::InvalidArgument("limit: must be >= 0 (0: no limit), got " +
                                   std::to_string(limit));
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  TR_ASSIGN_OR_RETURN(auto entries, store_->List(filter, include_candidates, limit));
  for (auto& e : entries) {
    const std::string fp = e.device.Fingerprint();
    e.device.index = -1;
    for (size_t i = 0; i < fingerprints_.size(); ++i)
      if (fingerprints_[i] == fp) e.device.index = static_cast<int>(i);
  }
  return entries;
}

StatusOr<int64_t> TransposeService::DeleteEntries(const EntryQuery& query, bool all) {
  if (query.empty() && !all)
    return Status::InvalidArgument("filter: empty filter deletes everything; set all=true");
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  return store_->Delete(filter);
}

}  // namespace transposed
