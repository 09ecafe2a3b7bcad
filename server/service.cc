#include "server/service.h"

#include "core/device_class.h"
#include "server/answer_now.h"
#include "server/service_job.h"
#include "store/entry_validation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "core/text.h"

namespace transposed {

namespace {

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

Status CheckTuneBudget(double budget_seconds) {
  if (!std::isfinite(budget_seconds) || budget_seconds < 0 ||
      budget_seconds > kMaxTuneBudgetSeconds) {
    return Status::InvalidArgument(
        "budget_seconds: must be >= 0 (0: the daemon's default) and <= " +
        std::to_string(static_cast<int>(kMaxTuneBudgetSeconds)) + ", got " +
        std::to_string(budget_seconds));
  }
  return Status::OK();
}

std::string EntryPageToken(const EntryCursor& cursor) {
  return "e1." + std::to_string(cursor.tuned_at_unix_ms) + "." + std::to_string(cursor.id);
}

StatusOr<EntryCursor> ParseEntryPageToken(const std::string& token) {
  auto bad = [&token] {
    return Status::InvalidArgument("page_token: " + Quote(token) +
                                   " is not a token from a ListEntries answer");
  };
  if (token.size() > 48 || token.rfind("e1.", 0) != 0) return bad();
  const std::string rest = token.substr(3);
  const auto dot = rest.find('.');
  if (dot == std::string::npos) return bad();
  auto number = [](const std::string& digits, int64_t* out) {
    if (digits.empty() || digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *out = std::stoll(digits);
    return true;
  };
  EntryCursor c;
  if (!number(rest.substr(0, dot), &c.tuned_at_unix_ms) || !number(rest.substr(dot + 1), &c.id))
    return bad();
  return c;
}

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
    // A read-only database (main logs that once) cannot record the device: nothing to say.
    if (!store->read_only().empty()) continue;
    Status s = store->UpsertDevice(d);
    // A write refused for a read-only file or a full disk made the store read-only (it logs
    // that): serve read-only, the store is tried again later (store/store_reopener.h).
    if (!s.ok() && s.code() == StatusCode::kFailedPrecondition && !store->read_only().empty())
      continue;
    if (!s.ok() && s.code() == StatusCode::kUnavailable) {
      // A locked database still serves its cache; the tune that saves an entry of this device
      // records the device too.
      spdlog::warn("device {} not recorded in the store: {}", d.index, s.ToString());
      continue;
    }
    if (!s.ok()) {
      service->Shutdown();
      return Status(s.code(), "registering device " + std::to_string(d.index) + " (" + d.name +
                                  ") in the store: " + s.message());
    }
  }
  // A busy node of a class asks the idle ones to tune (polite.h): this daemon's idle devices
  // answer. The shared store is stopped by Shutdown(), before the service goes.
  if (service->options_.shared != nullptr) {
    TransposeService* self = service.get();
    service->options_.shared->SetOnWanted(
        [self](const std::string& cls, const Problem& problem) { self->OnWanted(cls, problem); });
  }
  return service;
}

TransposeService::TransposeService(std::vector<std::unique_ptr<Backend>> backends, Store* store,
                                   ServiceOptions options)
    : backends_(std::move(backends)),
      store_(store),
      options_(std::move(options)),
      load_board_(backends_.size(), options_.polite) {
  for (size_t i = 0; i < backends_.size(); ++i) {
    DeviceInfo d = backends_[i]->device();
    d.index = static_cast<int>(i);
    fingerprints_.push_back(d.Fingerprint());
    classes_.push_back(ClassOf(d).key);
    devices_.push_back(std::move(d));
  }
  {
    MutexLock l(&mu_);
    queues_.resize(backends_.size());
    running_.resize(backends_.size());
    shared_waiting_.resize(backends_.size());
    contended_.resize(backends_.size());
  }
  for (size_t i = 0; i < backends_.size(); ++i) wake_.push_back(std::make_unique<CondVar>());
  for (size_t i = 0; i < backends_.size(); ++i)
    threads_.emplace_back([this, i] { TuneLoop(static_cast<int>(i)); });
}

TransposeService::~TransposeService() { Shutdown(); }

void TransposeService::Shutdown() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    MutexLock l(&mu_);
    shutdown_.store(true);
    for (size_t d = 0; d < queues_.size(); ++d) {
      if (running_[d]) jobs.push_back(running_[d]);
      for (auto& job : queues_[d]) jobs.push_back(std::move(job));
      queues_[d].clear();
      wake_[d]->SignalAll();
    }
    // Jobs waiting for the shared store are in neither (answering one twice is harmless).
    for (auto& [key, job] : inflight_) jobs.push_back(job);
    inflight_.clear();
  }
  if (options_.shared != nullptr) options_.shared->Stop();
  // Answer everyone now rather than when the running tunes notice the cancellation.
  for (auto& job : jobs) {
    job->cancel.store(true);
    for (auto& w : job->Finish()) w->Answer(Status::Cancelled("the daemon is shutting down"));
  }
  MutexLock j(&join_mu_);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
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

