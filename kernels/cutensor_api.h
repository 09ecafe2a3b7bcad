// The subset of the cuTENSOR 2.x C API that `cutensor.permute` calls (kernels/vendor.cc), as
// function-pointer types for dlsym: no cutensor.h is installed on the build or GPU machines, and
// libcutensor is loaded at run time so that a node without it still builds and runs.
//
// Source: NVIDIA cuTENSOR 2.x public headers cutensor.h (CUTENSOR_MAJOR 2, CUTENSOR_MINOR 5,
// CUTENSOR_PATCH 0; CUTENSOR_VERSION = MAJOR * 10000 + MINOR * 100 + PATCH) and cutensor/types.h.
// Every signature, enum value and the compute-descriptor declaration below was checked against:
// - the 2.5.0 cutensor.h and cutensor/types.h themselves (NVIDIA's text, copyright 2019-25);
// - NVIDIA/nvmath-python nvmath/bindings/cycutensor.pxd ("generated with version 2.5.0" from those
//   headers: the same argument order, types and pointer levels) and nvmath/bindings/cutensor.pyx
//   (reads each descriptor as `ctypes.c_void_p.in_dll(lib, "CUTENSOR_COMPUTE_DESC_32F").value`,
//   i.e. loads the pointer stored at the symbol, as vendor.cc does);
// - JuliaGPU/CUDA.jl lib/cutensor/src/libcutensor.jl (generated from the 2.x headers) and
//   res/wrap/libcutensor_epilogue.jl (cglobal of the symbol, then unsafe_load);
// - NVIDIA/CUDALibrarySamples cuTENSOR/elementwise_permute.cu (the call sequence used here: float
//   alpha for CUDA_R_32F with CUTENSOR_COMPUTE_DESC_32F, CUTENSOR_OP_IDENTITY,
//   CUTENSOR_ALGO_DEFAULT, CUTENSOR_JIT_MODE_NONE, workspaceSizeLimit 0);
// - cupy/cupy cupy_backends/stub/cupy_cutensor.h (mirrors the 2.0 header CuPy v13 adopted: the
//   six 2.0 descriptors are `const cutensorComputeDescriptor_t` variables there too; CUDA.jl's
//   2.0-era epilogue passed the symbol's address instead, later replaced by the load above);
// - the cuTENSOR 1.4.0 cutensor.h (`size_t cutensorGetVersion()` exists in 1.x too, so the version
//   gate can call it before anything else) and NVIDIA's 2.0.0 release notes / 2.1.0 API index (the
//   functions used here all date from 2.0.0).
// In 2.0 the data-type argument of cutensorCreateTensorDescriptor is `cutensorDataType_t`, an enum
// with cudaDataType_t's values (CUTENSOR_R_32F = 0, CUTENSOR_R_64F = 1); later 2.x headers make it
// `typedef cudaDataType_t cutensorDataType_t`: the same int-sized argument either way. Handles and
// descriptors are opaque pointers (`typedef struct cutensorHandle *cutensorHandle_t;`); the
// compute descriptors are exported variables
// (`CUTENSOR_EXTERN const cutensorComputeDescriptor_t CUTENSOR_COMPUTE_DESC_32F;`), so dlsym
// returns the address of the pointer, which vendor.cc loads. Strides and extents are in elements,
// mode i of a descriptor is modeA[i] of the operation (cutensor.h, cutensorCreateTensorDescriptor /
// cutensorCreatePermutation); alignmentRequirement is in bytes, of the base pointers the plan will
// run on. cudaDataType_t values are library_types.h's.
//
// Internal to kernels/. Declarations only; thread-safety is the library's (the functions used
// here are documented thread-safe).
#pragma once

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>

