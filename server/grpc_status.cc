#include "server/grpc_status.h"

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
};

}  // namespace

grpc::StatusCode ToGrpcCode(StatusCode code) {
  for (const auto& c : kCodes)
    if (c.core == code) return c.grpc;
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(status.code()), status.message());
}

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return Status::OK();
  for (const auto& c : kCodes)
    if (c.grpc == status.error_code()) return Status(c.core, status.error_message());
  return Status(StatusCode::kUnknown, status.error_message());
}

}  // namespace transposed
