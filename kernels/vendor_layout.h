// How a problem maps onto cuTENSOR's tensor permutation, for the vendor member
// `cutensor.permute` (kernels/vendor.h runs it): the modes, extents and strides of the input
// tensor A and the output tensor B, the cuTENSOR data type and compute descriptor.
//
// cuTENSOR tensors are generalized column-major: mode i has an extent and a stride in elements,
// the first mode the fastest. A problem's input matrix b is row-major rows x cols with rows
// ld_in apart and matrices rows * ld_in apart (core/problem.h), so A has the modes
//   'c' (extent cols, stride 1), 'r' (extent rows, stride ld_in), 'b' (extent batch,
//   stride rows * ld_in; only when batch > 1);
// the output is row-major cols x rows, rows ld_out apart, so B has
//   'r' (extent rows, stride 1), 'c' (extent cols, stride ld_out), 'b' (stride cols * ld_out).
// Leading dimensions are strides, so every ld_in/ld_out is expressible, and the gap elements
// between rows are never written (B's strides skip them).
//
// Which dtypes. cuTENSOR's permutation computes B = alpha * op(A) in floating point and supports
// only floating types (CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUDA_R_64F, CUDA_C_32F, CUDA_C_64F
// and mixed pairs; cutensor.h 2.x, cutensorCreatePermutation): no integer type, so no 1-byte
// element and no identity that copies bits. alpha = 1 keeps every value except a NaN's payload
// (as cuBLAS geam does), so the member is value-exact only, like cublas.geam
// (TransposeConfig::canonicalizes_nan()), and value-exact is distinct from bit-exact only for f32
// and f64 (core/problem.h ValueExactMatters): those two map to CUDA_R_32F /
// CUTENSOR_COMPUTE_DESC_32F and CUDA_R_64F / CUTENSOR_COMPUTE_DESC_64F with a real alpha of 1.
// Refused with the reason: integers (no integer type; their bits could look like NaNs), f16/bf16 (a
// value-exact f16/bf16 request is the bit-exact one, which a NaN-canonicalizing member cannot
// meet), complex (a complex alpha (1, 0) computes 1 * re - 0 * im, so an infinite or NaN imaginary
// part would turn the real part into NaN).
//
// Pure host code (no CUDA, no cuTENSOR headers): compiled into every build and tested on the CPU
// (vendor_layout_test.cc). Thread-safe (no state).
#pragma once

#include <cstdint>

#include "core/problem.h"
#include "core/status.h"

namespace transposed::kernels {

// cudaDataType_t values of library_types.h (vendor.cc static_asserts them against the header).
inline constexpr int kCudaR32F = 0;
inline constexpr int kCudaR64F = 1;

struct CutensorPermuteLayout {
  static constexpr int kMaxModes = 3;
  int data_type = 0;                // cudaDataType_t of A and B: kCudaR32F or kCudaR64F
  const char* compute_symbol = "";  // "CUTENSOR_COMPUTE_DESC_32F" or "..._64F" (exported)
  int elem_bytes = 0;               // 4 or 8; alpha is a float or a double of 1
  uint32_t modes = 0;               // 2, or 3 with a batch
  int32_t mode_a[kMaxModes] = {};   // mode labels of A, fastest first: 'c', 'r'[, 'b']
  int64_t extent_a[kMaxModes] = {};
  int64_t stride_a[kMaxModes] = {};  // in elements
  int32_t mode_b[kMaxModes] = {};    // of B: 'r', 'c'[, 'b']
  int64_t extent_b[kMaxModes] = {};
  int64_t stride_b[kMaxModes] = {};
};

// The layout of `p`, or INVALID_ARGUMENT naming why cuTENSOR's permutation cannot do it
// (an invalid problem, or a dtype refused above).
StatusOr<CutensorPermuteLayout> CutensorLayoutFor(const Problem& p);

// The largest power of two, at most 256, that divides both addresses (cuTENSOR's
// alignmentRequirement of a tensor descriptor: plans made for it run on any such pointers).
uint32_t CutensorAlignment(uintptr_t a, uintptr_t b);

}  // namespace transposed::kernels
