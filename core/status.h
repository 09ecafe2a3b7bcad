// Status and StatusOr: the one error type of transposed's core.
//
// Every library function that can fail returns a Status (or a StatusOr<T>); nothing in the core
// throws across an API boundary or aborts. The daemon converts a Status to grpc::Status in exactly
// one place (proto/grpc_status.cc). Status values are immutable and safe to copy between threads.
//
// Ours, not absl::Status: the installed core headers and libtransposed_launch.so (which users
// link from C++ and Python) must not need Abseil (docs/design/architecture.md, "Abseil").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace transposed {

// The codes mirror the gRPC canonical codes we use, so the conversion is a table lookup.
enum class StatusCode {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kUnauthenticated = 16,
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: rows: must be positive, got 0" (or "OK").
  std::string ToString() const;

  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class StatusOr {
 public:
  StatusOr(Status s) : v_(std::move(s)) {}  // NOLINT: implicit by design, like absl::StatusOr
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace transposed

#define TR_CONCAT_INNER_(a, b) a##b
#define TR_CONCAT_(a, b) TR_CONCAT_INNER_(a, b)

// Returns from the calling function if `expr` yields a non-OK Status.
#define TR_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    ::transposed::Status tr_status_ = (expr);        \
    if (!tr_status_.ok()) return tr_status_;         \
  } while (0)

// TR_ASSIGN_OR_RETURN(auto x, F()): assigns the value or returns the error.
#define TR_ASSIGN_OR_RETURN(lhs, expr) TR_ASSIGN_OR_RETURN_IMPL_(TR_CONCAT_(tr_sor_, __LINE__), lhs, expr)
#define TR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
