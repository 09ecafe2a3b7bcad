// TransposeService: the daemon's logic, free of gRPC so that it can be tested directly.
//
// It owns one Backend per device (device i = backends[i]) and one tune thread per device that
// runs that device's tunes one at a time, so measurements never overlap. GetConfig answers from
// the Store when it can; on a miss it tunes, and concurrent requests for the same (device
// fingerprint, problem key) share one tuning run ("single flight"). Lookups never wait behind a
// tune: a hit, a CACHE_ONLY miss and an ANSWER_NOW answer are served in the daemon's process,
// from the store through its in-memory read-through cache (answer_cache.h; every write of the
// service to the store invalidates it) and with a problem's candidates computed here
// (Backend::Candidates never asks a worker process, whose requests queue behind its
// measurements); the service lock is never held while tuning, and the store has its own short
// lock. A hit checks the problem's shape only: its stored winner shows that a configuration
// runs it.
// Tune forces a fresh tune and reports every candidate result as it completes.
//
// Asynchronous: StartGetConfig / StartTune never block on a tune. They answer through a callback,
// at once on the calling thread (cache hit, bad input, CACHE_ONLY miss) or later on the device's
// tune thread when the tune ends; no thread waits for a tune. A request that no longer wants its
// answer (the client went away, its deadline passed) Detach()es: the tune still runs to the end
// and is stored, so a retry a little later finds it in the cache. Tunes are cancelled only by
// Shutdown(), which answers every waiting request CANCELLED at once. GetConfig / Tune are blocking
// wrappers for in-process callers.
//
// Thread-safety: every public method may be called from any number of threads at once.
// Shutdown() (or the destructor) must not race with the destructor itself. Callbacks run without
// any service lock held and may call back into the service.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "server/answer_cache.h"
#include "server/polite.h"
#include "server/shared_flight.h"
#include "store/store.h"
#include "tuner/backend.h"
#include "tuner/tuner.h"

namespace transposed {

// Selects one of the daemon's devices. Neither set: device 0.
struct DeviceRef {
  std::optional<int> index;
  std::optional<std::string> uuid;
};

struct ConfigRequest {
  Problem problem;
  DeviceRef device;
  // Instead of `device`: the first device of this daemon of that class (peers ask this way);
  // NOT_FOUND "device_class: ..." when there is none.
  std::string device_class;
  bool cache_only = false;
  // ANSWER_NOW: a miss answers at once with the nearest stored problem's winner or the heuristic
  // default (never waits for a tune) and queues the tune in the background.
  bool answer_now = false;
  // Of the tune a miss starts (a tune it joins keeps its own): budget (<= 0: the service's
  // default; at most kMaxTuneBudgetSeconds) and exhaustive measurement (TuneMany sets them).
  double budget_seconds = 0;
  bool exhaustive = false;
  // A cache hit is answered with ConfigAnswer::stored, the answer cache's own entry, instead of
  // a copy in `result` (the gRPC GetConfig, which keeps each hit's encoded answer).
  bool shared_hit = false;
  // The caller waits for the answer but not urgently (TuneMany from a job's prolog that asked
  // for background): the tune a miss starts is polite (server/polite.h) as an ANSWER_NOW one.
  bool background = false;
};

// The longest budget a Tune request may ask for (a tune holds its device for that long).
inline constexpr double kMaxTuneBudgetSeconds = 3600;
// OK for a requested tune budget in [0, kMaxTuneBudgetSeconds] (0: the default), else
// INVALID_ARGUMENT "budget_seconds: ...".
Status CheckTuneBudget(double budget_seconds);

struct ForcedTuneRequest {
  Problem problem;
  DeviceRef device;
  double budget_seconds = 0;  // <= 0: the service's default
  bool exhaustive = false;
};

// The answer to GetConfig or Tune: the stored or freshly tuned result, where it came from, and the
// device it is for (result.device is the live device, with its index).
// result.device is the device answered for (this daemon's, with its index); measured_on is the
// instance the result was measured on: the same device, or another of its class (index -1 unless
// it is one of this daemon's).
struct ConfigAnswer {
  TuneResult result;
  AnswerSource source = AnswerSource::kCache;
  int device_index = 0;
  DeviceInfo measured_on;
  // A cache hit of a request with shared_hit: the stored entry (measured on stored->device),
  // shared with the answer cache and never changed; `result` and `measured_on` are then empty
  // but for measured_on.index (stored->device's index among this daemon's devices, else -1).
  // While the cache holds the entry, the same pointer is handed out, and a new one once the
  // store changed: a caller may keep what it derives from it keyed by the pointer (holding it).
  std::shared_ptr<const TuneResult> stored = nullptr;
  // kNearest: the stored problem whose winner this is. For kNearest and kHeuristic, `result`
  // holds the problem, device and chosen candidate only (nothing was measured for this problem).
  std::optional<Problem> nearest_problem = std::nullopt;
};

// What MergeEntries did with each result.
struct MergeCounts {
  int64_t imported = 0;                 // stored (new, or faster than what was stored)
  int64_t kept_existing = 0;            // a result of its class and problem was as fast or faster
  int64_t refused_library_version = 0;  // measured with another kernel library version
};

// ListEntries / DeleteEntries: a store filter plus an optional device of this daemon, which
// resolves to its fingerprint.
struct EntryQuery {
  StoreFilter filter;
  std::optional<DeviceRef> device;

