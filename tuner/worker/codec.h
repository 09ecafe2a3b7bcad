// The one mapping between the domain model (core/) and the worker protocol's messages
// (worker.proto). The From* functions return INVALID_ARGUMENT naming the bad field.
// Plain functions; thread-safe.
#pragma once

#include "core/device.h"
#include "core/measurement.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/time_breakdown.h"
#include "core/tune_result.h"
#include "tuner/worker/worker.pb.h"

namespace transposed::worker {

void ToProto(const Problem& in, pb::Problem* out);
StatusOr<Problem> FromProto(const pb::Problem& in);

void ToProto(const Candidate& in, pb::Candidate* out);
Candidate FromProto(const pb::Candidate& in);

void ToProto(const MeasureOptions& in, pb::MeasureOptions* out);
// INVALID_ARGUMENT when out of range (warmup < 0, min_samples < 1, max_samples < min_samples,
// min_seconds < 0).
StatusOr<MeasureOptions> FromProto(const pb::MeasureOptions& in);

// The method through the one MeasureMethod mapping (proto/measure_method_proto.h), bounded:
// INVALID_ARGUMENT naming "measurement.method.<field>".
void ToProto(const Measurement& in, pb::Measurement* out);
StatusOr<Measurement> FromProto(const pb::Measurement& in);

// Appends every phase of `in` to out->phases().
void ToProto(const TimeBreakdown& in, pb::Response* out);
TimeBreakdown PhasesFromProto(const pb::Response& in);

void ToProto(const DeviceInfo& in, pb::Device* out);
DeviceInfo FromProto(const pb::Device& in);

// An error response carrying `s` (not OK); fatal: the engine is broken and the worker exits.
pb::Response ErrorResponse(const Status& s, bool fatal = false);
// The Status of an Error message (unknown codes become UNKNOWN).
Status ErrorStatus(const pb::Error& e);

}  // namespace transposed::worker
