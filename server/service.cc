#include "server/service.h"

#include "core/device_class.h"
#include "server/answer_now.h"
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

// One request waiting for a job. Its callbacks are taken (answered) or cleared (detached) once;
// clearing them also breaks the reference cycle with a caller that holds the Waiter.
class TransposeService::Waiter {
 public:
  Waiter(ProgressFn progress, AnswerFn done)
      : progress_(std::move(progress)), done_(std::move(done)) {}

  // The progress callback (empty once answered or detached), copied so it runs unlocked.
  ProgressFn progress() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return progress_;
  }
  // Calls the answer callback if nobody did and the request did not detach.
  void Answer(StatusOr<ConfigAnswer> answer) EXCLUDES(mu_) {
    AnswerFn done;
    {
      MutexLock l(&mu_);
      done.swap(done_);
      progress_ = nullptr;
    }
    if (done) done(std::move(answer));
  }
  void Detach() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    done_ = nullptr;
    progress_ = nullptr;
  }

 private:
  Mutex mu_;
  ProgressFn progress_ GUARDED_BY(mu_);
  AnswerFn done_ GUARDED_BY(mu_);
};

// One tuning run, shared by every request waiting for it.
struct TransposeService::Job {
  int device = 0;
  Problem problem;
  std::string key;  // fingerprint|problem key
  TuneOptions options;
  bool forced = false;              // from Tune: a fresh tune (no peer lookup)
  std::string lease;                // the shared store's class-wide lease it tunes under
  std::atomic<bool> cancel{false};  // passed to RunTune
  // Nobody waits for it (polite.h) until a caller joins; a re-measurement of a result measured
  // under contention; when it was queued (its wait for an idle window counts from then); why it
  // was abandoned (device thread only).
  std::atomic<bool> background{false};
  bool remeasure = false;
  std::chrono::steady_clock::time_point queued_at = std::chrono::steady_clock::now();
  std::string abandoned;

  Mutex mu;  // after the service's mu_
  bool done GUARDED_BY(mu) = false;
  std::vector<std::shared_ptr<Waiter>> waiters GUARDED_BY(mu);

  // Takes the waiters; later joins are refused (the service's mu_ makes them impossible anyway).
  std::vector<std::shared_ptr<Waiter>> Finish() EXCLUDES(mu) {
    MutexLock l(&mu);
    done = true;
    return std::move(waiters);
  }
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
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.polite.sample_interval_seconds));
  std::chrono::steady_clock::time_point last_sample{};  // never
  while (true) {
    std::shared_ptr<Job> job;
    bool sample_due = false;
    {
      MutexLock l(&mu_);
      // While idle, the device is sampled every interval (the busy signal stays current for
      // ListDevices and the metrics, and an idle device re-measures contended results).
      while (!shutdown_.load() && queues_[device].empty()) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_sample >= interval) {
          sample_due = true;
          break;
        }
        wake_[device]->WaitFor(&mu_, last_sample + interval - now);
      }
      if (!sample_due) {
        if (queues_[device].empty()) return;  // shutting down, nothing left to run
        job = PopLocked(device);
        running_[device] = job;
      }
    }
    if (sample_due) {
      last_sample = std::chrono::steady_clock::now();
      const DeviceLoad load = load_board_.Sample(device, *backends_[device]);
      if (load.state != LoadState::kBusy && options_.polite.remeasure_contended)
        QueueRemeasure(device);
      continue;
    }
    if (job->background.load() && options_.polite.duty_cycle <= 0 && !AwaitWindow(device, job)) {
      if (job->abandoned.empty()) continue;  // back in the queue behind an urgent job
    }
    RunJob(device, job);  // clears running_[device] before it answers the waiters
    last_sample = std::chrono::steady_clock::now();  // RunJob sampled the device
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
    wake_[device]->WaitFor(&mu_, std::chrono::duration<double>(
                                     options_.polite.sample_interval_seconds));
  }
  if (counted) load_board_.AddWaiting(device, -1);
  if (!job->abandoned.empty()) load_board_.RecordAbandoned(device, job->problem.Key(),
                                                           job->abandoned);
  // Shut down or cancelled: RunJob answers it so.
  return run || shutdown_.load() || job->cancel.load() || !job->abandoned.empty();
}

