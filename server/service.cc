#include "server/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "core/device_class.h"
#include "core/text.h"
#include "server/answer_now.h"
#include "store/entry_validation.h"

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
  for (const DeviceInfo& d : service->ListDevices()) {
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
    : store_(store), options_(std::move(options)), load_board_(backends.size(), options_.polite) {
  TunerContext context;
  context.store = store_;
  context.answers = &answers_;
  context.load_board = &load_board_;
  context.options = &options_;
  context.local_index_of = [this](const DeviceInfo& d) { return LocalIndexOf(d); };
  for (size_t i = 0; i < backends.size(); ++i)
    tuners_.push_back(
        std::make_unique<DeviceTuner>(static_cast<int>(i), std::move(backends[i]), context));
  // Started once every tuner exists: a tune's answer looks its device up among them.
  for (auto& tuner : tuners_) tuner->Start();
}

TransposeService::~TransposeService() { Shutdown(); }

void TransposeService::Shutdown() {
  shutdown_.store(true);
  std::vector<std::shared_ptr<TuneJob>> jobs;
  for (auto& tuner : tuners_)
    for (auto& job : tuner->Stop()) jobs.push_back(std::move(job));
  if (options_.shared != nullptr) options_.shared->Stop();
  // Answer everyone now rather than when the running tunes notice the cancellation.
  for (auto& job : jobs) {
    job->cancel.store(true);
    for (auto& w : job->Finish()) w->Answer(Status::Cancelled("the daemon is shutting down"));
  }
  for (auto& tuner : tuners_) tuner->Join();
}

ServiceCounters TransposeService::counters() const {
  ServiceCounters c;
  for (const auto& tuner : tuners_) {
    const TunerCounters t = tuner->counters();
    c.tunes_started += t.started;
    c.tunes_completed += t.completed;
    c.tunes_failed += t.failed;
  }
  c.cache_hits = cache_hits_.load();
  c.cache_misses = cache_misses_.load();
  return c;
}

std::vector<int> TransposeService::QueueDepths() const {
  std::vector<int> depths;
  for (const auto& tuner : tuners_) depths.push_back(tuner->QueueDepth());
  return depths;
}

std::vector<int64_t> TransposeService::WorkerRestarts() const {
  std::vector<int64_t> restarts;
  for (const auto& tuner : tuners_) restarts.push_back(tuner->worker_restarts());
  return restarts;
}

std::vector<DeviceInfo> TransposeService::ListDevices() const {
  std::vector<DeviceInfo> devices;
  for (const auto& tuner : tuners_) devices.push_back(tuner->device());
  return devices;
}

std::string TransposeService::DeviceList() const {
  std::string s;
  for (const auto& tuner : tuners_) {
    const DeviceInfo& d = tuner->device();
    if (!s.empty()) s += ", ";
    s += std::to_string(d.index) + "=" + d.backend + " '" + d.name + "' uuid=" + d.uuid;
  }
  return s;
}

StatusOr<int> TransposeService::ResolveDevice(const DeviceRef& ref,
                                              const std::string& field) const {
  // Built only for an error: this runs on every request.
  auto have = [this] {
    return " (this daemon has " + std::to_string(tuners_.size()) + ": " + DeviceList() + ")";
  };
  if (ref.index.has_value()) {
    const int i = *ref.index;
    if (i < 0 || i >= static_cast<int>(tuners_.size()))
      return Status::NotFound(field + ": no device with index " + std::to_string(i) + have());
    return i;
  }
  if (ref.uuid.has_value()) {
    for (const auto& tuner : tuners_)
      if (tuner->device().uuid == *ref.uuid) return tuner->index();
    return Status::NotFound(field + ": no device with uuid " + Quote(*ref.uuid) + have());
  }
  return 0;
}

Status TransposeService::CheckShape(const Problem& problem, int device,
                                    const std::string& field) const {
  Status s = ValidateProblem(problem, tuners_[device]->device().memory_bytes);
  if (!s.ok()) return Status(s.code(), PrefixFields(s.message(), field + "."));
  return Status::OK();
}

Status TransposeService::CheckProblem(const Problem& problem, int device,
                                      const std::string& field) const {
  TR_RETURN_IF_ERROR(CheckShape(problem, device, field));
  const DeviceTuner& tuner = *tuners_[device];
  if (tuner.backend().Candidates(problem).empty()) {
    return Status::InvalidArgument(field + ": no kernel configuration of device " +
                                   std::to_string(device) + " (" + tuner.device().backend +
                                   ") supports " + problem.ToString());
  }
  return Status::OK();
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
    for (size_t i = 0; i < tuners_.size() && index < 0; ++i)
      if (tuners_[i]->device_class() == device_class) index = static_cast<int>(i);
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

std::shared_ptr<Waiter> TransposeService::StartGetConfig(const ConfigRequest& request,
                                                         ProgressFn progress, AnswerFn done,
                                                         const AdmitFn& admit) {
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
  DeviceTuner& tuner = *tuners_[device];
  const Problem& problem = request.problem;

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
    r.device = tuner.device();
    answer.result = std::move(r);
    answer.source = AnswerSource::kCache;
    answer.device_index = device;
    done(std::move(answer));
    return nullptr;
  };

  // The fast path: no lock, no store call (the answer cache's own short lock).
  {
    auto hit = answers_.Find(tuner.device_class(), problem);
    if (!hit.ok()) return fail(hit.status());
    const AnswerCache::Entry& entry = *hit;
    // An entry of another kernel library version (an upgrade): provisional while its variant
    // exists (answered at once, re-validated in the background, once per class through the
    // shared store's lease), else a miss (below).
    const StoredVerdict verdict =
        entry->has_value() ? tuner.Judge(**entry, problem) : StoredVerdict::kCurrent;
    if (verdict == StoredVerdict::kProvisional) {
      if (auto queued = tuner.QueueBackground(problem); !queued.ok())
        spdlog::warn("previous device={} problem={}: re-validation not queued: {}", device,
                     problem.Key(), queued.status().ToString());
      count(true);
      ConfigAnswer answer;
      TuneResult r = **entry;
      answer.measured_on = std::move(r.device);
      answer.measured_on.index = LocalIndexOf(answer.measured_on);
      r.device = tuner.device();
      answer.result = std::move(r);
      answer.source = AnswerSource::kPrevious;
      answer.device_index = device;
      done(std::move(answer));
      return nullptr;
    }
    if (entry->has_value() && verdict == StoredVerdict::kCurrent) {
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
  if (shutdown_.load()) return fail(Status::Cancelled("the daemon is shutting down"));
  auto waiter = std::make_shared<Waiter>(std::move(progress), std::move(done));
  StatusOr<std::optional<TuneResult>> joined =
      tuner.Join(problem, TuneOptionsFor(request.budget_seconds, request.exhaustive),
                 request.background, waiter);
  if (joined.ok() && !joined->has_value()) {
    count(false);
    return waiter;
  }
  // Not joined: answered here, through the waiter that holds the callbacks now.
  done = [waiter](StatusOr<ConfigAnswer> a) { waiter->Answer(std::move(a)); };
  if (!joined.ok()) return fail(joined.status());
  return from_cache(std::move(joined->value()));
}

StatusOr<ConfigAnswer> TransposeService::AnswerNow(int device, const Problem& problem) {
  if (shutdown_.load()) return Status::Cancelled("the daemon is shutting down");
  DeviceTuner& tuner = *tuners_[device];

  // The answer first (store reads only), so the tune queued below does not compete with it.
  ConfigAnswer answer;
  answer.device_index = device;
  answer.result.problem = problem;
  answer.result.device = tuner.device();
  const std::vector<Candidate> valid = tuner.backend().Candidates(problem);
  // The nearest stored problem of this device's class: the most recent entries of each dtype of
  // this element size.
  constexpr int kNeighboursPerDType = 256;
  std::vector<TuneResult> stored;
  for (DType t : AllDTypes()) {
    if (DTypeSize(t) != problem.elem_size()) continue;
    StoreFilter filter;
    filter.device_class = tuner.device_class();
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
  TR_ASSIGN_OR_RETURN(std::optional<TuneResult> hit, tuner.QueueBackground(problem));
  if (hit.has_value()) {
    ConfigAnswer cached;
    cached.measured_on = std::move(hit->device);
    cached.measured_on.index = LocalIndexOf(cached.measured_on);
    hit->device = tuner.device();
    cached.result = std::move(*hit);
    cached.source = AnswerSource::kCache;
    cached.device_index = device;
    return cached;
  }
  return answer;
}

std::shared_ptr<Waiter> TransposeService::StartTune(const ForcedTuneRequest& request,
                                                    ProgressFn progress, AnswerFn done) {
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
  auto waiter = std::make_shared<Waiter>(std::move(progress), std::move(done));
  Status queued = tuners_[device]->QueueForced(
      request.problem, TuneOptionsFor(request.budget_seconds, request.exhaustive), waiter);
  if (!queued.ok()) {
    waiter->Answer(std::move(queued));
    return nullptr;
  }
  return waiter;
}

void TransposeService::OnWanted(const std::string& cls, const Problem& problem) {
  if (shutdown_.load()) return;
  for (auto& tuner : tuners_)
    if (tuner->device_class() == cls && tuner->OfferWanted(problem)) return;
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
