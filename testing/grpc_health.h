// HealthCheck: the standard gRPC health service's Check (grpc.health.v1.Health) for tests, through
// a generic stub with hand-encoded messages: Debian ships no generated health stubs.
// Thread-safe (no state).
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

namespace transposed::testing {

// Check for `service` ("": the server as a whole) at `address` (plaintext). On OK, *response
// holds the HealthCheckResponse's bytes: kServing or kNotServing.
grpc::Status HealthCheck(const std::string& address, const std::string& service,
                         std::string* response);
inline const std::string kServing("\x08\x01", 2);     // field 1, varint 1: SERVING
inline const std::string kNotServing("\x08\x02", 2);  // NOT_SERVING

}  // namespace transposed::testing
