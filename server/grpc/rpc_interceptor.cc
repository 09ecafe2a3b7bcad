#include "server/grpc/rpc_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace transposed {

namespace {

using Clock = std::chrono::steady_clock;
using grpc::experimental::InterceptionHookPoints;

constexpr const char kTransposer[] = "transposed.v1.Transposer";

// The full name of the request message of a method of a service compiled into this binary
// ("transposed.v1.GetConfigRequest"); "" for an unknown service or method.
std::string RequestTypeOf(const std::string& service, const std::string& method) {
  const auto* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  const auto* m = s != nullptr ? s->FindMethodByName(method) : nullptr;
  return m != nullptr ? m->input_type()->full_name() : "";
}

class RpcInterceptor : public grpc::experimental::Interceptor {
 public:
  using Method = RpcInterceptorFactory::Method;

  // `method` kept by the factory, or null: then the interceptor splits its own.
  RpcInterceptor(grpc::experimental::ServerRpcInfo* info, Method* method, RpcNotes* notes,
                 RpcRecorder* recorder)
      : ctx_(info->server_context()), notes_(notes), recorder_(recorder), start_(Clock::now()),
        method_(method) {
    if (method_ == nullptr) {
      own_ = std::make_unique<Method>(info->method() != nullptr ? info->method() : "");
      method_ = own_.get();
    }
  }
  ~RpcInterceptor() override {
    if (notes_ != nullptr && !reported_) notes_->Take(ctx_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // gRPC hands the interceptor no message when the request body did not parse.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr)
      unparsed_ = true;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !reported_) {
      reported_ = true;
      grpc::Status status = methods->GetSendStatus();
      if (unparsed_ && status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        // gRPC (1.51) answers a request body that does not parse as the method's message with
        // UNIMPLEMENTED and no message: say what it was.
        std::string type = RequestTypeOf(method_->service, method_->method);
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "request: not a valid " + (type.empty() ? "request" : type) +
                                  " message (the body does not parse as protobuf)");
        methods->ModifySendStatus(status);
      }
      Report(status);
    }
    methods->Proceed();
  }

 private:
  void Report(const grpc::Status& status) {
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    // A call the client cancelled (a health Watch it stopped) may end with the handler's UNKNOWN:
    // count it as what it was. IsCancelled is safe here: every service is sync or callback.
    grpc::StatusCode counted = status.error_code();
    if (counted == grpc::StatusCode::UNKNOWN && ctx_ != nullptr && ctx_->IsCancelled())
      counted = grpc::StatusCode::CANCELLED;
    if (counted < 0 || counted >= RpcInterceptorFactory::kCodes)
      counted = grpc::StatusCode::UNKNOWN;
    if (recorder_ != nullptr) {
      std::atomic<RpcRecorder::Series*>& kept = method_->series[counted];
      RpcRecorder::Series* series = kept.load(std::memory_order_acquire);
      if (series == nullptr) {
        // Any thread may resolve it first: the recorder returns the same series to each.
        series = recorder_->SeriesOf(method_->service, method_->method, counted);
        kept.store(series, std::memory_order_release);
      }
      series->Done(seconds);
    }
    RpcNote note = notes_ != nullptr ? notes_->Take(ctx_) : RpcNote();
    const spdlog::level::level_enum level =
        method_->transposer && !note.routine ? spdlog::level::info : spdlog::level::debug;
    if (!spdlog::should_log(level)) return;
    if (!note.text.empty()) note.text += " ";
    std::string code = GrpcCodeName(status.error_code());
    if (!status.ok()) code += ": " + status.error_message();
    spdlog::log(level, "rpc={} {}latency_ms={:.3f} status={}", method_->shown, note.text,
                seconds * 1e3, code);
  }

  const grpc::ServerContextBase* const ctx_;
  RpcNotes* const notes_;
  RpcRecorder* const recorder_;
  const Clock::time_point start_;
  Method* method_;                // the factory's, or own_
  std::unique_ptr<Method> own_;   // a method the factory does not keep
  bool reported_ = false;  // interceptor methods of one call are never run concurrently
  bool unparsed_ = false;  // the request body did not parse
};

}  // namespace

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

void RpcNotes::Note(const grpc::ServerContextBase* ctx, RpcNote note) {
  MutexLock l(&mu_);
  notes_[ctx] = std::move(note);
}

RpcNote RpcNotes::Take(const grpc::ServerContextBase* ctx) {
  MutexLock l(&mu_);
  auto it = notes_.find(ctx);
  if (it == notes_.end()) return {};
  RpcNote note = std::move(it->second);
  notes_.erase(it);
  return note;
}

RpcInterceptorFactory::Method::Method(std::string_view full) {
  // "/transposed.v1.Transposer/GetConfig" -> service, method.
  const auto slash = full.rfind('/');
  if (slash != std::string_view::npos && slash > 0) {
    const size_t from = full[0] == '/' ? 1 : 0;
    service = std::string(full.substr(from, slash - from));
    method = std::string(full.substr(slash + 1));
  } else {
    method = std::string(full);
  }
  transposer = service == kTransposer;
  shown = transposer ? method : service + "/" + method;
}

RpcInterceptorFactory::Method* RpcInterceptorFactory::Kept(std::string_view full) {
  MutexLock l(&mu_);
  if (auto it = methods_.find(full); it != methods_.end()) return it->second.get();
  if (methods_.size() >= kMaxMethods) return nullptr;
  return methods_.emplace(std::string(full), std::make_unique<Method>(full)).first->second.get();
}

grpc::experimental::Interceptor* RpcInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const char* full = info->method() != nullptr ? info->method() : "";
  return new RpcInterceptor(info, Kept(full), notes_, recorder_);
}

}  // namespace transposed
