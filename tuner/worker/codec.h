// The mapping between the domain model (core/) and what only the worker protocol carries
// (worker.proto: MeasureOptions, PhaseTime, Error). Problem, Candidate, Measurement and
// DeviceInfo travel as the public API's messages, through its one mapping of each
// (proto/problem_proto.h, proto/domain_proto.h), included here for both ends. The From*
// functions return INVALID_ARGUMENT naming the bad field. Plain functions; thread-safe.
#pragma once

#include "core/measurement.h"
#include "core/status.h"
#include "core/time_breakdown.h"
#include "tuner/worker/family.h"
#include "proto/domain_proto.h"   // DeviceToProto/FromProto, Variant..., Measurement...
#include "proto/problem_proto.h"  // ProblemToProto, ProblemFromProto
#include "tuner/worker/worker.pb.h"

namespace transposed::worker {

void ToProto(const MeasureOptions& in, pb::MeasureOptions* out);
// INVALID_ARGUMENT when out of range (warmup < 0, min_samples < 1, max_samples < min_samples,
// min_seconds < 0, placements outside 1..kMaxPlacements, cutoff_s < 0 or not finite).
StatusOr<MeasureOptions> FromProto(const pb::MeasureOptions& in);

// Appends every phase of `in` to out->phases().
void ToProto(const TimeBreakdown& in, pb::Response* out);
TimeBreakdown PhasesFromProto(const pb::Response& in);

void ToProto(const CandidateFamily& in, pb::CandidateFamily* out);
// INVALID_ARGUMENT "<field>.fixed[2]...: ..." for a fixed member that is not a valid variant.
StatusOr<CandidateFamily> FromProto(const std::string& field, const pb::CandidateFamily& in);

// An error response carrying `s` (not OK); fatal: the engine is broken and the worker exits.
pb::Response ErrorResponse(const Status& s, bool fatal = false);
// The Status of an Error message (unknown codes become UNKNOWN).
Status ErrorStatus(const pb::Error& e);

}  // namespace transposed::worker
