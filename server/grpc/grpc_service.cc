#include "server/grpc/grpc_service.h"

#include <google/protobuf/arena.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/text.h"
#include "core/mutex.h"
#include "proto/grpc_status.h"
#include "proto/problem_proto.h"
#include "server/grpc/convert.h"
#include "server/tune_many.h"

namespace transposed {

namespace {

// How a request named its device, for the log line when there is no answer to take it from.
std::string DescribeSelector(const v1::DeviceSelector& s) {
  switch (s.selector_case()) {
    case v1::DeviceSelector::kIndex:
      return std::to_string(s.index());
    case v1::DeviceSelector::kUuid:
      return Quote(s.uuid());
    case v1::DeviceSelector::SELECTOR_NOT_SET:
      break;
  }
  return "0";
}

// The problem as the log shows it: the parsed problem, or the raw fields when it did not parse.
std::string DescribeProblem(const StatusOr<Problem>& parsed, const v1::Problem& raw) {
  if (parsed.ok()) return parsed->ToString();
  return std::to_string(raw.rows()) + "x" + std::to_string(raw.cols()) + " " + Quote(raw.dtype());
}

const Status& ClientGone() {
  static const Status* s = new Status(Status::Cancelled(
      "the client went away or its deadline passed; the tune goes on and will be cached"));
  return *s;
}

std::vector<v1::Device> DeviceProtos(const TransposeService* service) {
  std::vector<v1::Device> out;
  for (const DeviceInfo& d : service->ListDevices()) out.push_back(DeviceToProto(d));
  return out;
}

}  // namespace

GrpcTransposer::GrpcTransposer(TransposeService* service, RpcNotes* notes, AdminGate gate,
                               CallLimiter* limiter)
    : service_(service), devices_(service->ListDevices()), device_protos_(DeviceProtos(service)),
      notes_(notes), gate_(std::move(gate)), limiter_(limiter) {}

GrpcTransposer::~GrpcTransposer() = default;

grpc::ServerUnaryReactor* GrpcTransposer::FinishNow(grpc::CallbackServerContext* context,
                                                    const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

Status GrpcTransposer::Admit(const char* method, const grpc::CallbackServerContext* context,
                             CallLimiter::Slot* slot) const {
  if (limiter_ == nullptr) return Status::OK();
  StatusOr<CallLimiter::Slot> s = limiter_->Acquire(context->peer());
  if (!s.ok()) {
    spdlog::warn("rpc={} peer={} refused status={}", method, Quote(context->peer()),
                 s.status().ToString());
    return s.status();
  }
  *slot = std::move(s).value();
  return Status::OK();
}

Status GrpcTransposer::Authorize(const char* method,
                                 const grpc::CallbackServerContext* context) const {
  Status s = gate_.Authorize(method, *context);
  if (!s.ok())
    spdlog::warn("rpc={} peer={} refused status={}", method, Quote(context->peer()), s.ToString());
  return s;
}

// The life of one call, the same for every call class (CRTP over its gRPC reactor): Start makes
// the Derived call, which keeps itself alive (self_) until gRPC's OnDone, and hands the request
// (and gRPC's response, for a unary call) to Derived::Begin; the call counts in the daemon's
// inflight() from construction to OnDone and gives its limiter slot back there. It holds the
// service's waiter of the work in flight, so that a client that goes away detaches from it. A
// Derived class befriends its Call (Start reaches its constructor and Begin).
template <typename Derived, typename Reactor>
class GrpcTransposer::Call : public Reactor {
 public:
  template <typename Request, typename... More>
  static Reactor* Start(GrpcTransposer* owner, grpc::CallbackServerContext* context,
                        const Request& request, More... more) {
    std::shared_ptr<Derived> call(new Derived(owner, context));
    call->self_ = call;
    call->Begin(request, more...);
    return call.get();
  }

  void OnDone() override {
    slot_.Release();
    owner_->inflight_.fetch_sub(1);
    self_.reset();  // may delete this
  }

 protected:
  Call(GrpcTransposer* owner, grpc::CallbackServerContext* context)
      : owner_(owner), context_(context) {
    owner_->inflight_.fetch_add(1);
  }

  // Holds the waiter of the work just started (replacing the one held before): false, and
  // detached here, when the client has already gone.
  bool HoldWaiter(std::shared_ptr<TransposeService::Waiter> waiter) EXCLUDES(waiter_mu_) {
    {
      MutexLock l(&waiter_mu_);
      if (!left_) {
        waiter_ = std::move(waiter);
        return true;
      }
    }
    owner_->service_->Detach(waiter);
    return false;
  }

  // The client has gone: detaches the waiter held, and any held from now on.
  void DetachWaiter() EXCLUDES(waiter_mu_) {
    std::shared_ptr<TransposeService::Waiter> waiter;
    {
      MutexLock l(&waiter_mu_);
      left_ = true;
      waiter.swap(waiter_);
    }
    owner_->service_->Detach(waiter);
  }

  GrpcTransposer* const owner_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<Derived> self_;  // set in Start, dropped in OnDone
  CallLimiter::Slot slot_;         // taken by Derived::Begin, given back by OnDone

 private:
  Mutex waiter_mu_;
  bool left_ GUARDED_BY(waiter_mu_) = false;  // the client has gone
  std::shared_ptr<TransposeService::Waiter> waiter_ GUARDED_BY(waiter_mu_);
};

// One GetConfig call. Owned by shared_ptrs: its own (dropped in OnDone) and the service's
// callback (dropped when answered or detached); `finished_` picks the one answer that is sent.
// Its request (and an answer that is not a kept hit) live on the call's arena, whose first block
// is part of the call: a call allocates once, instead of once per string, submessage and map
// node.
class GrpcTransposer::GetConfigCall : public Call<GetConfigCall, grpc::ServerUnaryReactor> {
 public:
  void OnCancel() override {
    DetachWaiter();
    Complete(ClientGone());
  }

 private:
  friend Call;  // Call<GetConfigCall, ...>::Start constructs the call and calls Begin
  GetConfigCall(GrpcTransposer* owner, grpc::CallbackServerContext* context)
      : Call(owner, context), arena_(ArenaOptions(block_)) {}

  void Begin(const grpc::ByteBuffer& body, grpc::ByteBuffer* response) {
    response_ = response;
    auto* parsed = google::protobuf::Arena::CreateMessage<v1::GetConfigRequest>(&arena_);
    request_ = parsed;
    grpc::ByteBuffer consumed(body);  // shares the slices; Deserialize empties its argument
    if (!grpc::SerializationTraits<v1::GetConfigRequest>::Deserialize(&consumed, parsed).ok()) {
      // What the interceptor says of any method's request body that does not parse.
      Complete(Status::InvalidArgument(
          "request: not a valid " + v1::GetConfigRequest::descriptor()->full_name() +
          " message (the body does not parse as protobuf)"));
      return;
    }
    StatusOr<ConfigRequest> req = ConfigRequestFromProto(*request_);
    if (!req.ok()) {
      Complete(req.status());
      return;
    }
    req->shared_hit = true;  // a hit is answered with bytes kept for its stored entry
    std::shared_ptr<GetConfigCall> self = self_;
    // Counted by the call limiter only when it is about to wait for a tune: a hit, a CACHE_ONLY
    // miss and an ANSWER_NOW answer never wait, and are never refused for the waiting ones.
    HoldWaiter(owner_->service_->StartGetConfig(
        *req, nullptr, [self](StatusOr<ConfigAnswer> answer) { self->Complete(answer); },
        [self] { return self->owner_->Admit("GetConfig", self->context_, &self->slot_); }));
  }

  // The first call sends the answer; later ones (a tune ending after the client left) do nothing.
  void Complete(const StatusOr<ConfigAnswer>& answer) {
    if (finished_.exchange(true)) return;
    Status status = answer.status();
    if (answer.ok() && answer->stored) {
      const grpc::Slice bytes = owner_->HitBytes(*answer, &arena_);
      grpc::ByteBuffer encoded(&bytes, 1);  // a reference to the kept bytes, not a copy
      response_->Swap(&encoded);
    } else if (answer.ok()) {
      auto* message = google::protobuf::Arena::CreateMessage<v1::Answer>(&arena_);
      owner_->AnswerMessage(*answer, message);
      bool own = false;
      const grpc::Status s =
          grpc::SerializationTraits<v1::Answer>::Serialize(*message, response_, &own);
      if (!s.ok()) status = Status::Internal("answer: " + s.error_message());
    }
    // A hit is the bulk of the traffic and changes nothing: its line at debug (counted in the
    // metrics, transposed_cache_hits_total). The note is written only for a line that is logged.
    const bool routine = answer.ok() && answer->source == AnswerSource::kCache;
    std::string note;
    if (spdlog::should_log(routine ? spdlog::level::debug : spdlog::level::info)) {
      const std::string device = answer.ok() ? std::to_string(answer->device_index)
                                             : DescribeSelector(request_->problem().device());
      note = "problem=" +
             DescribeProblem(ProblemFromProto(request_->problem()), request_->problem()) +
             " device=" + device +
             " source=" + (answer.ok() ? AnswerSourceName(answer->source) : std::string("-"));
    }
    owner_->Note(context_, std::move(note), routine);
    Finish(ToGrpcStatus(status));
  }

  static constexpr size_t kBlockBytes = 2048;  // a request; an answer of two devices is ~3 KB
  static google::protobuf::ArenaOptions ArenaOptions(char* block) {
    google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = kBlockBytes;
    return o;
  }

  alignas(16) char block_[kBlockBytes];
  google::protobuf::Arena arena_;  // after block_, which it uses first
  // gRPC's, valid until OnDone; set first thing in Begin, then written only by the finisher.
  grpc::ByteBuffer* response_ = nullptr;
  const v1::GetConfigRequest* request_ = nullptr;  // on arena_
  std::atomic<bool> finished_{false};
};

void GrpcTransposer::AnswerMessage(const ConfigAnswer& answer, v1::Answer* out) const {
  const TuneResult* result = &answer.result;
  const DeviceInfo* measured_on = &answer.measured_on;
  TuneResult hit;
  DeviceInfo hit_measured_on;
  if (answer.stored) {
    // A shared hit: the stored entry, answered for our device, measured on its own.
    hit = *answer.stored;
    hit_measured_on = hit.device;
    hit_measured_on.index = answer.measured_on.index;
    if (answer.device_index >= 0 && answer.device_index < static_cast<int>(devices_.size()))
      hit.device = devices_[answer.device_index];
    result = &hit;
    measured_on = &hit_measured_on;
  }
  // This daemon's devices are converted once (device_protos_).
  const auto& protos = device_protos_;
  const int index = answer.device_index;
  const int measured = measured_on->index;
  if (index >= 0 && index < static_cast<int>(protos.size()) && result->device.index == index) {
    AnswerToProto(*result, answer.source, protos[index],
                  measured >= 0 && measured < static_cast<int>(protos.size())
                      ? protos[measured]
                      : DeviceToProto(*measured_on),
                  out);
  } else {
    *out = AnswerToProto(*result, answer.source, measured_on);
  }
  if (answer.source == AnswerSource::kNearest || answer.source == AnswerSource::kHeuristic) {
    // Chosen, not measured, for this problem: no instance measured it, it is not stored.
    out->clear_measured_on();
    out->clear_origin();
  }
  if (answer.nearest_problem.has_value())
    *out->mutable_nearest_problem() = ProblemToProto(*answer.nearest_problem);
}

grpc::Slice GrpcTransposer::HitBytes(const ConfigAnswer& answer, google::protobuf::Arena* arena) {
  if (std::optional<grpc::Slice> kept = hit_answers_.Find(answer.stored, answer.device_index))
    return *std::move(kept);
  auto* message = google::protobuf::Arena::CreateMessage<v1::Answer>(arena);
  AnswerMessage(answer, message);
  return hit_answers_.Keep(answer.stored, answer.device_index, message->SerializeAsString());
}

// A server stream fed from other threads (device tune threads): messages are queued and written one
// at a time (gRPC allows one write in flight); the end (an answer and a status, or an error) is
// decided once and finishes the stream after everything queued before it. A client that goes
// away (a failed write, a cancellation, a passed deadline) drops what is not written yet and
// ends the stream CANCELLED. Every gRPC operation is started outside mu_, decided under it.
// Its life is a Call's.
template <typename Derived, typename Msg>
class GrpcTransposer::StreamCall : public Call<Derived, grpc::ServerWriteReactor<Msg>> {
 public:
  void OnWriteDone(bool ok) override {
    if (!ok) {
      ClientLeft(/*write_done=*/true);  // the stream is broken: the client is gone
      return;
    }
    {
      MutexLock l(&mu_);
      writing_ = false;
      pending_.pop_front();
      ++written_;
    }
    Pump();
  }

  void OnCancel() override { ClientLeft(/*write_done=*/false); }

 protected:
  StreamCall(GrpcTransposer* owner, grpc::CallbackServerContext* context)
      : Call<Derived, grpc::ServerWriteReactor<Msg>>(owner, context) {}

  // Queues a message; false (dropped) once the end is decided.
  bool Enqueue(Msg msg) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      if (final_.has_value()) return false;
      pending_.push_back(std::move(msg));
    }
    Pump();
    return true;
  }

