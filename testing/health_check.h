// HealthCheck: one blocking call of the standard gRPC health service (grpc.health.v1.Health/Check)
// on a channel, for tests and benchmarks that drive a real daemon.
//
// Debian ships no generated health stubs, so the messages are encoded by hand and the call goes
// through gRPC's blocking unary call on raw bytes, the same call generated blocking stubs make,
// so a health check and a Transposer call made this way cost the client the same.
// HealthCheckRequest{service} is field 1, length-delimited; the answer "\x08\x01" (field 1,
// varint 1) is SERVING, "\x08\x02" NOT_SERVING. Header-only; link gRPC::grpc++.
// Thread-safety: a plain function; channels are thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>

#include <chrono>
#include <string>
#include <vector>

namespace transposed::testing {

inline constexpr char kServing[] = "\x08\x01";

// Calls Check for `service` ("": the server as a whole). On OK, *response holds the answer's
// bytes (kServing for SERVING).
inline grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service, std::string* response,
                                std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (service.size() >= 128) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too long");
  std::string encoded;
  if (!service.empty()) encoded = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  static const grpc::internal::RpcMethod kCheck("/grpc.health.v1.Health/Check",
                                                grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), kCheck, &ctx, request, &reply);
  response->clear();
  if (!status.ok()) return status;
  std::vector<grpc::Slice> slices;
  if (!reply.Dump(&slices).ok())
    return grpc::Status(grpc::StatusCode::INTERNAL, "unreadable health response");
  for (const auto& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  return status;
}

}  // namespace transposed::testing
