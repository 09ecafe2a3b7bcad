// The service's two private types, TransposeService::Waiter (one request waiting for a tune) and
// TransposeService::Job (one tuning run, shared by every request waiting for it), shared by the
// files that make up TransposeService (service.cc: requests; service_tunes.cc: the device tune
// threads). Not for use outside the service.
//
// Thread-safety: a Waiter's methods may be called from any thread (its own lock); a Job's
// waiters are guarded by Job::mu, taken after the service's mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "server/service.h"

namespace transposed {

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
  // was abandoned (tune thread only).
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

}  // namespace transposed
