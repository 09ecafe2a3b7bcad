// GrpcTransposer (grpc_service.h): construction, the admission and admin checks every call
// makes, and GetConfig, served raw on one arena per call. The tune streams are in tune_rpcs.cc,
// the entry and device RPCs in entry_rpcs.cc, the call bases in grpc_calls.h.
#include "server/grpc/grpc_service.h"

#include <google/protobuf/arena.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/text.h"
#include "proto/grpc_status.h"
#include "proto/problem_proto.h"
#include "server/grpc/convert.h"
#include "server/grpc/grpc_calls.h"

namespace transposed {

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

namespace {

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
grpc::ServerUnaryReactor* GrpcTransposer::GetConfig(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return GetConfigCall::Start(this, context, *request, response);
}

}  // namespace transposed
