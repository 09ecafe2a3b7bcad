// Conversions between core::Problem and the API's transposed.v1.Problem, shared by the daemon
// and the client so that both read and write a problem the same way.
//
// Parsing validates what the proto cannot express (dtype names, an optional batch) and names the
// offending field as the API spells it (`problem.dtype`); range checks of the sizes themselves
// are ValidateProblem's job. Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/problem.h"
#include "core/status.h"
#include "transposed/v1/transposed.pb.h"

namespace transposed {

// The most problems one TuneMany call takes (TuneManyRequest.problems); the daemon refuses more
// (INVALID_ARGUMENT "problems: ..."), transposectl sends longer lists in calls of this many.
inline constexpr int kMaxTuneManyProblems = 256;

// "f16, bf16, f32, ..." (every DTypeName).
std::string DTypeNameList();
// Parses a dtype name for the request field `field` ("problem.dtype", "filter.dtype"):
// INVALID_ARGUMENT "<field>: required ..." when empty, "<field>: too long ..." over
// kMaxFieldBytes, "<field>: unknown element type 'x' (expected one of f16, bf16, ...)" when
// unknown (the name quoted and escaped by Quote()).
StatusOr<DType> ParseDTypeField(const std::string& name, const std::string& field);
// proto Problem -> core Problem: strings longer than kMaxFieldBytes (core/text.h) ->
// INVALID_ARGUMENT naming the field (dtype, device.uuid); batch unset -> 1, set to <= 0 -> INVALID_ARGUMENT
// "problem.batch: ..."; negative leading dimensions -> "problem.ld_in/ld_out: ..."; an exactness
// outside the enum -> "problem.exactness: ..." (`field` names the message in errors: "problem",
// or "problems[3]" for an element of a repeated field). EXACTNESS_VALUE of a dtype without value-exact
// members (ValueExactMatters) reads as kBit: the same problem, one cache entry. The device
// selector is not part of the core problem.
StatusOr<Problem> ProblemFromProto(const v1::Problem& p, const std::string& field = "problem");
// core Problem -> proto Problem (batch always set; exactness normalized; device selector left
// unset).
v1::Problem ProblemToProto(const Problem& p);

}  // namespace transposed
