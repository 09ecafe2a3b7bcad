// The tune RPCs of GrpcTransposer (grpc_service.h): Tune and TuneMany, server streams written by
// StreamCall (grpc_calls.h) from the service's callbacks on the devices' tune threads. GetConfig
// is in grpc_service.cc, the entry and device RPCs in entry_rpcs.cc.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "proto/grpc_status.h"
#include "proto/problem_proto.h"
#include "server/grpc/convert.h"
#include "server/grpc/grpc_calls.h"
#include "server/grpc/grpc_service.h"
#include "server/tune_many.h"

namespace transposed {

// One Tune call: candidate results arrive on the device's tune thread and are streamed as they
// come; the answer or the error ends the stream after them.
class GrpcTransposer::TuneCall : public StreamCall<TuneCall, v1::TuneProgress> {
 private:
  friend Call;  // Call<TuneCall, ...>::Start constructs the call and calls Begin
  using StreamCall::StreamCall;

  void Begin(const v1::TuneRequest& request) {
    problem_ = DescribeProblem(ProblemFromProto(request.problem()), request.problem());
    {
      MutexLock l(&mu_);
      device_ = DescribeSelector(request.problem().device());
    }
    if (Status auth = owner_->Authorize("Tune", context_); !auth.ok()) {
      End(auth);
      return;
    }
    const StatusOr<ForcedTuneRequest> parsed = TuneRequestFromProto(request);
    if (!parsed.ok()) {
      End(parsed.status());
      return;
    }
    if (Status admitted = owner_->Admit("Tune", context_, &slot_); !admitted.ok()) {
      End(admitted);
      return;
    }
    const ForcedTuneRequest& req = *parsed;
    // The backend name of the device the tune runs on, for the streamed variants.
    std::string backend;
    if (auto idx = owner_->service_->ResolveDevice(req.device); idx.ok())
      backend = owner_->service_->ListDevices()[*idx].backend;
    const int64_t bytes = req.problem.bytes();
    std::shared_ptr<TuneCall> self = self_;
    auto progress = [self, backend, bytes](const CandidateResult& r, int index, int total) {
      v1::TuneProgress msg;
      msg.set_index(index);
      msg.set_total(total);
      *msg.mutable_candidate() = CandidateResultToProto(r, backend, bytes);
      {
        MutexLock l(&self->mu_);
        self->last_index_ = index;
        self->last_total_ = total;
      }
      self->Enqueue(std::move(msg));
    };
    auto done = [self](StatusOr<ConfigAnswer> answer) {
      if (!answer.ok()) {
        self->End(answer.status());
        return;
      }
      v1::TuneProgress msg;
      *msg.mutable_answer() = AnswerToProto(answer->result, answer->source, &answer->measured_on);
      {
        MutexLock l(&self->mu_);
        msg.set_index(self->last_index_);
        msg.set_total(self->last_total_);
        self->device_ = std::to_string(answer->device_index);
      }
      self->End(Status::OK(), std::move(msg));
    };
    HoldWaiter(owner_->service_->StartTune(req, std::move(progress), std::move(done)));
  }

  void OnClientLeft() override { DetachWaiter(); }

  void OnFinishing(int written) override {
    MutexLock l(&mu_);
    owner_->Note(context_, "problem=" + problem_ + " device=" + device_ +
                               " source=tuned candidates=" + std::to_string(written));
  }

  std::string problem_;  // for the note, written before any answer can come
  Mutex mu_;
  std::string device_ GUARDED_BY(mu_);
  int last_index_ GUARDED_BY(mu_) = 0;  // of the last candidate streamed
  int last_total_ GUARDED_BY(mu_) = 0;
};

// One TuneMany call: the problems are validated up front (nothing starts when one is bad), then
// handed to a TuneManyRun (server/tune_many.h), which starts them one at a time; this call only
// streams what the run reports. A client that goes away stops the run.
class GrpcTransposer::TuneManyCall : public StreamCall<TuneManyCall, v1::TuneManyProgress> {
 private:
  friend Call;  // Call<TuneManyCall, ...>::Start constructs the call and calls Begin
  using StreamCall::StreamCall;