  // Whether the end is decided (End, or the client left): nothing more is written, and a call
  // that feeds the stream from other work (TuneMany) starts none.
  bool Ended() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return final_.has_value();
  }

  // Decides the end: `last` (if any) after everything queued, then `status`. Only the first
  // decision counts.
  void End(const Status& status, std::optional<Msg> last = std::nullopt) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      if (final_.has_value()) return;
      if (last.has_value()) pending_.push_back(std::move(*last));
      final_ = status;
    }
    Pump();
  }

  // The client went away: stop feeding the stream (detach from the service). Called once,
  // without mu_ held.
  virtual void OnClientLeft() = 0;
  // Leaves the call's note for the log line; called once, right before the stream finishes,
  // without mu_ held. `written`: messages written.
  virtual void OnFinishing(int written) = 0;

 private:
  // Drops what is not written yet (the write in flight stays until OnWriteDone) and ends the
  // stream CANCELLED.
  void ClientLeft(bool write_done) EXCLUDES(mu_) {
    bool first = false;
    {
      MutexLock l(&mu_);
      if (write_done) writing_ = false;
      while (pending_.size() > (writing_ ? 1u : 0u)) pending_.pop_back();
      first = !client_left_;
      client_left_ = true;
      final_ = ClientGone();
    }
    if (first) OnClientLeft();
    Pump();
  }

  // Starts the next write, or finishes once everything is written.
  void Pump() EXCLUDES(mu_) {
    const Msg* write = nullptr;
    std::optional<Status> finish;
    int written = 0;
    {
      MutexLock l(&mu_);
      if (writing_ || finished_) return;
      if (!pending_.empty()) {
        writing_ = true;
        write = &pending_.front();  // a deque keeps it in place while more are pushed
      } else if (final_.has_value()) {
        finished_ = true;
        finish = *final_;
        written = written_;
      }
    }
    if (write != nullptr) this->StartWrite(write);
    if (finish.has_value()) {
      OnFinishing(written);
      this->Finish(ToGrpcStatus(*finish));
    }
  }

  Mutex mu_;
  std::deque<Msg> pending_ GUARDED_BY(mu_);  // front: the write in flight
  bool writing_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  bool client_left_ GUARDED_BY(mu_) = false;
  std::optional<Status> final_ GUARDED_BY(mu_);  // how the stream ends, once known
  int written_ GUARDED_BY(mu_) = 0;
};

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

grpc::ServerUnaryReactor* GrpcTransposer::GetConfig(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return GetConfigCall::Start(this, context, *request, response);
}

grpc::ServerWriteReactor<v1::TuneProgress>* GrpcTransposer::Tune(
    grpc::CallbackServerContext* context, const v1::TuneRequest* request) {
  return TuneCall::Start(this, context, *request);
}

grpc::ServerWriteReactor<v1::TuneManyProgress>* GrpcTransposer::TuneMany(
    grpc::CallbackServerContext* context, const v1::TuneManyRequest* request) {
  return TuneManyCall::Start(this, context, *request);
}

}  // namespace transposed