void TransposeService::OnWanted(const std::string& cls, const Problem& problem) {
  for (size_t d = 0; d < classes_.size(); ++d) {
    if (classes_[d] != cls || load_board_.Get(static_cast<int>(d)).state != LoadState::kIdle)
      continue;
    MutexLock l(&mu_);
    if (shutdown_.load() || !queues_[d].empty() || running_[d]) continue;  // busy with its own
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

void TransposeService::QueueRemeasure(int device) {
  // Each contended result is measured again at most this many times per daemon run (a problem
  // that measures noisy even on an idle device is not re-tuned forever).
  constexpr int kMaxRemeasures = 2;
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
      const std::string evidence = gpu ? ContentionOf(*result) : "";
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
      load_board_.RecordTune(device, evidence);
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
StatusOr<StoreFilter> TransposeService::ResolveQuery(const EntryQuery& query) const {
  StoreFilter filter = query.filter;
  if (query.device.has_value()) {
    TR_ASSIGN_OR_RETURN(const int device, ResolveDevice(*query.device, "filter.device"));
    // A device's entries are those it is served: measured on any device of its class.
    filter.device_class = classes_[device];
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

StatusOr<EntryPage> TransposeService::ListEntryPage(const EntryQuery& query,
                                                    bool include_candidates, int page_size,
                                                    const std::string& page_token) {
  if (page_size < 0)
    return Status::InvalidArgument("page_size: must be >= 0 (0: " +
                                   std::to_string(kDefaultPageSize) + "), got " +
                                   std::to_string(page_size));
  if (page_size == 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  std::optional<EntryCursor> after;
  if (!page_token.empty()) {
    TR_ASSIGN_OR_RETURN(after, ParseEntryPageToken(page_token));
  }
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  std::vector<EntryCursor> cursors;
  // One more than the page: whether it exists says whether there is a next page. The store stops
  // early once the entries hold kMaxEntryPageBytes; then the page ends there.
  TR_ASSIGN_OR_RETURN(auto entries,
                      store_->List(filter, include_candidates, page_size + 1,
                                   after ? &*after : nullptr, &cursors, kMaxEntryPageBytes));
  size_t bytes = 0;
  for (const auto& e : entries) bytes += ApproxEntryBytes(e);
  EntryPage page;
  page.more = static_cast<int>(entries.size()) > page_size || bytes >= kMaxEntryPageBytes;
  if (static_cast<int>(entries.size()) > page_size) entries.resize(page_size);
  for (size_t i = 0; i < entries.size(); ++i) {
    TuneResult& e = entries[i];
    const std::string fp = e.device.Fingerprint();
    e.device.index = -1;
    for (size_t d = 0; d < fingerprints_.size(); ++d)
      if (fingerprints_[d] == fp) e.device.index = static_cast<int>(d);
    page.resume_tokens.push_back(EntryPageToken(cursors[i]));
  }
  page.entries = std::move(entries);
  return page;
}

StatusOr<int64_t> TransposeService::DeleteEntries(const EntryQuery& query, bool all) {
  if (query.empty() && !all)
    return Status::InvalidArgument("filter: empty filter deletes everything; set all=true");
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  auto deleted = store_->Delete(filter);
  answers_.Invalidate();
  return deleted;
}

int TransposeService::LocalIndexOf(const DeviceInfo& device) const {
  const std::string fp = device.Fingerprint();
  for (size_t i = 0; i < fingerprints_.size(); ++i)
    if (fingerprints_[i] == fp) return static_cast<int>(i);
  return -1;
}

int TransposeService::DeviceIndexOfClass(const DeviceInfo& device) const {
  const std::string cls = ClassOf(device).key;
  for (size_t i = 0; i < classes_.size(); ++i)
    if (classes_[i] == cls) return static_cast<int>(i);
  return -1;
}

void TransposeService::CountRefusedEntry(const char* door) const {
  if (options_.observer != nullptr) options_.observer->OnEntryRefused(door);
}

StatusOr<MergeCounts> TransposeService::MergeEntries(const std::vector<TuneResult>& results) {
  MergeCounts counts;
  for (const TuneResult& r : results) {
    bool known = false;
    for (const auto& d : devices_) known = known || d.library_version == r.device.library_version;
    if (!known) {
      ++counts.refused_library_version;
      continue;
    }
    auto merged = store_->Merge(r);
    answers_.Invalidate();
    TR_ASSIGN_OR_RETURN(bool stored, std::move(merged));
    ++(stored ? counts.imported : counts.kept_existing);
  }
  return counts;
}

}  // namespace transposed