std::vector<int> TransposeService::QueueDepths() const {
  MutexLock l(&mu_);
  std::vector<int> depths;
  for (size_t d = 0; d < queues_.size(); ++d)
    depths.push_back(static_cast<int>(queues_[d].size()) + (running_[d] ? 1 : 0));
  return depths;
}

std::vector<int64_t> TransposeService::WorkerRestarts() const {
  std::vector<int64_t> restarts;
  for (const auto& b : backends_) restarts.push_back(b->worker_restarts());
  return restarts;
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
  // Built only for an error: this runs on every request.
  auto have = [this] {
    return " (this daemon has " + std::to_string(devices_.size()) + ": " + DeviceList() + ")";
  };
  if (ref.index.has_value()) {
    const int i = *ref.index;
    if (i < 0 || i >= static_cast<int>(devices_.size()))
      return Status::NotFound(field + ": no device with index " + std::to_string(i) + have());
    return i;
  }
  if (ref.uuid.has_value()) {
    for (const auto& d : devices_)
      if (d.uuid == *ref.uuid) return d.index;
    return Status::NotFound(field + ": no device with uuid " + Quote(*ref.uuid) + have());
  }
  return 0;
}

Status TransposeService::CheckShape(const Problem& problem, int device,
                                    const std::string& field) const {
  Status s = ValidateProblem(problem, devices_[device].memory_bytes);
  if (!s.ok()) return Status(s.code(), PrefixFields(s.message(), field + "."));
  return Status::OK();
}

Status TransposeService::CheckProblem(const Problem& problem, int device,
                                      const std::string& field) const {
  TR_RETURN_IF_ERROR(CheckShape(problem, device, field));
  if (backends_[device]->Candidates(problem).empty()) {
    return Status::InvalidArgument(field + ": no kernel configuration of device " +
                                   std::to_string(device) + " (" + devices_[device].backend +
                                   ") supports " + problem.ToString());
  }
  return Status::OK();
}

Status TransposeService::CheckQueueLocked(int device) const {
  const auto& queue = queues_[device];
  // Misses waiting for the shared store count too: each may come back to tune here.
  const int queued = static_cast<int>(queue.size()) + shared_waiting_[device];
  if (queued < options_.max_queued_tunes) return Status::OK();
  // Every queued tune and the running one may take up to their budget.
  double wait = running_[device] ? running_[device]->options.budget_seconds : 0;
  for (const auto& job : queue) wait += job->options.budget_seconds;
  return Status::ResourceExhausted(
      "device " + std::to_string(device) + ": " + std::to_string(queued) +
      " tunes are already queued (at most " + std::to_string(options_.max_queued_tunes) +
      ", --max-queued-tunes); retry in about " + std::to_string(static_cast<int>(wait + 1)) +
      " s, or ask with policy CACHE_ONLY");
}

