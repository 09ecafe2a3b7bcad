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
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "kernels/cutensor_api.h"
#include "kernels/vendor_layout.h"
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

// Whether a libcutensor of the 2.x API (cutensorGetVersion() >= 20200, cutensor_api::kMinVersion) was found with every
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

// The symbols of one opened libcutensor (kernels/cutensor_api.h), or why it cannot be used
// (`loaded` false, `description` says why; `lib` may then still be open).
struct CutensorSymbols {
  void* lib = nullptr;
  bool loaded = false;
  std::string description;
  size_t version = 0;
  cutensor_api::GetErrorStringFn error_string = nullptr;
  cutensor_api::CreateFn create = nullptr;
  cutensor_api::DestroyFn destroy = nullptr;
  cutensor_api::CreateTensorDescriptorFn create_tensor = nullptr;
  cutensor_api::DestroyTensorDescriptorFn destroy_tensor = nullptr;
  cutensor_api::CreatePermutationFn create_permutation = nullptr;
  cutensor_api::DestroyOperationDescriptorFn destroy_operation = nullptr;
  cutensor_api::CreatePlanPreferenceFn create_preference = nullptr;
  cutensor_api::DestroyPlanPreferenceFn destroy_preference = nullptr;
  cutensor_api::CreatePlanFn create_plan = nullptr;
  cutensor_api::DestroyPlanFn destroy_plan = nullptr;
  cutensor_api::PermuteFn permute = nullptr;
  cutensor_api::cutensorComputeDescriptor_t compute_32f = nullptr;
  cutensor_api::cutensorComputeDescriptor_t compute_64f = nullptr;
};
// Opens the first of `sonames` that dlopen finds and resolves every symbol cutensor.permute
// calls, after checking cutensorGetVersion() (CutensorVersionRefusal).
CutensorSymbols LoadCutensor(const std::vector<std::string>& sonames);

// cuTENSOR's permutation on one loaded library: a handle per device and the plans, made on the
// first call for a (device, problem, pointer alignment) and cached (at most kCutensorMaxPlans;
// then the cache is emptied: plans are host objects, a permutation already enqueued keeps its
// own arguments). The process has one, on libcutensor.so.2 (LaunchCutensorPermute); tests make
// others on a fake library. Thread-safe (one mutex around handles, plans and the calls).
class CutensorPermuter {
 public:
  explicit CutensorPermuter(CutensorSymbols s);
  ~CutensorPermuter();  // destroys plans and handles, closes the library
  CutensorPermuter(const CutensorPermuter&) = delete;
  CutensorPermuter& operator=(const CutensorPermuter&) = delete;

  bool loaded() const { return s_.loaded; }
  const std::string& description() const { return s_.description; }
  // cutensorPermute with alpha 1 of `p` (CutensorLayoutFor) on `device`'s handle, asynchronous
  // on `stream`. FAILED_PRECONDITION when the library is not loaded, INVALID_ARGUMENT for a
  // problem it cannot do, INTERNAL with cuTENSOR's status and error string when a call fails
  // (the objects made so far destroyed).
  Status Permute(int device, const Problem& p, const void* in, void* out, cudaStream_t stream);
  size_t plans() const;  // cached plans, all devices

 private:
  // device, dtype, rows, cols, batch, ld_in, ld_out, alignment
  using PlanKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t>;
  struct PlanEntry {
    cutensor_api::cutensorHandle_t handle = nullptr;
    cutensor_api::cutensorTensorDescriptor_t a = nullptr, b = nullptr;
    cutensor_api::cutensorOperationDescriptor_t op = nullptr;
    cutensor_api::cutensorPlanPreference_t pref = nullptr;
    cutensor_api::cutensorPlan_t plan = nullptr;
    const void* alpha = nullptr;  // 1 of the operation's scalar type (static storage)
  };
  Status Error(const char* what, int rc) const;
  Status MakePlan(cutensor_api::cutensorHandle_t h, const CutensorPermuteLayout& l, uint32_t align,
                  PlanEntry* e);
  void Destroy(const PlanEntry& e);
  void Clear() REQUIRES(mu_);  // all plans

  const CutensorSymbols s_;
  mutable Mutex mu_;
  std::map<int, cutensor_api::cutensorHandle_t> handles_ GUARDED_BY(mu_);  // per device
  std::map<PlanKey, PlanEntry> plans_ GUARDED_BY(mu_);  // at most kCutensorMaxPlans
};

}  // namespace transposed::kernels::internal
