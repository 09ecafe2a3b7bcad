// Vendor members of the family: cuBLAS geam (op(A) = A^T, alpha 1, beta 0) and cuTENSOR's
// permutation (B = 1 * A with the modes of A permuted; kernels/vendor_layout.h) as transposes,
// loaded at run time with dlopen so that a node without libcublas / libcutensor still builds and
// runs (the member is then simply not available: VendorAvailable() in launch.h).
//
// Internal to kernels/. Thread-safe: each library is loaded once (function-local static); a
// mutex guards each device's cuBLAS handle, whose stream is set per call, and each device's
// cuTENSOR handle with its cache of plans (one per problem and pointer alignment, at most
// kCutensorMaxPlans, then the cache is emptied).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "transposed/kernels/launch.h"

namespace transposed::kernels::internal {

// cublasSgeam / Dgeam by element size (4 / 8 bytes; CheckConfig allows f32 and f64 only) on the
// current device.
// FAILED_PRECONDITION when libcublas is not present, INTERNAL with the cuBLAS status when the
// call fails. CheckConfig has already bounded the problem (one matrix, int dimensions).
Status LaunchCublasGeam(const Problem& p, const void* in, void* out, cudaStream_t s,
                        const LaunchOptions& o);

// Whether libcublas was found and has the symbols geam needs (loads it on the first call).
bool CublasLoaded();
// "cuBLAS 13.1.0 (libcublas.so.13)", or why it is not available.
std::string CublasDescription();

// cutensorPermute with alpha 1 on the current device, on the layout CutensorLayoutFor(p) gives
// (CheckConfig has accepted it: f32 or f64, any batch and leading dimensions). The plan for the
// problem and the pointers' alignment is made on the first call and cached.
// FAILED_PRECONDITION when libcutensor is not loaded, INTERNAL with cuTENSOR's error string when
// a call fails.
Status LaunchCutensorPermute(const Problem& p, const void* in, void* out, cudaStream_t s,
                             const LaunchOptions& o);

// Whether a libcutensor of the 2.x API (cutensorGetVersion() >= 20000) was found with every
// symbol the permutation needs (loads it on the first call).
bool CutensorLoaded();
// "cuTENSOR 2.3.1 (libcutensor.so.2)", or why it is not available.
std::string CutensorDescription();

// The loader itself, for tests: tries `sonames` in order and reports what it found, never
// keeping the library open. `loaded` as CutensorLoaded; `description` as CutensorDescription.
struct CutensorProbe {
  bool loaded = false;
  std::string description;
};
CutensorProbe ProbeCutensor(const std::vector<std::string>& sonames);
// Why a cutensorGetVersion() value is refused ("" when it is 2.x or newer): the 1.x API has
// other signatures for the same names.
std::string CutensorVersionRefusal(size_t version);
// "2.5.0" from 20500.
std::string CutensorVersionString(size_t version);

inline constexpr size_t kCutensorMaxPlans = 64;

}  // namespace transposed::kernels::internal