  bool empty() const { return filter.empty() && !device.has_value(); }
};

// Hooks for metrics: the service calls them as things happen, from the thread where they happen
// (request threads, device tune threads), never with a service lock held. Implementations must be
// thread-safe and quick.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  // A store lookup of GetConfig (CACHE_ONLY included); a miss that joins a tune counts once.
  virtual void OnCacheLookup(int device, bool hit) = 0;
  // A tune began measuring.
  virtual void OnTuneStarted(int device) = 0;
  // A tune that began measuring ended: OK (and stored), or failed/cancelled; its wall time.
  virtual void OnTuneFinished(int device, const Status& status, double seconds) = 0;
  // An entry from outside (door "import", "seed" or "peer") failed validation and was refused.
  virtual void OnEntryRefused(const char* door) { (void)door; }
};

// Asks peer daemons (server/fleet/peers.h) for a stored result of `problem` measured on a device of
// `device`'s class; nullopt when none has one. Called on a device's tune thread before a tune.
using PeerLookupFn =
    std::function<std::optional<TuneResult>(const DeviceInfo& device, const Problem& problem)>;

struct ServiceOptions {
  double tune_budget_seconds = 20.0;  // default budget of one tune (TuneOptions::budget_seconds)
  TuneOptions tune;                   // everything else about a tune
  ServiceObserver* observer = nullptr;  // optional; must outlive the service
  // Tunes waiting per device behind the running one; a new tune beyond this is refused with
  // RESOURCE_EXHAUSTED and a retry hint (joining a queued or running tune is always possible).
  int max_queued_tunes = 8;
  // Empty: no peers. A GetConfig miss (not cache-only, not a forced Tune) asks the peers first
  // and tunes only when none has the result; a peer's result is stored with origin kPeer.
  PeerLookupFn peer_lookup;
  // Null: no shared store. Otherwise a miss that would tune asks it first (server/shared_flight.h):
  // a shared result is stored (origin kShared) and answered (kShared); the class's lease tunes
  // here; another node's lease waits for its result without a device slot. Every tune's winner
  // is offered to it. Must outlive the service; Shutdown() stops it.
  SharedFlight* shared = nullptr;
  // The busy signal and how background tunes yield to other work on the device (polite.h).
  PoliteOptions polite;
};

// ListEntries pages: page_size 0 means kDefaultPageSize; larger than kMaxPageSize is cut to it.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
// A page also ends once its entries hold about this many bytes (ApproxEntryBytes of
// store/entry_validation.h; an entry holds at most kMaxEntryBytes): every ListEntries answer and
// every page ExportEntries reads stays near it, whatever the entries hold.
inline constexpr size_t kMaxEntryPageBytes = 3 << 20;

// One page of entries, newest first. resume_tokens[i] is the page token that continues right
// after entries[i]; `more` says whether entries beyond the last one exist.
struct EntryPage {
  std::vector<TuneResult> entries;
  std::vector<std::string> resume_tokens;
  bool more = false;
};

// Page tokens: "e1.<tuned_at_unix_ms>.<entry id>", both decimal. Opaque to clients.
std::string EntryPageToken(const EntryCursor& cursor);
// INVALID_ARGUMENT "page_token: ..." for anything EntryPageToken did not write.
StatusOr<EntryCursor> ParseEntryPageToken(const std::string& token);

