// TuneManyRun: the sequencing of one TuneMany request, free of gRPC (the reactor in
// server/grpc/tune_rpcs.cc only checks, converts and streams).
//
// The problems, already checked (TransposeService::CheckRequest), are started one at a time, each
// after the previous one's answer, so that a call holds at most one place in a device's tune
// queue. A cached problem is answered at once; a missing one joins or queues its tune (as a
// GetConfig miss: StartGetConfig; with force, as a Tune: StartTune) and its candidate results are
// reported as they come. A problem that cannot be started (its device's queue is full, the daemon
// shuts down) ends the run with that status, naming the problem; any other error of a problem is
// that problem's answer and the run goes on. Stop() (the client went away) detaches from the
// problem in flight (its tune runs to the end and is stored, as elsewhere) and the problems not
// started yet are dropped.
//
// Thread-safety: Start and Stop may be called from any thread. The callbacks come on the starting
// thread or on a device's tune thread, for one problem at a time, never with the run's lock held.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "server/service.h"

namespace transposed {

struct TuneManyRequest {
  std::vector<Problem> problems;
  std::vector<DeviceRef> devices;  // devices[i]: where problems[i] is tuned
  bool force = false;              // a fresh tune of each problem (StartTune)
  double budget_seconds = 0;       // of each tune (<= 0: the service's default)
  bool exhaustive = false;
  // Polite tunes (server/polite.h): yield to other work on a busy device; not with force.
  bool background = false;
};

struct TuneManyCallbacks {
  // A candidate result of problem i's tune: (i, result, 1-based index, quick-pass total).
  std::function<void(int, const CandidateResult&, int, int)> progress;
  // Problem i's answer, or its own error (the run goes on), with the index and total of its last
  // candidate result (0, 0: none reported). False: stop here (the client has gone).
  std::function<bool(int, const StatusOr<ConfigAnswer>&, int, int)> answer;
  // Called once: OK after the last problem's answer, or the status that stopped the run. Not
  // called after Stop(), nor after `answer` returned false.
  std::function<void(const Status&)> end;
};

class TuneManyRun : public std::enable_shared_from_this<TuneManyRun> {
 public:
  // A run that starts nothing before Start(). `service` must outlive it.
  static std::shared_ptr<TuneManyRun> Create(TransposeService* service, TuneManyRequest request,
                                             TuneManyCallbacks callbacks);

  // Starts the problems in order until one waits for a tune (its answer goes on from there), the
  // run stops, or all are answered.
  void Start() EXCLUDES(mu_);
  // Starts nothing more and detaches from the problem in flight. Idempotent.
  void Stop() EXCLUDES(mu_);

  struct Counts {
    int cached = 0;  // answered from the store
    int tuned = 0;   // answered by a tune (or a peer, the shared store)
    int failed = 0;  // answered with an error, or the one that stopped the run
  };
  Counts counts() const EXCLUDES(mu_);

 private:
  TuneManyRun(TransposeService* service, TuneManyRequest request, TuneManyCallbacks callbacks)
      : service_(service), request_(std::move(request)), callbacks_(std::move(callbacks)) {}

  // Problem i as a GetConfig (ConfigRequest) or forced Tune (ForcedTuneRequest) request.
  template <typename Request>
  Request RequestFor(int i) const {
    Request r;
    r.problem = request_.problems[static_cast<size_t>(i)];
    r.device = request_.devices[static_cast<size_t>(i)];
    r.budget_seconds = request_.budget_seconds;
    r.exhaustive = request_.exhaustive;
    return r;
  }
  // Handles problem i's answer; false when the run stops here.
  bool Answered(int i, const StatusOr<ConfigAnswer>& answer) EXCLUDES(mu_);
  // Holds the waiter of the problem just started: false, and detached, once stopped.
  bool Hold(std::shared_ptr<Waiter> waiter) EXCLUDES(mu_);

  TransposeService* const service_;
  const TuneManyRequest request_;
  const TuneManyCallbacks callbacks_;
  mutable Mutex mu_;
  bool stopped_ GUARDED_BY(mu_) = false;
  int next_ GUARDED_BY(mu_) = 0;        // the next problem to start
  int last_index_ GUARDED_BY(mu_) = 0;  // of the problem in flight's last candidate
  int last_total_ GUARDED_BY(mu_) = 0;
  Counts counts_ GUARDED_BY(mu_);
  std::shared_ptr<Waiter> waiter_ GUARDED_BY(mu_);  // of the problem in flight
};

}  // namespace transposed
