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

namespace transposed {

namespace {

// Ends a unary call answered on the calling thread: the default reactor, finished with `status`.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

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

v1::DeviceLoad DeviceLoadToProto(const DeviceLoad& l) {
  v1::DeviceLoad out;
  out.set_state(std::string(LoadStateName(l.state)));
  out.set_source(l.sample.source);
  out.set_detail(l.sample.detail);
  out.set_utilization_percent(l.sample.utilization_percent);
  out.set_other_processes(l.sample.other_processes);
  out.set_sampled_at_unix_ms(l.sampled_at_unix_ms);
  out.set_tune_contention(l.tune_contention);
  out.set_background_waiting(l.background_waiting);
  out.set_background_abandoned(l.background_abandoned);
  out.set_last_abandoned(l.last_abandoned);
  return out;
}

// The most bytes of entries one ListEntries answer carries (a default client accepts 4 MiB): the
// service's page bound (server/service.h), measured here in serialised bytes.
constexpr size_t kMaxListReplyBytes = kMaxEntryPageBytes;

}  // namespace

GrpcTransposer::GrpcTransposer(TransposeService* service, RpcNotes* notes, AdminGate gate,
                               CallLimiter* limiter)
    : service_(service), devices_(service->ListDevices()), device_protos_(DeviceProtos(service)),
      notes_(notes), gate_(std::move(gate)), limiter_(limiter) {}

GrpcTransposer::~GrpcTransposer() = default;

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
// started one at a time, each after the previous one's answer, so that a call holds at most one
// place in a device's tune queue. A cached problem is answered at once (skipped); a missing one
// joins or queues its tune (as a GetConfig miss; with force, as a Tune) and streams its candidate
// results. A client that goes away detaches from the problem in flight (its tune runs to the end
// and is stored, as elsewhere) and the problems not started yet are dropped.
class GrpcTransposer::TuneManyCall : public StreamCall<TuneManyCall, v1::TuneManyProgress> {
 private:
  friend Call;  // Call<TuneManyCall, ...>::Start constructs the call and calls Begin
  using StreamCall::StreamCall;

  struct Item {
    Problem problem;
    DeviceRef device;
    std::string backend;  // of the device, for the streamed variants
  };