// Observability; monotonically increasing.
struct ServiceCounters {
  int64_t tunes_started = 0;    // tunes that actually began measuring (RunTune called)
  int64_t tunes_completed = 0;  // tunes that finished successfully and were saved
  int64_t tunes_failed = 0;     // tunes that returned an error (including cancellation)
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
};

// A request's `progress` is the tuner's ProgressFn (tuner/tuner.h), called on the device's tune
// thread, in order, all before the answer.
// The answer to one request, called exactly once unless the request detached first.
using AnswerFn = std::function<void(StatusOr<ConfigAnswer>)>;
// Whether a request may wait for a tune (the gRPC layer's per-client cap on waiting calls,
// server/grpc/call_limiter.h): OK, or the status it is refused with. Asked only of a request about to
// join or queue a tune, never of a hit, a CACHE_ONLY miss or an ANSWER_NOW answer.
using AdmitFn = std::function<Status()>;

class TransposeService {
 public:
  // One request waiting for its answer; Detach() with it.
  class Waiter;

  // Registers every device with the store (Store::UpsertDevice) and starts one tune thread
  // per device. `store` must outlive the service. INVALID_ARGUMENT without any backend.
  static StatusOr<std::unique_ptr<TransposeService>> Create(
      std::vector<std::unique_ptr<Backend>> backends, Store* store, ServiceOptions options);
  ~TransposeService();  // Shutdown(), then destroys the backends.

  TransposeService(const TransposeService&) = delete;
  TransposeService& operator=(const TransposeService&) = delete;

  // The best configuration for the problem: from the store, or tuned (single flight) on a miss;
  // with answer_now a miss answers at once (kNearest / kHeuristic) and tunes in the background.
  // `done` gets NOT_FOUND on a miss with cache_only; INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming
  // the bad `problem.<field>`; NOT_FOUND for an unknown device; CANCELLED when the service shuts
  // down; whatever the tune returned otherwise. Returns the request's Waiter while it waits for a
  // tune, null when `done` was already called. `progress` (may be empty) sees the candidate
  // results of the tune the request waits for (started or joined), from then on.
  std::shared_ptr<Waiter> StartGetConfig(const ConfigRequest& request, ProgressFn progress,
                                         AnswerFn done, const AdmitFn& admit = nullptr);

  // What StartGetConfig / StartTune would refuse a problem for before anything starts: NOT_FOUND
  // "problem.device: ..." for an unknown device, INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming
  // the bad `problem.<field>`, or no kernel configuration for it (`field` names the problem in
  // errors: "problem", or "problems[3]"). On success: the index of the device it resolves to.
  StatusOr<int> CheckRequest(const Problem& problem, const DeviceRef& device,
                             const std::string& field = "problem") const;

  // A forced, fresh tune (stored like any other). `progress` (may be empty) sees every candidate
  // result as it completes. GetConfig requests for the same problem that arrive while it is
  // queued or running join it. Returns as StartGetConfig.
  std::shared_ptr<Waiter> StartTune(const ForcedTuneRequest& request, ProgressFn progress,
                                    AnswerFn done);

  // The request no longer wants its answer: its callbacks are dropped (one already running may
  // still finish). The tune it waits for goes on and is stored. Null: nothing to do.
  void Detach(const std::shared_ptr<Waiter>& waiter);

  // Blocking forms of the above, for in-process callers: wait for the answer.
  StatusOr<ConfigAnswer> GetConfig(const ConfigRequest& request);
  StatusOr<ConfigAnswer> Tune(const ForcedTuneRequest& request, const ProgressFn& progress);

  // The daemon's devices, index = position.
  std::vector<DeviceInfo> ListDevices() const;
  // Their busy signals (server/polite.h), index = device.
  std::vector<DeviceLoad> DeviceLoads() const { return load_board_.All(); }
  // Stored entries matching the query, newest first (limit 0 = all). result.device.index is the
  // live index of the entry's device, or -1 for a device this daemon does not have.
  StatusOr<std::vector<TuneResult>> ListEntries(const EntryQuery& query, bool include_candidates,
                                                int limit);
  // One page of the stored entries matching the query (page_size: see kDefaultPageSize; at most
  // about kMaxEntryPageBytes), starting after `page_token` ("" : from the newest).
  StatusOr<EntryPage> ListEntryPage(const EntryQuery& query, bool include_candidates,
                                    int page_size, const std::string& page_token);
  // Deletes matching entries; an empty query is refused unless `all`.
  StatusOr<int64_t> DeleteEntries(const EntryQuery& query, bool all);

