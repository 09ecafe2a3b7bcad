// TransposeService: the daemon's logic, free of gRPC so that it can be tested directly. It
// coordinates: it resolves a request's device, checks the request, answers from the store when it
// can (the lookup fast path), chooses ANSWER_NOW's first answer, serves the stored entries, and
// hands every tune to the device's DeviceTuner (server/device_tuner.h: one per device, with its
// own queue, thread and lock), as LevelDB's DBImpl hands versions to its VersionSet.
//
// GetConfig answers from the Store when it can; on a miss the device's tuner tunes, and concurrent
// requests for the same (device, problem) share one tuning run ("single flight"). Lookups never
// wait behind a tune: a hit, a CACHE_ONLY miss and an ANSWER_NOW answer are served in the
// daemon's process, from the store through its in-memory read-through cache (answer_cache.h; every
// write to the store invalidates it) and with a problem's candidates computed here
// (Backend::Candidates never asks a worker process, whose requests queue behind its
// measurements); no lock is held while tuning, and the store has its own short lock. A hit checks
// the problem's shape only: its stored winner shows that a configuration runs it.
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
// any service or tuner lock held and may call back into the service.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "server/answer_cache.h"
#include "server/device_tuner.h"
#include "server/polite.h"
#include "server/requests.h"
#include "server/service_options.h"
#include "server/tune_job.h"
#include "store/store.h"
#include "tuner/backend.h"
#include "tuner/tuner.h"

namespace transposed {

// The longest budget a Tune request may ask for (a tune holds its device for that long).
inline constexpr double kMaxTuneBudgetSeconds = 3600;
// OK for a requested tune budget in [0, kMaxTuneBudgetSeconds] (0: the default), else
// INVALID_ARGUMENT "budget_seconds: ...".
Status CheckTuneBudget(double budget_seconds);

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

class TransposeService {
 public:
  // Registers every device with the store (Store::UpsertDevice) and starts one DeviceTuner
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
  // The health probe's verdict per device (ServiceOptions::health); empty without one.
  std::vector<DeviceHealthStatus> DeviceHealthStatuses() const {
    return options_.health != nullptr ? options_.health->All() : std::vector<DeviceHealthStatus>();
  }
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
  void Shutdown();
  bool shutting_down() const { return shutdown_.load(); }

  ServiceCounters counters() const;
  // Tunes queued or running per device (index = device), for metrics.
  std::vector<int> QueueDepths() const;
  // Worker processes restarted per device (Backend::worker_restarts), for metrics.
  std::vector<int64_t> WorkerRestarts() const;

 private:
  TransposeService(std::vector<std::unique_ptr<Backend>> backends, Store* store,
                   ServiceOptions options);

  // GetConfig's ANSWER_NOW miss: the first answer, chosen at once (answer_now.h), and the tune
  // queued in the background (unless one is in flight).
  StatusOr<ConfigAnswer> AnswerNow(int device, const Problem& problem);
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
  // The shared store heard a busy node of class `cls` ask for an idle node to tune `problem`:
  // the first of this daemon's devices of the class that takes it (DeviceTuner::OfferWanted).
  void OnWanted(const std::string& cls, const Problem& problem);
  std::string DeviceList() const;
  StatusOr<StoreFilter> ResolveQuery(const EntryQuery& query) const;

  Store* const store_;
  // The store's class lookups, read through (answer_cache.h); every write to the store
  // invalidates it.
  AnswerCache answers_{store_};
  const ServiceOptions options_;
  LoadBoard load_board_;

  std::atomic<bool> shutdown_{false};
  std::atomic<int64_t> cache_hits_{0};
  std::atomic<int64_t> cache_misses_{0};

  // One per device, index = device; the vector is immutable after construction (destroyed
  // first: each tuner joins its thread).
  std::vector<std::unique_ptr<DeviceTuner>> tuners_;
};

}  // namespace transposed
