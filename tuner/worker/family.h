// CandidateFamily: the candidates a worker's engine offers, described once, so that the daemon
// lists a problem's candidates in its own process.
//
// A worker describes its family in its describe answer (worker.proto CandidateFamily), once at
// start. FamilyCandidates turns that description and a problem into the problem's candidates;
// the worker answers a candidates request with it, and the daemon's WorkerBackend computes the
// same list itself, without a round trip to the worker (a request to the worker queues behind
// the measurement it is running, so a lookup that asked the worker would wait behind a tune).
// The description is generic, not a list of engines:
//   kernels_library_version  non-empty: the kernels/ family (kernels::CandidateConfigs(p)) as
//                            built at that kernel library version; the daemon computes it only
//                            when that is its own version (kLibraryVersion), else it asks the
//                            worker (once per problem, CandidatesHere below says which);
//   vendor_available         the vendor members of that family (kernels::AlgorithmName:
//                            "cublas.geam", "cutensor.permute") whose library loads in the worker;
//                            the others are left out;
//   fixed                    members offered for every valid problem after the family's, in
//                            order; one whose params set canonicalizes_nan = 1 (it may replace a
//                            NaN's payload) only for problems that ask for value-exact answers,
//                            as the family's vendor members.
// Plain values and functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "core/tune_result.h"

namespace transposed::worker {

struct CandidateFamily {
  std::string kernels_library_version;
  std::vector<std::string> vendor_available;
  std::vector<Candidate> fixed;
};

// The candidates of `p`, in a deterministic order: the kernels family's (less the vendor members
// not available), then the fixed members. Empty for an invalid problem (ValidateProblem).
std::vector<Candidate> FamilyCandidates(const CandidateFamily& family, const Problem& p);

// Whether this process computes `family` exactly as the worker does: no kernels family, or the
// kernels family of this build's kernel library version.
bool CandidatesHere(const CandidateFamily& family);

}  // namespace transposed::worker
