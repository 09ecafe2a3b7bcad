#include "server/tune_many.h"

#include <atomic>
#include <string>

namespace transposed {

std::shared_ptr<TuneManyRun> TuneManyRun::Create(TransposeService* service, TuneManyRequest request,
                                                 TuneManyCallbacks callbacks) {
  return std::shared_ptr<TuneManyRun>(
      new TuneManyRun(service, std::move(request), std::move(callbacks)));
}

void TuneManyRun::Start() {
  const int n = static_cast<int>(request_.problems.size());
  while (true) {
    int i = -1;
    {
      MutexLock l(&mu_);
      if (stopped_) return;  // the client has gone, or a problem that could not start ended it
      if (next_ < n) {
        i = next_++;
        last_index_ = 0;
        last_total_ = 0;
      } else {
        stopped_ = true;
      }
    }
    if (i < 0) {
      callbacks_.end(Status::OK());
      return;
    }
    // Whoever comes second, the starter or the answer, goes on with the next problem: the
    // answer may come at once (a cache hit), or on the tune thread before the start returns.
    auto step = std::make_shared<std::atomic<int>>(0);
    std::shared_ptr<TuneManyRun> self = shared_from_this();
    auto progress = [self, i](const CandidateResult& r, int index, int total) {
      {
        MutexLock l(&self->mu_);
        self->last_index_ = index;
        self->last_total_ = total;
      }
      self->callbacks_.progress(i, r, index, total);
    };
    auto done = [self, i, step](StatusOr<ConfigAnswer> answer) {
      if (self->Answered(i, answer) && step->fetch_add(1) == 1) self->Start();
    };
    std::shared_ptr<Waiter> waiter;
    if (request_.force) {
      waiter = service_->StartTune(RequestFor<ForcedTuneRequest>(i), std::move(progress),
                                   std::move(done));
    } else {
      ConfigRequest req = RequestFor<ConfigRequest>(i);
      req.background = request_.background;
      waiter = service_->StartGetConfig(req, std::move(progress), std::move(done));
    }
    // Problem i is the one in flight: the next starts only once both its start (here) and its
    // answer are through.
    if (!Hold(std::move(waiter))) return;  // stopped meanwhile
    if (step->fetch_add(1) != 1) return;   // the answer comes later and goes on from there
  }
}

bool TuneManyRun::Answered(int i, const StatusOr<ConfigAnswer>& answer) {
  const StatusCode code = answer.status().code();
  if (!answer.ok() && (code == StatusCode::kResourceExhausted || code == StatusCode::kCancelled)) {
    {
      MutexLock l(&mu_);
      if (stopped_) return false;
      stopped_ = true;
      ++counts_.failed;
    }
    callbacks_.end(Status(code, "problems[" + std::to_string(i) +
                                    "]: " + answer.status().message() + " (" + std::to_string(i) +
                                    " of " + std::to_string(request_.problems.size()) +
                                    " problems answered before it)"));
    return false;
  }
  int index = 0, total = 0;
  {
    MutexLock l(&mu_);
    if (stopped_) return false;  // the client has gone, or an earlier problem ended the run
    if (!answer.ok())
      ++counts_.failed;
    else
      ++(answer->source == AnswerSource::kCache ? counts_.cached : counts_.tuned);
    index = last_index_;
    total = last_total_;
  }
  if (callbacks_.answer(i, answer, index, total)) return true;
  Stop();
  return false;
}

bool TuneManyRun::Hold(std::shared_ptr<Waiter> waiter) {
  {
    MutexLock l(&mu_);
    if (!stopped_) {
      waiter_ = std::move(waiter);
      return true;
    }
  }
  service_->Detach(waiter);
  return false;
}

void TuneManyRun::Stop() {
  std::shared_ptr<Waiter> waiter;
  {
    MutexLock l(&mu_);
    stopped_ = true;
    waiter.swap(waiter_);
  }
  service_->Detach(waiter);
}

TuneManyRun::Counts TuneManyRun::counts() const {
  MutexLock l(&mu_);
  return counts_;
}

}  // namespace transposed
