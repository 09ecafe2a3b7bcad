#include "proto/grpc_status.h"

namespace transposed {
namespace {

struct CodePair {
  StatusCode core;
  grpc::StatusCode grpc;
};

constexpr CodePair kCodes[] = {
    {StatusCode::kOk, grpc::StatusCode::OK},
    {StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
    {StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
    {StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
    {StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
    {StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
    {StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
    {StatusCode::kAborted, grpc::StatusCode::ABORTED},
    {StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
    {StatusCode::kInternal, grpc::StatusCode::INTERNAL},
    {StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
    {StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
    {StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
};

// A status message travels in the grpc-message trailer, whose size gRPC limits (8 KiB of metadata
// by default; more breaks the call with RESOURCE_EXHAUSTED). Messages quote request values only
// through Quote(), but whatever builds one, it is cut here.
constexpr size_t kMaxMessageBytes = 1024;

}  // namespace

grpc::StatusCode ToGrpcCode(StatusCode code) {
  for (const auto& c : kCodes)
    if (c.core == code) return c.grpc;
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  if (status.message().size() > kMaxMessageBytes) {
    return grpc::Status(ToGrpcCode(status.code()),
                        status.message().substr(0, kMaxMessageBytes) + "... (message cut, " +
                            std::to_string(status.message().size()) + " bytes)");
  }
  return grpc::Status(ToGrpcCode(status.code()), status.message());
}

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return Status::OK();
  const std::string& m = status.error_message();
  for (const auto& c : kCodes)
    if (c.grpc == status.error_code()) return Status(c.core, m);
  switch (status.error_code()) {
    case grpc::StatusCode::OUT_OF_RANGE:
      return Status::InvalidArgument("OUT_OF_RANGE: " + m);
    case grpc::StatusCode::DATA_LOSS:
      return Status::Internal("DATA_LOSS: " + m);
    default:
      return Status(StatusCode::kUnknown,
                    "gRPC code " + std::to_string(static_cast<int>(status.error_code())) + ": " + m);
  }
}

}  // namespace transposed