  void Begin(const v1::TuneManyRequest& request) {
    const int n = request.problems_size();
    TuneManyRequest run;
    run.force = request.force();
    run.background = request.background();
    force_ = run.force;
    if (run.force && run.background) {
      End(Status::InvalidArgument(
          "background: a forced re-tune (force) is an admin's and runs at once; ask for one"));
      return;
    }
    // A forced re-tune overwrites cached winners: admin, as Tune.
    if (run.force) {
      if (Status auth = owner_->Authorize("TuneMany.force", context_); !auth.ok()) {
        End(auth);
        return;
      }
    }
    if (n < 1 || n > kMaxTuneManyProblems) {
      End(Status::InvalidArgument("problems: between 1 and " +
                                  std::to_string(kMaxTuneManyProblems) + " per call, got " +
                                  std::to_string(n)));
      return;
    }
    if (Status s = CheckTuneBudget(request.budget_seconds()); !s.ok()) {
      End(s);
      return;
    }
    run.budget_seconds = request.budget_seconds();
    run.exhaustive = request.exhaustive();
    const std::vector<DeviceInfo> devices = owner_->service_->ListDevices();
    for (int i = 0; i < n; ++i) {
      const v1::Problem& raw = request.problems(i);
      const std::string field = "problems[" + std::to_string(i) + "]";
      StatusOr<Problem> parsed = ProblemFromProto(raw, field);
      Status s = parsed.status();
      const DeviceRef device = DeviceRefFromProto(raw.device());
      int index = -1;
      if (s.ok()) {
        StatusOr<int> checked = owner_->service_->CheckRequest(*parsed, device, field);
        if (checked.ok()) index = *checked;
        s = checked.status();
      }
      if (!s.ok()) {
        End(s);
        return;
      }
      backends_.push_back(devices[index].backend);
      bytes_.push_back(parsed->bytes());
      run.problems.push_back(*std::move(parsed));
      run.devices.push_back(device);
      MutexLock l(&mu_);
      problems_ = static_cast<int>(run.problems.size());
    }
    if (Status admitted = owner_->Admit("TuneMany", context_, &slot_); !admitted.ok()) {
      End(admitted);
      return;
    }
    std::shared_ptr<TuneManyCall> self = self_;
    TuneManyCallbacks callbacks;
    callbacks.progress = [self](int i, const CandidateResult& r, int index, int total) {
      v1::TuneManyProgress msg = self->Message(i);
      v1::TuneProgress* p = msg.mutable_progress();
      p->set_index(index);
      p->set_total(total);
      *p->mutable_candidate() = CandidateResultToProto(r, self->backends_[static_cast<size_t>(i)],
                                                      self->bytes_[static_cast<size_t>(i)]);
      self->Enqueue(std::move(msg));
    };
    callbacks.answer = [self](int i, const StatusOr<ConfigAnswer>& answer, int index,
                              int total) {
      v1::TuneManyProgress msg = self->Message(i);
      if (!answer.ok()) {
        msg.mutable_error()->set_code(static_cast<int>(ToGrpcStatus(answer.status()).error_code()));
        msg.mutable_error()->set_message(answer.status().message());
      } else {
        v1::TuneProgress* p = msg.mutable_progress();
        p->set_index(index);
        p->set_total(total);
        *p->mutable_answer() = AnswerToProto(answer->result, answer->source, &answer->measured_on);
      }
      return self->Enqueue(std::move(msg));
    };
    callbacks.end = [self](const Status& status) { self->End(status); };
    std::shared_ptr<TuneManyRun> run_now =
        TuneManyRun::Create(owner_->service_, std::move(run), std::move(callbacks));
    {
      MutexLock l(&mu_);
      if (left_) return;  // the client has gone already: start nothing
      run_ = run_now;
    }
    run_now->Start();
  }

  v1::TuneManyProgress Message(int i) EXCLUDES(mu_) {
    v1::TuneManyProgress msg;
    msg.set_problem_index(i);
    MutexLock l(&mu_);
    msg.set_problem_count(problems_);
    return msg;
  }

  void OnClientLeft() override {
    std::shared_ptr<TuneManyRun> run;
    {
      MutexLock l(&mu_);
      left_ = true;
      run = run_;
    }
    if (run) run->Stop();
  }

  void OnFinishing(int written) override {
    MutexLock l(&mu_);
    const TuneManyRun::Counts c = run_ ? run_->counts() : TuneManyRun::Counts();
    const int answered = c.cached + c.tuned + c.failed;
    owner_->Note(context_, "problems=" + std::to_string(problems_) +
                               " force=" + (force_ ? "true" : "false") +
                               " cached=" + std::to_string(c.cached) +
                               " tuned=" + std::to_string(c.tuned) +
                               " failed=" + std::to_string(c.failed) +
                               " dropped=" + std::to_string(problems_ - answered) +
                               " messages=" + std::to_string(written));
  }

  // Written by Begin before the run starts, then read only.
  bool force_ = false;
  std::vector<std::string> backends_;  // of each problem's device, for the streamed variants
  std::vector<int64_t> bytes_;         // of each problem
  Mutex mu_;
  int problems_ GUARDED_BY(mu_) = 0;  // problems checked (all of them once the run starts)
  bool left_ GUARDED_BY(mu_) = false;  // the client has gone
  std::shared_ptr<TuneManyRun> run_ GUARDED_BY(mu_);  // set once started
};

grpc::ServerWriteReactor<v1::TuneProgress>* GrpcTransposer::Tune(
    grpc::CallbackServerContext* context, const v1::TuneRequest* request) {
  return TuneCall::Start(this, context, *request);
}

grpc::ServerWriteReactor<v1::TuneManyProgress>* GrpcTransposer::TuneMany(
    grpc::CallbackServerContext* context, const v1::TuneManyRequest* request) {
  return TuneManyCall::Start(this, context, *request);
}

}  // namespace transposed
