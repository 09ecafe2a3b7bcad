// DeviceTuner: the tunes of one device. It owns the device's backend, its queue of tune jobs, the
// one it runs, the jobs in flight (queued, running or waiting for the shared store: the ones a
// request for the same problem joins, "single flight"), the results measured under contention to
// measure again and their re-measure budget, and one thread that runs the jobs one at a time, so
// measurements on the device never overlap. TransposeService (server/service.h) keeps one per
// device and hands each what it needs (the store, the answer cache, the load board, the options
// with the peers and the shared store); it keeps the checks, the lookups and ANSWER_NOW's choice.
//
// A job runs in named steps (device_tuner_run.cc): ask the fleet (the peers; the shared store was
// asked before the job was queued), measure (polite on a busy device for a background job, else
// directly), judge its contention, keep it (the store's policy: a result measured under
// contention never replaces one measured idle) and publish it to the shared store; then its
// waiters are answered. While idle the thread samples the device's load and, once it has read
// idle long enough, measures again a result measured under contention (polite.h).
//
// Thread-safety: every public method may be called from any thread; the tuner's state is guarded
// by its own lock (taken before a TuneJob's). Callbacks (answers, progress) run without it.
// Stop() then Join() (or the destructor) end it; Stop() must not race with the destructor.
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
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "server/answer_cache.h"
#include "server/polite.h"
#include "server/previous_entry.h"
#include "server/requests.h"
#include "server/service_options.h"
#include "server/tune_job.h"
#include "store/store.h"
#include "tuner/backend.h"
#include "tuner/tuner.h"

namespace transposed {

// What a DeviceTuner is handed; everything must outlive it.
struct TunerContext {
  Store* store = nullptr;
  // The store's class lookups (every write of the tuner to the store invalidates it).
  AnswerCache* answers = nullptr;
  // The busy signal of every device (this one's at the tuner's index).
  LoadBoard* load_board = nullptr;
  // Budgets, the queue bound, the observer, the peers, the shared store, polite tuning.
  const ServiceOptions* options = nullptr;
  // The daemon's index of a device (same fingerprint), else -1: an answer's measured_on.index.
  std::function<int(const DeviceInfo&)> local_index_of;
};

// A tuner's tunes; monotonically increasing.
struct TunerCounters {
  int64_t started = 0;    // began measuring (RunTune called)
  int64_t completed = 0;  // finished successfully
  int64_t failed = 0;     // returned an error (cancellation included)
};

class DeviceTuner {
 public:
  // Misses that may wait for the class's tunes (the shared store), per place of the queue.
  static constexpr int kWaitingPerQueueSlot = 32;
  // Device `index` of the daemon, measured through `backend`. Nothing runs before Start().
  DeviceTuner(int index, std::unique_ptr<Backend> backend, TunerContext context);
  // Stop(), answers what it still held CANCELLED, Join().
  ~DeviceTuner();

  DeviceTuner(const DeviceTuner&) = delete;
  DeviceTuner& operator=(const DeviceTuner&) = delete;

  // Starts the tune thread (which first recalls the device's idle ceilings and contended results
  // from the store).
  void Start();

  int index() const { return index_; }
  const DeviceInfo& device() const { return device_; }  // with its index
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& device_class() const { return class_; }  // ClassOf(device()).key
  const Backend& backend() const { return *backend_; }

  // A request that waits for the tune of `problem`: `waiter` joins the job in flight, or, when
  // the store (looked up again under the lock: a tune saves before it leaves the flight) still
  // misses and the queue has room, a new job (`options`; background: nobody waits urgently, it is
  // polite until a caller joins). OK(nullopt): joined. OK(result): stored meanwhile (waiter not
  // used). CANCELLED once stopped, RESOURCE_EXHAUSTED when the queue is full, or the store's error.
  StatusOr<std::optional<TuneResult>> Join(const Problem& problem, TuneOptions options,
                                           bool background, const std::shared_ptr<Waiter>& waiter)
      EXCLUDES(mu_);
  // ANSWER_NOW's background tune (nobody waits): queued unless one is in flight; a full queue
  // only logs (the next request tries again). OK(result): stored meanwhile; CANCELLED once stopped.
  StatusOr<std::optional<TuneResult>> QueueBackground(const Problem& problem) EXCLUDES(mu_);
  // A forced, fresh tune (Tune), which GetConfig requests arriving later join unless one is in
  // flight already; `waiter` joins it. RESOURCE_EXHAUSTED when the queue is full, CANCELLED once
  // stopped.
  Status QueueForced(const Problem& problem, TuneOptions options,
                     const std::shared_ptr<Waiter>& waiter) EXCLUDES(mu_);
  // The shared store heard a node of this device's class ask another to tune `problem` (a busy
  // node, or one that holds its lease budget). false: this device does not take it (busy; its
  // load unknown and work of its own queued or running; a caller waits for its own tune; its
  // queue is full); true: it took it (queued a background tune, or published the result it had
  // stored), or it is in flight here already.
  bool OfferWanted(const Problem& problem) EXCLUDES(mu_);

  // Refuses new work, wakes the thread and returns every job it held (running, queued, waiting
  // for the shared store) for the caller to cancel and answer. Idempotent.
  std::vector<std::shared_ptr<TuneJob>> Stop() EXCLUDES(mu_);
  // Joins the thread (after Stop()).
  void Join() EXCLUDES(join_mu_);

  // What a stored entry of the class is worth on this device (server/previous_entry.h): current
  // (this device's kernel library version), provisional (another version, its variant still in
  // this build's family with the same parameters) or gone (a miss).
  StoredVerdict Judge(const TuneResult& stored, const Problem& problem) const;

