// The CUDA family's members as the rest of the system meets them: by name (the identity a
// database stores), by a candidate's parameter map (TransposeConfig::Params, the map a worker
// reports and a daemon answers with), and by algorithm.
//
// A member has one owner, its row in the family table (kernels/policy.h, plus the retired rows
// whose names databases may still hold, kernels/family_retired.h). Names and parameter maps are
// printed from the row and looked up, never parsed by a grammar of their own; a row's validity
// is decided once, by the table's compile-time check (Policy::Invalid). Callers outside kernels/
// that need to know what a candidate runs (server/answer_now.cc) ask here instead of re-declaring
// the algorithm numbers. Design and the reasons for each row: docs/design/kernel-family.md.
//
// Pure host C++ (no CUDA). The lookup tables are built once (function-local statics); every
// function is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "transposed/kernels/config.h"

namespace transposed::kernels {

// The member of the family (any element size) or retired row printed as `name`; nullopt for a
// name no row prints.
std::optional<TransposeConfig> FindMember(std::string_view name);

// The member whose Params() agree with every key of `params`; nullopt when none or several do,
// or when `params` holds a key Params() never prints (a CPU candidate's, a fake's).
std::optional<TransposeConfig> MemberOfParams(const std::map<std::string, int64_t>& params);

// The algorithm a candidate's parameter map runs, when it is a member of this family.
inline std::optional<Algorithm> FamilyAlgorithm(const std::map<std::string, int64_t>& params) {
  const std::optional<TransposeConfig> c = MemberOfParams(params);
  return c ? std::optional<Algorithm>(c->algorithm) : std::nullopt;
}

// Whether `c` names a row that left the family (resolvable, never run).
bool IsRetired(const TransposeConfig& c);

}  // namespace transposed::kernels