  // Merges results measured elsewhere (export/import, --seed; each already validated, with its
  // origin set): a result whose kernel library version is not this daemon's is refused and
  // counted; otherwise Store::Merge keeps the faster winner per device class and problem.
  StatusOr<MergeCounts> MergeEntries(const std::vector<TuneResult>& results);
  // Counts an entry from outside that failed validation (door "import", "seed" or "peer"; see
  // ServiceObserver::OnEntryRefused). The caller reports the reason to whoever sent it.
  void CountRefusedEntry(const char* door) const;
  // The index of this daemon's first device of the same class as `device`, or -1.
  int DeviceIndexOfClass(const DeviceInfo& device) const;
  // The index of this daemon's device that is `device` (same fingerprint), or -1.
  int LocalIndexOf(const DeviceInfo& device) const;

  // Resolves a selector to a device index. NOT_FOUND "<field>: no device with index 3 (this
  // daemon has 1: 0=cpu:..." for an unknown index or uuid.
  StatusOr<int> ResolveDevice(const DeviceRef& ref,
                              const std::string& field = "problem.device") const;

  // Cancels every queued and running tune, answers every waiting request CANCELLED and joins
  // the device tune threads. Idempotent; later requests that would tune get CANCELLED.
  void Shutdown() EXCLUDES(mu_);
  bool shutting_down() const { return shutdown_.load(); }

  ServiceCounters counters() const;
  // Tunes queued or running per device (index = device), for metrics.
  std::vector<int> QueueDepths() const EXCLUDES(mu_);
  // Worker processes restarted per device (Backend::worker_restarts), for metrics.
  std::vector<int64_t> WorkerRestarts() const;

 private:
  struct Job;

  TransposeService(std::vector<std::unique_ptr<Backend>> backends, Store* store,
                   ServiceOptions options);

  // GetConfig's ANSWER_NOW miss: queues the tune (unless one is in flight), answers at once.
  StatusOr<ConfigAnswer> AnswerNow(int device, const Problem& problem) EXCLUDES(mu_);
  // Validation common to GetConfig and Tune: the problem's shape for the device (errors name
  // `field`.<member>), then whether any candidate runs it.
  Status CheckShape(const Problem& problem, int device,
                    const std::string& field = "problem") const;
  Status CheckProblem(const Problem& problem, int device,
                      const std::string& field = "problem") const;
  // The one prologue of StartGetConfig and StartTune, in this order: the device (of
  // `device_class` when it is set: a peer's way of asking; else `device`), the problem's shape
  // (CheckShape), the budget (CheckTuneBudget). The device's index, or the refusal. The candidates
  // (CheckProblem) come after: on a miss for GetConfig, at once for a forced tune.
  StatusOr<int> ResolveRequest(const Problem& problem, const DeviceRef& device,
                               const std::string& device_class, double budget_seconds) const;
  // The options of a tune that asks for `budget_seconds` (<= 0: the service's default) and
  // `exhaustive`.
  TuneOptions TuneOptionsFor(double budget_seconds, bool exhaustive) const;
  // RESOURCE_EXHAUSTED with a retry hint when the device's queue is full.
  Status CheckQueueLocked(int device) const REQUIRES(mu_);
  // Creates and enqueues a job.
  // background: nobody waits for it now (an ANSWER_NOW miss, a re-measurement, a background
  // TuneMany): polite on a busy device until a caller joins (polite.h).
  std::shared_ptr<Job> EnqueueLocked(int device, const Problem& problem, TuneOptions options,
                                     bool forced, bool background = false) REQUIRES(mu_);
  // Adds a waiter to a job that is not done (mu_ held, so the job cannot finish meanwhile).
  // A waiter that is not `background` makes the job urgent (no longer polite).
  std::shared_ptr<Waiter> JoinLocked(const std::shared_ptr<Job>& job, ProgressFn progress,
                                     AnswerFn done, bool background = false) REQUIRES(mu_);
  // The next job of a device's queue (mu_ held): the first one a caller waits for, else the
  // first; null when empty.
  std::shared_ptr<Job> PopLocked(int device) REQUIRES(mu_);
  // A background job on a busy device with duty_cycle 0: waits for an idle window. true: run it
  // now; false: it went back to the queue (an urgent job came) or was abandoned (job->abandoned).
  bool AwaitWindow(int device, const std::shared_ptr<Job>& job) EXCLUDES(mu_);
  // At the start of a tune thread: the device's idle ceilings (LoadBoard::AddIdleCeiling) and
  // its results measured under contention (NoteContended) as the store holds them.
  void RecallFromStore(int device) EXCLUDES(mu_);
  // On an idle tune thread: queues the re-measurement of one result measured under contention.
  // TuneLoop calls it only once the device has read idle for a whole
  // PoliteOptions::remeasure_idle_seconds (RemeasurePending says whether one is due).
  void QueueRemeasure(int device) EXCLUDES(mu_);
  // Whether a result of the device measured under contention still waits for a re-measurement.
  bool RemeasurePending(int device) EXCLUDES(mu_);
  // The shared store heard a busy node of class `cls` ask for an idle node to tune `problem`:
  // an idle device of the class with no tune a caller waits for and room in its queue takes it,
  // behind its queued background tunes (on the store's thread).
  void OnWanted(const std::string& cls, const Problem& problem) EXCLUDES(mu_);
  // Whether a tune a caller waits for runs or is queued on `device`.
  bool HasUrgentLocked(int device) const REQUIRES(mu_);
  // Records a result's contention for QueueRemeasure (bounded), or forgets it when empty.
  void NoteContended(int device, const Problem& problem, const std::string& contention)
      EXCLUDES(mu_);
  void TuneLoop(int device) EXCLUDES(mu_);
  void RunJob(int device, const std::shared_ptr<Job>& job) EXCLUDES(mu_);
  // The shared store's answer to a job's miss (on its thread): a result answers the job, a lease
  // or an unavailable store puts it on its device's queue.
  void OnSharedOutcome(const std::shared_ptr<Job>& job, SharedOutcome outcome) EXCLUDES(mu_);
  // Ends a job: leaves inflight_ (and running_), answers its waiters with `result`.
  void FinishJob(int device, const std::shared_ptr<Job>& job, StatusOr<TuneResult> result,
                 AnswerSource source) EXCLUDES(mu_);
  std::string DeviceList() const;
  StatusOr<StoreFilter> ResolveQuery(const EntryQuery& query) const;

