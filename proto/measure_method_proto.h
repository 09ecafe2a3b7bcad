// The one mapping between core MeasureMethod (core/measurement.h) and the API's
// transposed.v1.MeasureMethod. The daemon's API (server/grpc/convert.cc) and the worker protocol
// (tuner/worker/codec.cc, whose Measurement carries the same message) both use it; it lives in
// transposed_proto_messages, protobuf only, so the worker links no gRPC.
//
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/measurement.h"
#include "core/status.h"
#include "transposed/v1/transposed.pb.h"

namespace transposed {

void MeasureMethodToProto(const MeasureMethod& in, v1::MeasureMethod* out);
// Bounded: timer and op at most 64 bytes, at most 16 alternatives_median_s with keys of at most
// 64 bytes; else INVALID_ARGUMENT naming the field under `field` ("answer.measurement.method.op").
StatusOr<MeasureMethod> MeasureMethodFromProto(const std::string& field,
                                               const v1::MeasureMethod& in);

}  // namespace transposed
