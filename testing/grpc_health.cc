#include "testing/grpc_health.h"

#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>

#include <vector>

namespace transposed::testing {

grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         std::string* response, std::chrono::milliseconds timeout) {
  response->clear();
  // HealthCheckRequest{service}: field 1, length-delimited (a one-byte length); "" encodes to no
  // bytes.
  if (service.size() >= 128) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too long");
  std::string encoded;
  if (!service.empty())
    encoded = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  static const grpc::internal::RpcMethod kCheck("/grpc.health.v1.Health/Check",
                                                grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), kCheck, &ctx, request, &reply);
  if (!status.ok()) return status;
  std::vector<grpc::Slice> slices;
  if (!reply.Dump(&slices).ok())
    return grpc::Status(grpc::StatusCode::INTERNAL, "unreadable health response");
  for (const auto& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  return status;
}

grpc::Status HealthCheck(const std::string& address, const std::string& service,
                         std::string* response) {
  return HealthCheck(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), service,
                     response);
}

}  // namespace transposed::testing
