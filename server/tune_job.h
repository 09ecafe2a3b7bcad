// Waiter (one request waiting for a tune) and TuneJob (one tuning run on one device, shared by
// every request waiting for it): what a DeviceTuner (server/device_tuner.h) queues and runs, and
// what the service hands back to a caller so that it may Detach().
//
// Thread-safety: a Waiter's methods may be called from any thread (its own lock); a TuneJob's
// waiters are guarded by TuneJob::mu, taken after its tuner's lock.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/thread_annotations.h"
#include "server/requests.h"
#include "tuner/tuner.h"

namespace transposed {

// One request waiting for a job. Its callbacks are taken (answered) or cleared (detached) once;
// clearing them also breaks the reference cycle with a caller that holds the Waiter.
class Waiter {
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
struct TuneJob {
  Problem problem;
  std::string key;  // problem.Key(): its tuner's in-flight map's key
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

  Mutex mu;  // after its tuner's lock
  bool done GUARDED_BY(mu) = false;
  std::vector<std::shared_ptr<Waiter>> waiters GUARDED_BY(mu);

  // Adds a waiter; a waiter that is not `background` makes the job urgent (no longer polite).
  // Called with the tuner's lock held, so the job cannot finish meanwhile.
  void Join(const std::shared_ptr<Waiter>& waiter, bool background_waiter) EXCLUDES(mu) {
    if (!background_waiter) background.store(false);  // a caller waits for it now
    MutexLock l(&mu);
    waiters.push_back(waiter);
  }
  // Takes the waiters; later joins are refused (the tuner's lock makes them impossible anyway).
  std::vector<std::shared_ptr<Waiter>> Finish() EXCLUDES(mu) {
    MutexLock l(&mu);
    done = true;
    return std::move(waiters);
  }
};

}  // namespace transposed
