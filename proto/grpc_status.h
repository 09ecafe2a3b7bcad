// The one place where transposed::Status and grpc::Status meet, for the daemon (ToGrpcStatus)
// and the client (FromGrpcStatus).
//
// transposed::StatusCode mirrors the canonical gRPC codes, so the conversion is a table: each core
// code maps to the gRPC code of the same name, and the message is kept verbatim. gRPC codes the
// core does not use map to the closest core code, the gRPC code's name prefixed to the message.
// Pure functions; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include "core/status.h"

namespace transposed {

// The gRPC code of the same name as `code` (UNKNOWN for anything unmapped).
grpc::StatusCode ToGrpcCode(StatusCode code);
// A grpc::Status with the mapped code and the same message (OK for OK).
grpc::Status ToGrpcStatus(const Status& status);
// The reverse, for clients: OUT_OF_RANGE -> kInvalidArgument, DATA_LOSS -> kInternal, each
// message prefixed with the gRPC code's name; anything else unknown -> kUnknown. A message longer
// than 1 KiB is cut (it travels in a size-limited trailer).
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace transposed
