// The daemon's one server interceptor: per-RPC logging, latency and status counting, for every
// RPC of every service on the server (Transposer, health, reflection).
//
// When a call sends its status, the interceptor logs one line
//   rpc=<Method> <note> latency_ms=<x> status=OK|<CODE: message>
// (info for transposed.v1.Transposer, debug for the others and for a Transposer call its handler
// noted as routine: a cache hit, the bulk of the traffic, counted in the metrics) and reports (service, method, code,
// seconds) to an RpcRecorder (the metrics). Handlers add what only they know (the problem, the
// device, where the answer came from) to the line with RpcNotes::Note before they finish; the
// note is keyed by the call's context and dropped when the call ends.
//
// A request body that does not parse as the method's message is answered INVALID_ARGUMENT
// "request: not a valid transposed.v1.GetConfigRequest message ..." (gRPC 1.51 itself sends
// UNIMPLEMENTED without a message).
//
// Thread-safety: RpcNotes and the factory may be used from any number of threads at once; an
// RpcRecorder must be thread-safe. Both must outlive the server.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <string>
#include <unordered_map>

#include "core/mutex.h"
#include "core/thread_annotations.h"

namespace transposed {

// The name of a gRPC status code: "OK", "DEADLINE_EXCEEDED"...
const char* GrpcCodeName(grpc::StatusCode code);

// Where finished RPCs are counted (server/daemon/metrics.h).
class RpcRecorder {
 public:
  virtual ~RpcRecorder() = default;
  // `service` "transposed.v1.Transposer", `method` "GetConfig"; wall time from the call's start
  // until its status was sent.
  virtual void OnRpcDone(const std::string& service, const std::string& method,
                         grpc::StatusCode code, double seconds) = 0;
};

// A handler's note for the log line of its call; `routine` logs the line at debug.
struct RpcNote {
  std::string text;
  bool routine = false;
};

// The handlers' notes for the log line of their call.
class RpcNotes {
 public:
  // Sets the note of the call whose context is `ctx` ("problem=64x64 f32 device=0 source=cache").
  void Note(const grpc::ServerContextBase* ctx, RpcNote note) EXCLUDES(mu_);
  // Takes the note (empty if none).
  RpcNote Take(const grpc::ServerContextBase* ctx) EXCLUDES(mu_);

 private:
  Mutex mu_;
  std::unordered_map<const grpc::ServerContextBase*, RpcNote> notes_ GUARDED_BY(mu_);
};

class RpcInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // Either may be null (no notes / no metrics).
  RpcInterceptorFactory(RpcNotes* notes, RpcRecorder* recorder)
      : notes_(notes), recorder_(recorder) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  RpcNotes* const notes_;
  RpcRecorder* const recorder_;
};

}  // namespace transposed
