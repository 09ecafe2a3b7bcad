// TransposeService: the daemon's logic, free of gRPC so that it can be tested directly.
//
// It owns one Backend per device (device i = backends[i]) and one worker thread per device that
// runs that device's tunes one at a time, so measurements never overlap. GetConfig answers from
// the Store when it can; on a miss it tunes, and concurrent requests for the same (device
// fingerprint, problem key) share one tuning run ("single flight"). Lookups never wait behind a
// tune: the service lock is never held while tuning, and the store has its own short lock.
// Tune forces a fresh tune and streams every candidate result to the caller as it completes.
//
// Cancellation: each request may pass an `is_cancelled` predicate (e.g. "the client went away"),
// polled while it waits; a shared tune is cancelled only when every request waiting on it has
// gone. Shutdown() cancels every queued and running tune, makes waiting requests return
// CANCELLED promptly, and joins the workers.
//
// Thread-safety: every public method may be called from any number of threads at once.
// Shutdown() (or the destructor) must not race with the destructor itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "server/store.h"
#include "tuner/backend.h"
#include "tuner/tuner.h"

namespace transposed {

// Selects one of the daemon's devices. Neither set: device 0.
struct DeviceRef {
  std::optional<int> index;
  std::optional<std::string> uuid;
};

enum class AnswerSource { kCache, kTuned };
const char* AnswerSourceName(AnswerSource s);  // "cache" / "tuned"

struct ConfigRequest {
  Problem problem;
  DeviceRef device;
  bool cache_only = false;
};

// The longest budget a Tune request may ask for (a tune holds its device for that long).
inline constexpr double kMaxTuneBudgetSeconds = 3600;

struct ForcedTuneRequest {
  Problem problem;
  DeviceRef device;
  double budget_seconds = 0;  // <= 0: the service's default
  bool exhaustive = false;
};

// The answer to GetConfig or Tune: the stored or freshly tuned result, where it came from, and the
// device it is for (result.device is the live device, with its index).
struct ConfigAnswer {
  TuneResult result;
  AnswerSource source = AnswerSource::kCache;
  int device_index = 0;
};

// ListEntries / DeleteEntries: a store filter plus an optional device of this daemon, which
// resolves to its fingerprint.
struct EntryQuery {
  StoreFilter filter;
  std::optional<DeviceRef> device;

  bool empty() const { return filter.empty() && !device.has_value(); }
};

struct ServiceOptions {
  double tune_budget_seconds = 20.0;  // default budget of one tune (TuneOptions::budget_seconds)
  TuneOptions tune;                   // everything else about a tune
};

// Per-request context. Everything is optional.
struct RequestContext {
  // Polled while the request waits; true means the client went away.
  std::function<bool()> is_cancelled;
};

// Observability; monotonically increasing.
struct ServiceCounters {
  int64_t tunes_started = 0;    // tunes that actually began measuring (RunTune called)
  int64_t tunes_completed = 0;  // tunes that finished successfully and were saved
  int64_t tunes_failed = 0;     // tunes that returned an error (including cancellation)
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
};

// Called on the caller's own thread (never on a worker) for each candidate result of a forced
// tune: (result, 1-based index, quick-pass total).
using TuneProgressFn = std::function<void(const CandidateResult&, int, int)>;

class TransposeService {
 public:
  // Registers every device with the store (Store::UpsertDevice) and starts one worker per
  // device. `store` must outlive the service. INVALID_ARGUMENT without any backend.
  static StatusOr<std::unique_ptr<TransposeService>> Create(
      std::vector<std::unique_ptr<Backend>> backends, Store* store, ServiceOptions options);
  ~TransposeService();  // Shutdown(), then destroys the backends.

  TransposeService(const TransposeService&) = delete;
  TransposeService& operator=(const TransposeService&) = delete;

  // The best configuration for the problem: from the store, or tuned (single flight) on a miss.
  // NOT_FOUND on a miss with cache_only; INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming the bad
  // `problem.<field>`; NOT_FOUND for an unknown device; CANCELLED when the client went away or
  // the service shut down; whatever the tune returned otherwise.
  StatusOr<ConfigAnswer> GetConfig(const ConfigRequest& request, const RequestContext& ctx = {});

  // A forced, fresh tune (stored like any other). `progress` sees every candidate result as it
  // completes, on the calling thread. GetConfig requests for the same problem that arrive while
  // it is queued or running join it.
  StatusOr<ConfigAnswer> Tune(const ForcedTuneRequest& request, const TuneProgressFn& progress,
                              const RequestContext& ctx = {});

  // The daemon's devices, index = position.
  std::vector<DeviceInfo> ListDevices() const;
  // Stored entries matching the query, newest first (limit 0 = all). result.device.index is the
  // live index of the entry's device, or -1 for a device this daemon does not have.
  StatusOr<std::vector<TuneResult>> ListEntries(const EntryQuery& query, bool include_candidates,
                                                int limit);
  // Deletes matching entries; an empty query is refused unless `all`.
  StatusOr<int64_t> DeleteEntries(const EntryQuery& query, bool all);

  // Resolves a selector to a device index. NOT_FOUND "<field>: no device with index 3 (this
  // daemon has 1: 0=cpu:..." for an unknown index or uuid.
  StatusOr<int> ResolveDevice(const DeviceRef& ref,
                              const std::string& field = "problem.device") const;

  // Cancels every queued and running tune, wakes every waiting request (they return CANCELLED)
  // and joins the device workers. Idempotent; later requests that would tune get CANCELLED.
  void Shutdown();
  bool shutting_down() const { return shutdown_.load(); }

  ServiceCounters counters() const;

 private:
  struct Job;
  struct Worker;

  TransposeService(std::vector<std::unique_ptr<Backend>> backends, Store* store,
                   ServiceOptions options);

  // Validation common to GetConfig and Tune: device, problem, candidates.
  Status CheckProblem(const Problem& problem, int device) const;
  // Creates and enqueues a job; mu_ must be held.
  std::shared_ptr<Job> EnqueueLocked(int device, const Problem& problem, TuneOptions options,
                                     bool forced);
  // Waits for the job (draining progress for `progress` if set); mu_ must not be held.
  StatusOr<ConfigAnswer> Wait(const std::shared_ptr<Job>& job, const TuneProgressFn& progress,
                              const RequestContext& ctx);
  void WorkerLoop(int device);
  void RunJob(int device, const std::shared_ptr<Job>& job);
  std::string DeviceList() const;
  StatusOr<StoreFilter> ResolveQuery(const EntryQuery& query) const;

  const std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<DeviceInfo> devices_;  // copies with index set, immutable after construction
  std::vector<std::string> fingerprints_;
  Store* const store_;
  const ServiceOptions options_;

  std::atomic<bool> shutdown_{false};
  std::atomic<int64_t> tunes_started_{0};
  std::atomic<int64_t> tunes_completed_{0};
  std::atomic<int64_t> tunes_failed_{0};
  std::atomic<int64_t> cache_hits_{0};
  std::atomic<int64_t> cache_misses_{0};

  mutable std::mutex mu_;
  // In-flight tunes by "fingerprint|problem key" (the one that GetConfig joins). Guarded by mu_.
  std::map<std::string, std::shared_ptr<Job>> inflight_;
  std::vector<std::unique_ptr<Worker>> workers_;  // one per device; queues guarded by mu_
  std::mutex join_mu_;                            // serialises Shutdown's joins
};

}  // namespace transposed
