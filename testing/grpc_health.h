// HealthCheck: one blocking call of the standard gRPC health service
// (grpc.health.v1.Health/Check), for tests and benchmarks that drive a real daemon.
//
// Debian ships no generated health stubs, so the messages are encoded by hand and the call goes
// through gRPC's blocking unary call on raw bytes, the same call generated blocking stubs make,
// so a health check and a Transposer call made this way cost the client the same (bench/hit_bench
// compares them). HealthCheckRequest{service} is field 1, length-delimited; the answer kServing
// (field 1, varint 1) is SERVING, kNotServing NOT_SERVING.
//
// Thread-safety: plain functions; channels are thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace transposed::testing {

inline const std::string kServing("\x08\x01", 2);     // field 1, varint 1: SERVING
inline const std::string kNotServing("\x08\x02", 2);  // NOT_SERVING

// Check for `service` ("": the server as a whole) on `channel`. On OK, *response holds the
// HealthCheckResponse's bytes: kServing or kNotServing.
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         std::string* response,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The same at `address`, on a new plaintext channel.
grpc::Status HealthCheck(const std::string& address, const std::string& service,
                         std::string* response);

}  // namespace transposed::testing
