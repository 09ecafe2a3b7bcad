#include "kernels/vendor_layout.h"

#include <string>

namespace transposed::kernels {

StatusOr<CutensorPermuteLayout> CutensorLayoutFor(const Problem& p) {
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  CutensorPermuteLayout l;
  switch (p.dtype) {
    case DType::kF32:
      l.data_type = kCudaR32F;
      l.compute_symbol = "CUTENSOR_COMPUTE_DESC_32F";
      l.elem_bytes = 4;
      break;
    case DType::kF64:
      l.data_type = kCudaR64F;
      l.compute_symbol = "CUTENSOR_COMPUTE_DESC_64F";
      l.elem_bytes = 8;
      break;
    case DType::kF16:
    case DType::kBF16:
      return Status::InvalidArgument(
          std::string(DTypeName(p.dtype)) +
          ": cuTENSOR's permutation may change NaN payloads, and a value-exact " +
          std::string(DTypeName(p.dtype)) + " problem is the bit-exact one");
    case DType::kC64:
    case DType::kC128:
      return Status::InvalidArgument(
          std::string(DTypeName(p.dtype)) +
          ": cuTENSOR's complex alpha (1, 0) computes 1 * re - 0 * im, which turns an infinite or "
          "NaN imaginary part into a NaN real part");
    default:
      return Status::InvalidArgument(std::string(DTypeName(p.dtype)) +
                                     ": cuTENSOR's permutation has floating types only (integer "
                                     "bits would go through floating-point arithmetic)");
  }
  const int64_t ld_in = p.in_ld(), ld_out = p.out_ld();
  // A: 'c' fastest, then 'r', then 'b'.
  l.mode_a[0] = 'c';
  l.extent_a[0] = p.cols;
  l.stride_a[0] = 1;
  l.mode_a[1] = 'r';
  l.extent_a[1] = p.rows;
  l.stride_a[1] = ld_in;
  // B: 'r' fastest, then 'c', then 'b'.
  l.mode_b[0] = 'r';
  l.extent_b[0] = p.rows;
  l.stride_b[0] = 1;
  l.mode_b[1] = 'c';
  l.extent_b[1] = p.cols;
  l.stride_b[1] = ld_out;
  l.modes = 2;
  if (p.batch > 1) {
    // ValidateProblem bounded the buffers' element counts, so these products fit in int64.
    l.mode_a[2] = l.mode_b[2] = 'b';
    l.extent_a[2] = l.extent_b[2] = p.batch;
    l.stride_a[2] = p.rows * ld_in;
    l.stride_b[2] = p.cols * ld_out;
    l.modes = 3;
  }
  return l;
}

uint32_t CutensorAlignment(uintptr_t a, uintptr_t b) {
  uint32_t align = 256;
  while (align > 1 && ((a | b) & (align - 1)) != 0) align /= 2;
  return align;
}

}  // namespace transposed::kernels