std::shared_ptr<TransposeService::Job> TransposeService::EnqueueLocked(int device,
                                                                       const Problem& problem,
                                                                       TuneOptions options,
                                                                       bool forced,
                                                                       bool background) {
  auto job = std::make_shared<Job>();
  job->background.store(background);
  job->device = device;
  job->problem = problem;
  job->key = fingerprints_[device] + "|" + problem.Key();
  job->options = std::move(options);
  job->forced = forced;
  if (!forced && options_.shared != nullptr) {
    // A miss asks the class first; the job goes on the device's queue only if it is to tune here
    // (OnSharedOutcome). Resolve() only queues: it never blocks under mu_.
    ++shared_waiting_[device];
    auto done = [this, job](SharedOutcome outcome) { OnSharedOutcome(job, std::move(outcome)); };
    // A busy device asks the class's idle nodes first (polite.h); Get() takes only the board's
    // own lock.
    if (options_.polite.fleet_defer_seconds > 0 &&
        load_board_.Get(device).state == LoadState::kBusy) {
      spdlog::info("device={} problem={}: the device is busy; asking the class's idle nodes "
                   "to tune it (waiting up to {:.0f} s)", device, problem.Key(),
                   options_.polite.fleet_defer_seconds);
      options_.shared->ResolveDeferred(devices_[device], problem,
                                       options_.polite.fleet_defer_seconds, std::move(done));
    } else {
      options_.shared->Resolve(devices_[device], problem, std::move(done));
    }
    return job;
  }
  queues_[device].push_back(job);
  wake_[device]->Signal();
  return job;
}

std::shared_ptr<TransposeService::Waiter> TransposeService::JoinLocked(
    const std::shared_ptr<Job>& job, ProgressFn progress, AnswerFn done, bool background) {
  if (!background) job->background.store(false);  // a caller waits for it now
  auto waiter = std::make_shared<Waiter>(std::move(progress), std::move(done));
  MutexLock l(&job->mu);
  job->waiters.push_back(waiter);
  return waiter;
}

StatusOr<int> TransposeService::CheckRequest(const Problem& problem, const DeviceRef& device,
                                             const std::string& field) const {
  TR_ASSIGN_OR_RETURN(const int index, ResolveDevice(device, field + ".device"));
  TR_RETURN_IF_ERROR(CheckProblem(problem, index, field));
  return index;
}

StatusOr<int> TransposeService::ResolveRequest(const Problem& problem, const DeviceRef& device,
                                               const std::string& device_class,
                                               double budget_seconds) const {
  int index = -1;
  if (!device_class.empty()) {
    // A peer asks for any device of a class.
    for (size_t i = 0; i < classes_.size() && index < 0; ++i)
      if (classes_[i] == device_class) index = static_cast<int>(i);
    if (index < 0)
      return Status::NotFound("device_class: this daemon has no device of class " +
                              Quote(device_class));
  } else {
    TR_ASSIGN_OR_RETURN(index, ResolveDevice(device));
  }
  TR_RETURN_IF_ERROR(CheckShape(problem, index));
  TR_RETURN_IF_ERROR(CheckTuneBudget(budget_seconds));
  return index;
}

TuneOptions TransposeService::TuneOptionsFor(double budget_seconds, bool exhaustive) const {
  TuneOptions options = options_.tune;
  options.budget_seconds = budget_seconds > 0 ? budget_seconds : options_.tune_budget_seconds;
  options.exhaustive = exhaustive;
  return options;
}

