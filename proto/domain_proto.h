// The one mapping between the core types that cross a process boundary (DeviceInfo, Candidate,
// Measurement; core/) and the API's messages (transposed.v1.Device, Variant, Measurement). The
// daemon's API (server/grpc/convert.cc: answers, export and import) and the worker protocol
// (tuner/worker/worker.proto, which carries these same messages) both use it; it lives in
// transposed_proto_messages, protobuf only, so the worker links no gRPC. Problem and
// MeasureMethod have their own files (proto/problem_proto.h, proto/measure_method_proto.h).
//
// The From* functions read untrusted input (an imported row, a worker's reply): every string and
// list is bounded and every error is INVALID_ARGUMENT naming the field under `field`
// ("measured_on.uuid", "candidates[3].measurement.median_s"). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/measurement.h"
#include "core/status.h"
#include "core/tune_result.h"
#include "transposed/v1/transposed.pb.h"

namespace transposed {

// Every field, the fingerprint and the device class included.
v1::Device DeviceToProto(const DeviceInfo& d);
// backend, uuid, name and library_version must be non-empty; at most 64 attributes; strings at
// most kMaxFieldBytes (core/text.h); a device_class, when set, must be the class of the device
// described. The index is not read (it numbers the sender's devices, not the receiver's): the
// result keeps DeviceInfo's default, for the caller to set.
StatusOr<DeviceInfo> DeviceFromProto(const std::string& field, const v1::Device& d);

// backend: the device's backend, or empty where the receiver knows it (the worker protocol).
v1::Variant VariantToProto(const Candidate& c, const std::string& backend);
// A non-empty name, at most 64 parameters, strings bounded; the backend is not read.
StatusOr<Candidate> VariantFromProto(const std::string& field, const v1::Variant& v);

// gbps = EffectiveGBps(problem_bytes, median_s) (0 where problem_bytes is 0: a receiver that
// does not read it, like the worker protocol's).
v1::Measurement MeasurementToProto(const Measurement& m, int64_t problem_bytes);
// Times finite, in [0, 86400] s (valid: in (0, 86400] with min_s <= median_s <= max_s and
// 1..10^7 samples); warmup in 0..10^6; error at most 4096 bytes; the method bounded
// (MeasureMethodFromProto). must_be_valid: an invalid measurement is refused (".valid").
// rel_spread and gbps are derived, not read.
StatusOr<Measurement> MeasurementFromProto(const std::string& field, const v1::Measurement& m,
                                           bool must_be_valid);
// A finite, non-negative number of seconds, at most a day (nothing measured here takes longer);
// positive: also > 0. Else INVALID_ARGUMENT "<field>: must be a finite number of seconds in ...".
Status CheckSeconds(const std::string& field, double v, bool positive);

}  // namespace transposed