  // Tunes queued or running.
  int QueueDepth() const EXCLUDES(mu_);
  TunerCounters counters() const;
  // Worker processes restarted (Backend::worker_restarts).
  int64_t worker_restarts() const { return backend_->worker_restarts(); }

  // Results measured under contention kept for a re-measurement at most, and re-measurements
  // of each per daemon run (a problem that measures noisy even on an idle device is not re-tuned
  // forever).
  static constexpr size_t kMaxContended = 1024;
  static constexpr int kMaxRemeasures = 2;

 private:
  // What Measure() hands the later steps of a job.
  struct Measured;

  // The class's stored result of `problem` when it is of this device's library version; an entry
  // of another version (an upgrade) is no result here: it is to be re-validated.
  StatusOr<std::optional<TuneResult>> LookupCurrent(const Problem& problem) const;
  // The default options of a tune nobody asked a budget for.
  TuneOptions DefaultTuneOptions() const;
  // RESOURCE_EXHAUSTED with a retry hint when the queue is full (the tunes queued here, at most
  // --max-queued-tunes), or when kWaitingPerQueueSlot times that many misses wait for the class.
  Status CheckQueueLocked() const REQUIRES(mu_);
  // Creates a job and puts it in flight: a miss (not forced) asks the shared store first (the job
  // is queued only if it is to tune here: OnSharedOutcome); otherwise it is queued.
  std::shared_ptr<TuneJob> EnqueueLocked(const Problem& problem, TuneOptions options, bool forced,
                                         bool background) REQUIRES(mu_);
  // The next job: the first one a caller waits for, else the first; null when empty.
  std::shared_ptr<TuneJob> PopLocked() REQUIRES(mu_);
  // Whether a tune a caller waits for runs or is queued.
  bool HasUrgentLocked() const REQUIRES(mu_);

  // The tune thread.
  void TuneLoop() EXCLUDES(mu_);
  // At its start: the device's idle ceilings (LoadBoard::AddIdleCeiling) and its results
  // measured under contention (NoteContended) as the store holds them.
  void RecallFromStore() EXCLUDES(mu_);
  // A background job on a busy device with duty_cycle 0: waits for an idle window. true: run it
  // now; false: it went back to the queue (an urgent job came) or was abandoned (job->abandoned).
  bool AwaitWindow(const std::shared_ptr<TuneJob>& job) EXCLUDES(mu_);
  // Queues the re-measurement of one result measured under contention (TuneLoop calls it once
  // the device has read idle for a whole PoliteOptions::remeasure_idle_seconds).
  void QueueRemeasure() EXCLUDES(mu_);
  // Whether a result measured under contention still waits for a re-measurement.
  bool RemeasurePending() EXCLUDES(mu_);
  // Records a result's contention for QueueRemeasure (bounded), or forgets it when empty.
  void NoteContended(const Problem& problem, const std::string& contention) EXCLUDES(mu_);

  // One job, in its steps (device_tuner_run.cc).
  void RunJob(const std::shared_ptr<TuneJob>& job) EXCLUDES(mu_);
  // Ask the fleet: a peer's result for this very problem and class (stored, origin kPeer).
  std::optional<TuneResult> AskPeers(const TuneJob& job);
  // Measure: polite on a busy device for a background job, else directly.
  Measured Measure(const std::shared_ptr<TuneJob>& job);
  // Judge contention: the result's TuneResult::contention (the device's load before the tune,
  // the tune's own evidence against the idle ceiling, throttling), recorded on the load board.
  void JudgeContention(const TuneJob& job, Measured& m);
  // Keep: the store's policy (a result measured under contention never replaces one measured
  // idle; a read-only database stores nothing), the contended set, the log line.
  void Keep(const TuneJob& job, Measured& m);
  // Publish: the shared store gets the winner, or the lease back after a failure.
  void Publish(const TuneJob& job, const StatusOr<TuneResult>& result);

  // The shared store's answer to a job's miss (on its thread): a result answers the job, a lease
  // or an unavailable store queues it.
  void OnSharedOutcome(const std::shared_ptr<TuneJob>& job, SharedOutcome outcome) EXCLUDES(mu_);
  // Ends a job: it leaves the flight (and running_), its waiters are answered with `result`.
  void FinishJob(const std::shared_ptr<TuneJob>& job, StatusOr<TuneResult> result,
                 AnswerSource source) EXCLUDES(mu_);

  const int index_;
  const std::unique_ptr<Backend> backend_;
  const DeviceInfo device_;
  const std::string fingerprint_;
  const std::string class_;
  const TunerContext ctx_;
  const ServiceOptions& options_;  // *ctx_.options

  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> started_{0};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};

  mutable Mutex mu_;
  // Jobs in flight by problem key (the one a request joins).
  std::map<std::string, std::shared_ptr<TuneJob>> inflight_ GUARDED_BY(mu_);
  std::deque<std::shared_ptr<TuneJob>> queue_ GUARDED_BY(mu_);
  std::shared_ptr<TuneJob> running_ GUARDED_BY(mu_);
  // Misses waiting for the shared store (counted against --max-queued-tunes).
  int shared_waiting_ GUARDED_BY(mu_) = 0;
  // Problems whose stored result was measured under contention, by key, with the
  // re-measurements queued so far (at most kMaxContended).
  std::map<std::string, std::pair<Problem, int>> contended_ GUARDED_BY(mu_);
  CondVar wake_;   // on mu_
  Mutex join_mu_;  // serialises Join
  std::thread thread_ GUARDED_BY(join_mu_);
};

}  // namespace transposed
