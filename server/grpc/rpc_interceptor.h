// The daemon's one server interceptor: per-RPC logging, latency and status counting, for every
// RPC of every service on the server (Transposer, health, reflection).
//
// When a call sends its status, the interceptor logs one line
//   rpc=<Method> <note> latency_ms=<x> status=OK|<CODE: message>
// (info for transposed.v1.Transposer, debug for the others and for a Transposer call its handler
// noted as routine: a cache hit, the bulk of the traffic, counted in the metrics) and counts the
// call's (service, method, code) and seconds in an RpcRecorder (the metrics). Handlers add what
// only they know (the problem, the device, where the answer came from) to the line with
// RpcNotes::Note before they finish; the note is keyed by the call's context and dropped when the
// call ends.
//
// Per call it builds no string unless a line is logged: each method's names are split once (at
// most kMaxMethods of them kept; a client may name methods that do not exist) and each
// (method, code) resolves its RpcRecorder series once (prometheus-cpp's label lookup is a map of
// label sets under a lock).
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

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/mutex.h"
#include "core/thread_annotations.h"

namespace transposed {

// The name of a gRPC status code: "OK", "DEADLINE_EXCEEDED"...
const char* GrpcCodeName(grpc::StatusCode code);

// Where finished RPCs are counted (server/daemon/metrics.h).
class RpcRecorder {
 public:
  // The counters of one (service, method, code).
  class Series {
   public:
    virtual ~Series() = default;
    // A finished call: wall time from its start until its status was sent. Thread-safe.
    virtual void Done(double seconds) = 0;
  };
  virtual ~RpcRecorder() = default;
  // The series of `service` "transposed.v1.Transposer", `method` "GetConfig", `code`; valid for
  // the recorder's life (the interceptor keeps it).
  virtual Series* SeriesOf(const std::string& service, const std::string& method,
                           grpc::StatusCode code) = 0;
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
  // Distinct method names whose split names and series are kept; a call of any other method
  // splits its name and resolves its series itself.
  static constexpr size_t kMaxMethods = 64;
  // grpc::StatusCode 0..16.
  static constexpr int kCodes = 17;

  // What the interceptor keeps of one method ("/transposed.v1.Transposer/GetConfig").
  struct Method {
    explicit Method(std::string_view full);
    std::string service;  // "transposed.v1.Transposer"
    std::string method;   // "GetConfig"
    std::string shown;    // in the log line: "GetConfig", or "grpc.health.v1.Health/Check"
    bool transposer;      // of transposed.v1.Transposer: its line at info
    // SeriesOf(service, method, code), resolved on first use.
    std::array<std::atomic<RpcRecorder::Series*>, kCodes> series{};
  };

  // Either may be null (no notes / no metrics).
  RpcInterceptorFactory(RpcNotes* notes, RpcRecorder* recorder)
      : notes_(notes), recorder_(recorder) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  // The kept Method of `full`; null when kMaxMethods are kept and it is not one of them.
  Method* Kept(std::string_view full) EXCLUDES(mu_);

  RpcNotes* const notes_;
  RpcRecorder* const recorder_;
  Mutex mu_;
  std::map<std::string, std::unique_ptr<Method>, std::less<>> methods_ GUARDED_BY(mu_);
};

}  // namespace transposed
