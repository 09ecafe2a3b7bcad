#include "testing/grpc_health.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <future>
#include <vector>

namespace transposed::testing {

grpc::Status HealthCheck(const std::string& address, const std::string& service,
                         std::string* response) {
  // HealthCheckRequest{service}: field 1, length-delimited (a one-byte length); "" encodes to no
  // bytes.
  if (service.size() >= 128) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too long");
  std::string encoded;
  if (!service.empty())
    encoded = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &reply,
                 [&done](grpc::Status st) { done.set_value(std::move(st)); });
  const grpc::Status status = done.get_future().get();
  response->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && !reply.Dump(&slices).ok())
    return grpc::Status(grpc::StatusCode::INTERNAL, "unreadable health response");
  for (const auto& sl : slices)
    response->append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return status;
}

}  // namespace transposed::testing
