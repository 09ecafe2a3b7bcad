#include "tuner/worker/family.h"

#include <algorithm>

#include "core/version.h"
#include "transposed/kernels/config.h"

namespace transposed::worker {

std::vector<Candidate> FamilyCandidates(const CandidateFamily& family, const Problem& p) {
  std::vector<Candidate> out;
  if (!ValidateProblem(p).ok()) return out;
  if (!family.kernels_library_version.empty()) {
    const auto& vendors = family.vendor_available;
    for (const kernels::TransposeConfig& c : kernels::CandidateConfigs(p)) {
      if (c.vendor() && std::find(vendors.begin(), vendors.end(),
                                  std::string(kernels::AlgorithmName(c.algorithm))) ==
                            vendors.end())
        continue;
      out.push_back({c.Name(), c.Params()});
    }
  }
  const bool value_exact = p.Normalized().exactness == Exactness::kValue;
  for (const Candidate& c : family.fixed) {
    auto nan = c.params.find("canonicalizes_nan");
    if (nan != c.params.end() && nan->second != 0 && !value_exact) continue;
    out.push_back(c);
  }
  return out;
}

bool CandidatesHere(const CandidateFamily& family) {
  return family.kernels_library_version.empty() ||
         family.kernels_library_version == kLibraryVersion;
}

}  // namespace transposed::worker