std::shared_ptr<TransposeService::Waiter> TransposeService::StartGetConfig(
    const ConfigRequest& request, ProgressFn progress, AnswerFn done, const AdmitFn& admit) {
  auto fail = [&done](Status s) -> std::shared_ptr<Waiter> {
    done(std::move(s));
    return nullptr;
  };
  // A hit needs the shape checked only: the stored winner shows that a configuration runs it.
  // The candidates (computed in this process, never by a worker process: tuner/backend.h) are
  // checked on a miss, below.
  const StatusOr<int> resolved = ResolveRequest(request.problem, request.device,
                                                request.device_class, request.budget_seconds);
  if (!resolved.ok()) return fail(resolved.status());
  const int device = *resolved;
  const Problem& problem = request.problem;
  const std::string& fp = fingerprints_[device];
  const std::string& cls = classes_[device];

  auto count = [&](bool hit) {
    (hit ? cache_hits_ : cache_misses_).fetch_add(1);
    if (options_.observer != nullptr) options_.observer->OnCacheLookup(device, hit);
  };
  // A hit may have been measured on another device of the class: answer for ours, say where.
  auto from_cache = [&](TuneResult r) -> std::shared_ptr<Waiter> {
    count(true);
    ConfigAnswer answer;
    answer.measured_on = std::move(r.device);
    answer.measured_on.index = LocalIndexOf(answer.measured_on);
    r.device = devices_[device];
    answer.result = std::move(r);
    answer.source = AnswerSource::kCache;
    answer.device_index = device;
    done(std::move(answer));
    return nullptr;
  };

  // The fast path: no service lock, no store call (the answer cache's own short lock).
  {
    auto hit = answers_.Find(cls, problem);
    if (!hit.ok()) return fail(hit.status());
    const AnswerCache::Entry& entry = *hit;
    if (entry->has_value()) {
      if (!request.shared_hit) return from_cache(**entry);
      count(true);
      ConfigAnswer answer;
      answer.stored = std::shared_ptr<const TuneResult>(entry, &**entry);
      answer.measured_on.index = LocalIndexOf(answer.stored->device);
      answer.source = AnswerSource::kCache;
      answer.device_index = device;
      done(std::move(answer));
      return nullptr;
    }
  }
  if (Status s = CheckProblem(problem, device); !s.ok()) return fail(std::move(s));
  if (request.answer_now && !request.cache_only) {
    StatusOr<ConfigAnswer> answer = AnswerNow(device, problem);
    if (answer.ok()) count(answer->source == AnswerSource::kCache);
    done(std::move(answer));
    return nullptr;
  }
  if (request.cache_only) {
    count(false);
    return fail(Status::NotFound("problem: no cached configuration for " + problem.ToString() +
                                 " on device " + std::to_string(device) + " (policy CACHE_ONLY)"));
  }

  // About to wait for a tune (or to find it just finished).
  if (admit) {
    if (Status s = admit(); !s.ok()) return fail(std::move(s));
  }
  std::shared_ptr<Waiter> waiter;
  std::optional<StatusOr<std::optional<TuneResult>>> second_lookup;
  {
    MutexLock l(&mu_);
    if (shutdown_.load()) {
      second_lookup = Status::Cancelled("the daemon is shutting down");
    } else {
      const std::string key = fp + "|" + problem.Key();
      auto it = inflight_.find(key);
      std::shared_ptr<Job> job;
      if (it != inflight_.end()) {
        job = it->second;
      } else {
        // A tune of this problem may have finished between the lookup above and now: it saves
        // before it leaves inflight_, so a second lookup under mu_ cannot miss a finished tune.
        second_lookup = answers_.LookupByClass(cls, problem);
        if (second_lookup->ok() && !(*second_lookup)->has_value()) {
          if (Status full = CheckQueueLocked(device); !full.ok()) {
            second_lookup = full;
          } else {
            job = EnqueueLocked(device, problem,
                                TuneOptionsFor(request.budget_seconds, request.exhaustive),
                                /*forced=*/false, request.background);
            inflight_[key] = job;
          }
        }
      }
      if (job)
        waiter = JoinLocked(job, std::move(progress), std::move(done), request.background);
    }
  }
  if (waiter) {
    count(false);
    return waiter;
  }
  if (!second_lookup->ok()) return fail(second_lookup->status());
  return from_cache(std::move(second_lookup->value().value()));
}

StatusOr<ConfigAnswer> TransposeService::AnswerNow(int device, const Problem& problem) {
  if (shutdown_.load()) return Status::Cancelled("the daemon is shutting down");
  const std::string& fp = fingerprints_[device];
  const std::string& cls = classes_[device];

  // The answer first (store reads only), so the tune queued below does not compete with it.
  ConfigAnswer answer;
  answer.device_index = device;
  answer.result.problem = problem;
  answer.result.device = devices_[device];
  const std::vector<Candidate> valid = backends_[device]->Candidates(problem);
  // The nearest stored problem of this device's class: the most recent entries of each dtype of
  // this element size.
  constexpr int kNeighboursPerDType = 256;
  std::vector<TuneResult> stored;
  for (DType t : AllDTypes()) {
    if (DTypeSize(t) != problem.elem_size()) continue;
    StoreFilter filter;
    filter.device_class = cls;
    filter.dtype = t;
    auto entries = store_->List(filter, /*include_candidates=*/false, kNeighboursPerDType);
    if (!entries.ok()) {
      spdlog::warn("answer_now device={} problem={}: reading neighbours failed: {}", device,
                   problem.Key(), entries.status().ToString());
      break;
    }
    for (auto& e : *entries) stored.push_back(std::move(e));
  }
  FirstAnswer first = ChooseFirstAnswer(problem, stored, valid);
  answer.source = first.source;
  answer.result.best = std::move(first.candidate);
  if (first.nearest.has_value()) answer.nearest_problem = stored[*first.nearest].problem;

  // Then the real tune (peers first, as for any miss), in the background, unless one is in
  // flight already. A full queue does not fail the answer: the tune is simply not queued now
  // (the next request tries again).
  MutexLock l(&mu_);
  if (shutdown_.load()) return Status::Cancelled("the daemon is shutting down");
  const std::string key = fp + "|" + problem.Key();
  if (inflight_.find(key) == inflight_.end()) {
    // As in GetConfig: a tune may have finished since the first lookup.
    TR_ASSIGN_OR_RETURN(auto hit, answers_.LookupByClass(cls, problem));
    if (hit.has_value()) {
      ConfigAnswer cached;
      cached.measured_on = std::move(hit->device);
      cached.measured_on.index = LocalIndexOf(cached.measured_on);
      hit->device = devices_[device];
      cached.result = std::move(*hit);
      cached.source = AnswerSource::kCache;
      cached.device_index = device;
      return cached;
    }
    if (Status full = CheckQueueLocked(device); !full.ok()) {
      spdlog::warn("answer_now device={} problem={}: background tune not queued: {}", device,
                   problem.Key(), full.message());
    } else {
      TuneOptions options = options_.tune;
      options.budget_seconds = options_.tune_budget_seconds;
      // Nobody waits for it: it runs to the end and is stored like any other tune.
      inflight_[key] = EnqueueLocked(device, problem, std::move(options), /*forced=*/false,
                                     /*background=*/true);
    }
  }
  return answer;
}

