// Conversions between the gRPC API's messages (transposed/v1/transposed.proto) and core types.
//
// Parsing from proto validates what the proto cannot express (dtype names, optional batch) and
// names the offending field as the API spells it (`problem.dtype`, `filter.dtype`); range checks
// of the sizes themselves are ValidateProblem's job, done by the service. Pure functions;
// thread-safe.
#pragma once

#include "core/device.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/tune_result.h"
#include "proto/domain_proto.h"  // Device, Variant, Measurement <-> proto
#include "proto/measure_method_proto.h"  // MeasureMethodToProto, MeasureMethodFromProto
#include "proto/problem_proto.h"  // ProblemFromProto, ProblemToProto, ParseDTypeField
#include "server/service.h"
#include "store/store.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {

namespace pb = ::transposed::v1;

// The problem's device selector (unset oneof -> neither index nor uuid: device 0).
DeviceRef DeviceRefFromProto(const pb::DeviceSelector& s);

pb::CandidateResult CandidateResultToProto(const CandidateResult& r, const std::string& backend,
                                           int64_t problem_bytes);
// Answer from a tune result: ratio = gbps / ceiling_gbps (0 without a ceiling), rel_spread of the
// winner, counts, tune_seconds, tuned_at, device (with its index and fingerprint).
// measured_on: the instance the result was measured on when it is not r.device (the device
// answered for); origin from r.origin.
pb::Answer AnswerToProto(const TuneResult& r, AnswerSource source,
                         const DeviceInfo* measured_on = nullptr);
// The same, written into *out (cleared first), with the device and measured_on messages given
// (DeviceToProto of r.device and of the instance; a cache hit's are the daemon's own devices,
// converted once).
void AnswerToProto(const TuneResult& r, AnswerSource source, const pb::Device& device,
                   const pb::Device& measured_on, pb::Answer* out);
pb::Origin OriginToProto(Origin o);

// A stored result as a line of `transposectl export` / a row of ImportEntries: the instance it
// was measured on, the winner, every candidate.
pb::ExportedEntry ExportedEntryToProto(const TuneResult& r);
// Validates every field of a row (INVALID_ARGUMENT naming it, e.g. "answer.measurement.median_s:
// ..."): a described device (its class, when given, must match it), a valid problem, a valid
// winner with sane times and counts, known candidate phases, every string and list bounded.
// The result has origin kImported and device.index -1. The library version is not checked here
// (TransposeService::MergeEntries counts unknown ones).
StatusOr<TuneResult> ExportedEntryFromProto(const pb::ExportedEntry& e);
pb::Source SourceToProto(AnswerSource s);

// GetConfigRequest -> ConfigRequest: the problem (ProblemFromProto), its device, and the policy,
// which must be a known CachePolicy (INVALID_ARGUMENT "policy: unknown CachePolicy 7 ...").
StatusOr<ConfigRequest> ConfigRequestFromProto(const pb::GetConfigRequest& r);
// TuneRequest -> ForcedTuneRequest; budget_seconds must be finite (INVALID_ARGUMENT
// "budget_seconds: must be a finite number ..."); its range is the service's to check.
StatusOr<ForcedTuneRequest> TuneRequestFromProto(const pb::TuneRequest& r);

// EntryFilter -> EntryQuery (the device selector, if set, is resolved by the service).
// INVALID_ARGUMENT "filter.dtype: ..." for an unknown dtype; negative rows/cols/time likewise;
// a string longer than kMaxFieldBytes (core/text.h) names its field.
StatusOr<EntryQuery> EntryQueryFromProto(const pb::EntryFilter& f);

}  // namespace transposed