  const std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<DeviceInfo> devices_;  // copies with index set, immutable after construction
  std::vector<std::string> fingerprints_;
  std::vector<std::string> classes_;  // ClassOf(devices_[i]).key
  Store* const store_;
  // The store's class lookups, read through (answer_cache.h); every write of the service to the
  // store invalidates it.
  AnswerCache answers_{store_};
  const ServiceOptions options_;

  std::atomic<bool> shutdown_{false};
  std::atomic<int64_t> tunes_started_{0};
  std::atomic<int64_t> tunes_completed_{0};
  std::atomic<int64_t> tunes_failed_{0};
  std::atomic<int64_t> cache_hits_{0};
  std::atomic<int64_t> cache_misses_{0};

  mutable Mutex mu_;
  // In-flight tunes by "fingerprint|problem key" (the one that GetConfig joins).
  std::map<std::string, std::shared_ptr<Job>> inflight_ GUARDED_BY(mu_);
  // Per device: tunes waiting for the tune thread, the one it runs, and its wake-up.
  std::vector<std::deque<std::shared_ptr<Job>>> queues_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Job>> running_ GUARDED_BY(mu_);
  // Per device: misses waiting for the shared store (counted against --max-queued-tunes).
  std::vector<int> shared_waiting_ GUARDED_BY(mu_);
  // Per device: problems whose stored result was measured under contention, to measure again
  // when idle (at most kMaxContended each), with the re-measurements queued so far.
  static constexpr size_t kMaxContended = 1024;
  // Each contended result is measured again at most this many times per daemon run (a problem
  // that measures noisy even on an idle device is not re-tuned forever).
  static constexpr int kMaxRemeasures = 2;
  std::vector<std::map<std::string, std::pair<Problem, int>>> contended_ GUARDED_BY(mu_);
  LoadBoard load_board_;
  std::vector<std::unique_ptr<CondVar>> wake_;  // one per device, on mu_
  std::vector<std::thread> threads_;            // one per device
  Mutex join_mu_;                               // serialises Shutdown's joins
};

}  // namespace transposed
