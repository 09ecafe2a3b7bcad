// gRPC server reflection v1 (grpc.reflection.v1.ServerReflection), served from the project's own
// copy of its service definition (proto/grpc/reflection/v1/reflection.proto): grpcurl and other
// reflection clients ask v1 first, and Debian 12's gRPC (1.51) serves only v1alpha (which the
// daemon serves too, through gRPC's plugin). Answers from protobuf's generated descriptor pool:
// list_services (the services the daemon names), file_by_filename, file_containing_symbol and
// file_containing_extension (the file, then the files it imports that the stream has not sent
// yet), all_extension_numbers_of_type; anything not in the pool is an error_response NOT_FOUND.
//
// Thread-safety: each call's stream has its own state; the descriptor pool is thread-safe.
#pragma once

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace transposed {

class ReflectionV1 final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the fully qualified names list_services answers with.
  explicit ReflectionV1(std::vector<std::string> services);

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace transposed