namespace transposed::kernels::internal::cutensor_api {

struct Handle;
struct TensorDescriptor;
struct OperationDescriptor;
struct PlanPreference;
struct Plan;
struct ComputeDescriptor;
using cutensorHandle_t = Handle*;
using cutensorTensorDescriptor_t = TensorDescriptor*;
using cutensorOperationDescriptor_t = OperationDescriptor*;
using cutensorPlanPreference_t = PlanPreference*;
using cutensorPlan_t = Plan*;
using cutensorComputeDescriptor_t = ComputeDescriptor*;

// Enums are C enums (int-sized) in the header.
using cutensorStatus_t = int;    // CUTENSOR_STATUS_SUCCESS = 0
using cutensorOperator_t = int;  // CUTENSOR_OP_IDENTITY = 1
using cutensorAlgo_t = int;      // CUTENSOR_ALGO_DEFAULT = -1
using cutensorJitMode_t = int;   // CUTENSOR_JIT_MODE_NONE = 0
inline constexpr cutensorStatus_t kStatusSuccess = 0;
inline constexpr cutensorOperator_t kOpIdentity = 1;
inline constexpr cutensorAlgo_t kAlgoDefault = -1;
inline constexpr cutensorJitMode_t kJitModeNone = 0;

// The oldest library accepted: 2.2.0. The 2.x API dates from 2.0.0, but how 2.0 and 2.1 export the
// compute descriptors (a pointer variable at the symbol, as read here, or the descriptor itself,
// as CUDA.jl's 2.0-era binding assumed) was not found in any public 2.0/2.1 header; 2.2.0 on
// matches the 2.5.0 header. Reading a descriptor wrongly would crash the worker, so the
// unverified versions are refused rather than guessed.
inline constexpr size_t kMinVersion = 20200;

using GetVersionFn = size_t (*)();
using GetErrorStringFn = const char* (*)(cutensorStatus_t error);
using CreateFn = cutensorStatus_t (*)(cutensorHandle_t* handle);
using DestroyFn = cutensorStatus_t (*)(cutensorHandle_t handle);
using CreateTensorDescriptorFn = cutensorStatus_t (*)(cutensorHandle_t handle,
                                                      cutensorTensorDescriptor_t* desc,
                                                      uint32_t numModes, const int64_t extent[],
                                                      const int64_t stride[],
                                                      cudaDataType_t dataType,
                                                      uint32_t alignmentRequirement);
using DestroyTensorDescriptorFn = cutensorStatus_t (*)(cutensorTensorDescriptor_t desc);
using CreatePermutationFn = cutensorStatus_t (*)(
    cutensorHandle_t handle, cutensorOperationDescriptor_t* desc, cutensorTensorDescriptor_t descA,
    const int32_t modeA[], cutensorOperator_t opA, cutensorTensorDescriptor_t descB,
    const int32_t modeB[], cutensorComputeDescriptor_t descCompute);
using DestroyOperationDescriptorFn = cutensorStatus_t (*)(cutensorOperationDescriptor_t desc);
using CreatePlanPreferenceFn = cutensorStatus_t (*)(cutensorHandle_t handle,
                                                    cutensorPlanPreference_t* pref,
                                                    cutensorAlgo_t algo, cutensorJitMode_t jitMode);
using DestroyPlanPreferenceFn = cutensorStatus_t (*)(cutensorPlanPreference_t pref);
// workspaceSizeLimit 0 for a permutation (NVIDIA's CUDALibrarySamples cuTENSOR permutation
// sample passes 0; cutensorPermute has no workspace argument).
using CreatePlanFn = cutensorStatus_t (*)(cutensorHandle_t handle, cutensorPlan_t* plan,
                                          cutensorOperationDescriptor_t desc,
                                          cutensorPlanPreference_t pref,
                                          uint64_t workspaceSizeLimit);
using DestroyPlanFn = cutensorStatus_t (*)(cutensorPlan_t plan);
// B = alpha * op(A) permuted; alpha on the host, of the operation's scalar type (float for
// CUTENSOR_COMPUTE_DESC_32F with CUDA_R_32F, double for 64F with CUDA_R_64F). No workspace.
using PermuteFn = cutensorStatus_t (*)(cutensorHandle_t handle, cutensorPlan_t plan,
                                       const void* alpha, const void* A, void* B,
                                       cudaStream_t stream);

}  // namespace transposed::kernels::internal::cutensor_api