std::shared_ptr<TransposeService::Waiter> TransposeService::StartTune(
    const ForcedTuneRequest& request, ProgressFn progress, AnswerFn done) {
  auto fail = [&done](Status s) -> std::shared_ptr<Waiter> {
    done(std::move(s));
    return nullptr;
  };
  // The same prologue as StartGetConfig; a forced tune needs the candidates at once.
  const StatusOr<int> resolved = ResolveRequest(request.problem, request.device,
                                                /*device_class=*/"", request.budget_seconds);
  if (!resolved.ok()) return fail(resolved.status());
  const int device = *resolved;
  if (Status s = CheckProblem(request.problem, device); !s.ok()) return fail(std::move(s));
  TuneOptions options = TuneOptionsFor(request.budget_seconds, request.exhaustive);

  std::shared_ptr<Waiter> waiter;
  Status queue_full;
  {
    MutexLock l(&mu_);
    queue_full = CheckQueueLocked(device);
    if (!shutdown_.load() && queue_full.ok()) {
      auto job = EnqueueLocked(device, request.problem, std::move(options), /*forced=*/true);
      // GetConfig requests arriving from now on join this tune unless one is already in flight.
      inflight_.emplace(job->key, job);
      waiter = JoinLocked(job, std::move(progress), std::move(done));
    }
  }
  if (!queue_full.ok()) return fail(queue_full);
  if (!waiter) return fail(Status::Cancelled("the daemon is shutting down"));
  return waiter;
}

void TransposeService::Detach(const std::shared_ptr<Waiter>& waiter) {
  if (waiter != nullptr) waiter->Detach();
}

namespace {

// Hands one answer from a callback (any thread) to a blocked caller.
template <typename T>
struct Rendezvous {
  Mutex mu;
  CondVar cv;
  std::optional<T> value GUARDED_BY(mu);

  void Put(T v) EXCLUDES(mu) {
    MutexLock l(&mu);
    value = std::move(v);
    cv.SignalAll();
  }
  T Take() EXCLUDES(mu) {
    MutexLock l(&mu);
    while (!value.has_value()) cv.Wait(&mu);
    return std::move(*value);
  }
};

}  // namespace

StatusOr<ConfigAnswer> TransposeService::GetConfig(const ConfigRequest& request) {
  auto r = std::make_shared<Rendezvous<StatusOr<ConfigAnswer>>>();
  StartGetConfig(request, nullptr, [r](StatusOr<ConfigAnswer> a) { r->Put(std::move(a)); });
  return r->Take();
}

StatusOr<ConfigAnswer> TransposeService::Tune(const ForcedTuneRequest& request,
                                              const ProgressFn& progress) {
  auto r = std::make_shared<Rendezvous<StatusOr<ConfigAnswer>>>();
  StartTune(request, progress, [r](StatusOr<ConfigAnswer> a) { r->Put(std::move(a)); });
  return r->Take();
}

}  // namespace transposed
