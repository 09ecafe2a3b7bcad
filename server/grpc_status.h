// The one place where a transposed::Status becomes a grpc::Status.
//
// transposed::StatusCode mirrors the canonical gRPC codes, so the conversion is a table: each core
// code maps to the gRPC code of the same name, and the message is kept verbatim. Pure functions;
// thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include "core/status.h"

namespace transposed {

// The gRPC code of the same name as `code` (UNKNOWN for anything unmapped).
grpc::StatusCode ToGrpcCode(StatusCode code);
// A grpc::Status with the mapped code and the same message (OK for OK).
grpc::Status ToGrpcStatus(const Status& status);
// The reverse, for clients and tests: codes we do not use become kUnknown.
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace transposed