  void Begin(const v1::TuneManyRequest& request) {
    const int n = request.problems_size();
    force_ = request.force();
    background_ = request.background();
    if (force_ && background_) {
      End(Status::InvalidArgument(
          "background: a forced re-tune (force) is an admin's and runs at once; ask for one"));
      return;
    }
    // A forced re-tune overwrites cached winners: admin, as Tune.
    if (force_) {
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
    budget_seconds_ = request.budget_seconds();
    exhaustive_ = request.exhaustive();
    const std::vector<DeviceInfo> devices = owner_->service_->ListDevices();
    for (int i = 0; i < n; ++i) {
      const v1::Problem& raw = request.problems(i);
      Item item;
      const std::string field = "problems[" + std::to_string(i) + "]";
      StatusOr<Problem> parsed = ProblemFromProto(raw, field);
      Status s = parsed.status();
      int index = -1;
      if (s.ok()) {
        item.problem = *parsed;
        item.device = DeviceRefFromProto(raw.device());
        StatusOr<int> checked = owner_->service_->CheckRequest(item.problem, item.device, field);
        if (checked.ok()) index = *checked;
        s = checked.status();
      }
      if (!s.ok()) {
        End(s);
        return;
      }
      item.backend = devices[index].backend;
      items_.push_back(std::move(item));
    }
    if (Status admitted = owner_->Admit("TuneMany", context_, &slot_); !admitted.ok()) {
      End(admitted);
      return;
    }
    StartNext();
  }

  // Starts the problems in order until one waits for a tune (its answer, on the device's tune
  // thread, goes on from there), the client has gone, or all are answered (then the stream ends).
  void StartNext() {
    while (true) {
      int i = -1;
      if (Ended()) return;  // the client has gone, or a problem that could not start ended it
      {
        MutexLock l(&mu_);
        if (next_ < static_cast<int>(items_.size())) {
          i = next_++;
          last_index_ = 0;
          last_total_ = 0;
        }
      }
      if (i < 0) {
        End(Status::OK());
        return;
      }
      const Item& item = items_[static_cast<size_t>(i)];
      // Whoever comes second, the starter or the answer, goes on with the next problem: the
      // answer may come at once (a cache hit), or on the tune thread before the start returns.
      auto step = std::make_shared<std::atomic<int>>(0);
      std::shared_ptr<TuneManyCall> self = self_;
      const int64_t bytes = item.problem.bytes();
      const std::string backend = item.backend;
      auto progress = [self, i, backend, bytes](const CandidateResult& r, int index, int total) {
        v1::TuneManyProgress msg = self->Message(i);
        v1::TuneProgress* p = msg.mutable_progress();
        p->set_index(index);
        p->set_total(total);
        *p->mutable_candidate() = CandidateResultToProto(r, backend, bytes);
        {
          MutexLock l(&self->mu_);
          self->last_index_ = index;
          self->last_total_ = total;
        }
        self->Enqueue(std::move(msg));
      };
      auto done = [self, i, step](StatusOr<ConfigAnswer> answer) {
        if (self->Answered(i, answer) && step->fetch_add(1) == 1) self->StartNext();
      };
      std::shared_ptr<TransposeService::Waiter> waiter;
      if (force_) {
        ForcedTuneRequest req;
        req.problem = item.problem;
        req.device = item.device;
        req.budget_seconds = budget_seconds_;
        req.exhaustive = exhaustive_;
        waiter = owner_->service_->StartTune(req, std::move(progress), std::move(done));
      } else {
        ConfigRequest req;
        req.problem = item.problem;
        req.device = item.device;
        req.budget_seconds = budget_seconds_;
        req.exhaustive = exhaustive_;
        req.background = background_;
        waiter = owner_->service_->StartGetConfig(req, std::move(progress), std::move(done));
      }
      // Problem i is the one in flight: the next starts only once both its start (here) and
      // its answer are through.
      if (!HoldWaiter(std::move(waiter))) return;  // the client has gone
      if (step->fetch_add(1) != 1) return;  // the answer comes later and goes on from there
    }
  }

  v1::TuneManyProgress Message(int i) const {
    v1::TuneManyProgress msg;
    msg.set_problem_index(i);
    msg.set_problem_count(static_cast<int>(items_.size()));
    return msg;
  }

  // Streams problem i's answer or error. False when the call stops here: the client has gone,
  // or the problem could not be started (a full queue, a shutdown), which ends the stream with
  // that status, naming the problem.
  bool Answered(int i, const StatusOr<ConfigAnswer>& answer) {
    v1::TuneManyProgress msg = Message(i);
    const StatusCode code = answer.status().code();
    if (!answer.ok() &&
        (code == StatusCode::kResourceExhausted || code == StatusCode::kCancelled)) {
      {
        MutexLock l(&mu_);
        ++failed_;
      }
      End(Status(code, "problems[" + std::to_string(i) + "]: " + answer.status().message() +
                           " (" + std::to_string(i) + " of " + std::to_string(items_.size()) +
                           " problems answered before it)"));
      return false;
    }
    if (Ended()) return false;  // the client has gone, or an earlier problem ended the call
    {
      MutexLock l(&mu_);
      if (!answer.ok()) {
        ++failed_;
        msg.mutable_error()->set_code(static_cast<int>(ToGrpcStatus(answer.status()).error_code()));
        msg.mutable_error()->set_message(answer.status().message());
      } else {
        ++(answer->source == AnswerSource::kCache ? cached_ : tuned_);
        v1::TuneProgress* p = msg.mutable_progress();
        p->set_index(last_index_);
        p->set_total(last_total_);
        *p->mutable_answer() =
            AnswerToProto(answer->result, answer->source, &answer->measured_on);
      }
    }
    return Enqueue(std::move(msg));
  }

  void OnClientLeft() override { DetachWaiter(); }

  void OnFinishing(int written) override {
    MutexLock l(&mu_);
    const int answered = cached_ + tuned_ + failed_;
    owner_->Note(context_, "problems=" + std::to_string(items_.size()) +
                               " force=" + (force_ ? "true" : "false") +
                               " cached=" + std::to_string(cached_) +
                               " tuned=" + std::to_string(tuned_) +
                               " failed=" + std::to_string(failed_) + " dropped=" +
                               std::to_string(static_cast<int>(items_.size()) - answered) +
                               " messages=" + std::to_string(written));
  }

  // Written by Begin before the first problem starts, then read only.
  std::vector<Item> items_;
  bool force_ = false;
  double budget_seconds_ = 0;
  bool exhaustive_ = false;
  bool background_ = false;  // polite tunes (server/polite.h)
  Mutex mu_;
  int next_ GUARDED_BY(mu_) = 0;         // the next problem to start
  int last_index_ GUARDED_BY(mu_) = 0;    // of the problem in flight's last candidate
  int last_total_ GUARDED_BY(mu_) = 0;
  int cached_ GUARDED_BY(mu_) = 0;
  int tuned_ GUARDED_BY(mu_) = 0;
  int failed_ GUARDED_BY(mu_) = 0;
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

grpc::ServerUnaryReactor* GrpcTransposer::ListDevices(grpc::CallbackServerContext* context,
                                                      const v1::ListDevicesRequest* /*request*/,
                                                      v1::ListDevicesResponse* response) {
  const std::vector<DeviceLoad> loads = service_->DeviceLoads();
  for (const auto& d : service_->ListDevices()) {
    v1::Device* out = response->add_devices();
    *out = DeviceToProto(d);
    if (d.index >= 0 && static_cast<size_t>(d.index) < loads.size())
      *out->mutable_load() = DeviceLoadToProto(loads[d.index]);
  }
  Note(context, "devices=" + std::to_string(response->devices_size()));
  return FinishNow(context, Status::OK());
}

grpc::ServerUnaryReactor* GrpcTransposer::ListEntries(grpc::CallbackServerContext* context,
                                                      const v1::ListEntriesRequest* request,
                                                      v1::ListEntriesResponse* response) {
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) status = CheckFieldLength("page_token", request->page_token());
  if (status.ok()) {
    const int page_size = request->page_size() != 0 ? request->page_size() : request->limit();
    // `limit` is the older name of page_size: an error names the field the client set.
    auto page = request->page_size() == 0 && request->limit() < 0
                    ? StatusOr<EntryPage>(Status::InvalidArgument(
                          "limit: must be >= 0 (0: " + std::to_string(kDefaultPageSize) +
                          "), got " + std::to_string(request->limit())))
                    : service_->ListEntryPage(*query, request->include_candidates(), page_size,
                                              request->page_token());
    status = page.status();
    if (page.ok()) {
      const std::vector<DeviceInfo> devices = service_->ListDevices();
      size_t bytes = 0;
      for (size_t i = 0; i < page->entries.size(); ++i) {
        const TuneResult& e = page->entries[i];
        v1::Entry entry;
        // Shown for the device of this daemon it is served to (one of its class), with the
        // instance it was measured on; of no class here: for that instance itself.
        const int served = service_->DeviceIndexOfClass(e.device);
        if (served >= 0) {
          TuneResult shown = e;
          shown.device = devices[static_cast<size_t>(served)];
          *entry.mutable_answer() = AnswerToProto(shown, AnswerSource::kCache, &e.device);
        } else {
          *entry.mutable_answer() = AnswerToProto(e, AnswerSource::kCache);
        }
        for (const auto& c : e.candidates)
          *entry.add_candidates() = CandidateResultToProto(c, e.device.backend, e.problem.bytes());
        bytes += entry.ByteSizeLong();
        // Keep the answer under kMaxListReplyBytes (it always carries at least one entry).
        if (i > 0 && bytes > kMaxListReplyBytes) {
          response->set_next_page_token(page->resume_tokens[i - 1]);
          break;
        }
        *response->add_entries() = std::move(entry);
        if (i + 1 == page->entries.size() && page->more)
          response->set_next_page_token(page->resume_tokens[i]);
      }
    }
  }
  Note(context, "entries=" + std::to_string(response->entries_size()) +
                    " more=" + (response->next_page_token().empty() ? "false" : "true"));
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* GrpcTransposer::DeleteEntries(grpc::CallbackServerContext* context,
                                                        const v1::DeleteEntriesRequest* request,
                                                        v1::DeleteEntriesResponse* response) {
  if (Status auth = Authorize("DeleteEntries", context); !auth.ok()) {
    Note(context, "refused");
    return FinishNow(context, auth);
  }
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) {
    auto deleted = service_->DeleteEntries(*query, request->all());
    status = deleted.status();
    if (deleted.ok()) response->set_deleted(*deleted);
  }
  Note(context, "deleted=" + std::to_string(response->deleted()));
  return FinishNow(context, status);
}

namespace {

// Entries read from the store at once by an export: memory holds one page of them (with their
// candidates), whatever the size of the cache.
constexpr int kExportPageSize = 100;

// Streams the entries of `query` page by page from the store, one Write at a time; finishes with
// `status` when it is not OK, else after the last entry (or with the error of a page that could
// not be read). `on_finish` gets the number of entries sent, before the status goes out.
class ExportCall : public grpc::ServerWriteReactor<v1::ExportedEntry> {
 public:
  ExportCall(TransposeService* service, EntryQuery query, Status status,
             std::function<void(int64_t)> on_finish)
      : service_(service),
        query_(std::move(query)),
        status_(std::move(status)),
        on_finish_(std::move(on_finish)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      if (on_finish_) on_finish_(sent_);
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away during the export"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (status_.ok() && next_ >= page_.entries.size() && (first_page_ || page_.more)) {
      first_page_ = false;
      page_.entries.clear();  // the old page goes before the new one comes
      auto page = service_->ListEntryPage(query_, /*include_candidates=*/true, kExportPageSize,
                                          resume_token_);
      if (page.ok()) {
        page_ = std::move(page).value();
        next_ = 0;
        if (!page_.resume_tokens.empty()) resume_token_ = page_.resume_tokens.back();
      } else {
        status_ = page.status();
      }
    }
    if (!status_.ok() || next_ >= page_.entries.size()) {
      if (on_finish_) on_finish_(sent_);
      Finish(ToGrpcStatus(status_));
      return;
    }
    message_ = ExportedEntryToProto(page_.entries[next_++]);
    ++sent_;
    StartWrite(&message_);
  }
  TransposeService* const service_;
  const EntryQuery query_;
  Status status_;
  const std::function<void(int64_t)> on_finish_;
  EntryPage page_;
  bool first_page_ = true;
  std::string resume_token_;
  size_t next_ = 0;
  int64_t sent_ = 0;
  v1::ExportedEntry message_;
};

}  // namespace

grpc::ServerWriteReactor<v1::ExportedEntry>* GrpcTransposer::ExportEntries(
    grpc::CallbackServerContext* context, const v1::ExportEntriesRequest* request) {
  if (Status auth = Authorize("ExportEntries", context); !auth.ok()) {
    Note(context, "refused");
    return new ExportCall(service_, EntryQuery(), std::move(auth), nullptr);
  }
  EntryQuery query;
  query.filter.device_class = request->device_class();
  Status status = CheckFieldLength("device_class", request->device_class());
  const std::string device_class = Quote(request->device_class());
  return new ExportCall(service_, std::move(query), std::move(status),
                        [this, context, device_class](int64_t sent) {
                          Note(context, "device_class=" + device_class +
                                            " entries=" + std::to_string(sent));
                        });
}

grpc::ServerUnaryReactor* GrpcTransposer::ImportEntries(grpc::CallbackServerContext* context,
                                                        const v1::ImportEntriesRequest* request,
                                                        v1::ImportEntriesResponse* response) {
  if (Status auth = Authorize("ImportEntries", context); !auth.ok()) {
    Note(context, "refused");
    return FinishNow(context, auth);
  }
  Status status;
  if (request->entries_size() > kMaxImportBatch) {
    status = Status::InvalidArgument("entries: at most " + std::to_string(kMaxImportBatch) +
                                     " per call, got " + std::to_string(request->entries_size()));
  } else {
    response->set_received(request->entries_size());
    std::vector<TuneResult> valid;
    for (int i = 0; i < request->entries_size(); ++i) {
      auto r = ExportedEntryFromProto(request->entries(i));
      if (r.ok()) {
        valid.push_back(std::move(r).value());
        continue;
      }
      response->set_invalid(response->invalid() + 1);
      service_->CountRefusedEntry("import");
      if (response->errors_size() < 20)
        response->add_errors("entries[" + std::to_string(i) + "]." + r.status().message());
    }
    auto counts = service_->MergeEntries(valid);
    status = counts.status();
    if (counts.ok()) {
      response->set_imported(counts->imported);
      response->set_kept_existing(counts->kept_existing);
      response->set_refused_library_version(counts->refused_library_version);
      if (counts->refused_library_version > 0 && response->errors_size() < 20) {
        response->add_errors(std::to_string(counts->refused_library_version) +
                             " entries measured with a kernel library version this daemon does "
                             "not have (it has " + service_->ListDevices()[0].library_version +
                             ")");
      }
    }
  }
  Note(context, "received=" + std::to_string(response->received()) +
                    " imported=" + std::to_string(response->imported()) +
                    " kept_existing=" + std::to_string(response->kept_existing()) +
                    " refused_library_version=" +
                    std::to_string(response->refused_library_version()) +
                    " invalid=" + std::to_string(response->invalid()));
  return FinishNow(context, status);
}

}  // namespace transposed
