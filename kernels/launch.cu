#include <cstdint>
#include <string>

#include "kernels/transpose_kernels.cuh"
#include "transposed/kernels/launch.h"

namespace transposed::kernels {
namespace {

const std::vector<internal::Entry>* TableFor(int e) {
  switch (e) {
    case 1:
      return &internal::FamilyTable<1>();
    case 2:
      return &internal::FamilyTable<2>();
    case 4:
      return &internal::FamilyTable<4>();
    case 8:
      return &internal::FamilyTable<8>();
    case 16:
      return &internal::FamilyTable<16>();
    default:
      return nullptr;
  }
}

Status CheckPointers(const Problem& p, const void* in, void* out, int align) {
  if (in == nullptr || out == nullptr) return Status::InvalidArgument("null device pointer");
  if (in == out) return Status::InvalidArgument("in-place transpose is not supported");
  const auto i = reinterpret_cast<uintptr_t>(in);
  const auto o = reinterpret_cast<uintptr_t>(out);
  if (i % align != 0)
    return Status::InvalidArgument("input pointer is not aligned to " + std::to_string(align) +
                                   " bytes");
  if (o % align != 0)
    return Status::InvalidArgument("output pointer is not aligned to " + std::to_string(align) +
                                   " bytes");
  // Overlapping buffers would make the result depend on the schedule.
  const uintptr_t in_end = i + static_cast<uintptr_t>(p.in_alloc_bytes());
  const uintptr_t out_end = o + static_cast<uintptr_t>(p.out_alloc_bytes());
  if (i < out_end && o < in_end) return Status::InvalidArgument("input and output overlap");
  return Status::OK();
}

Status FromCuda(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::OK();
  return Status::Internal(what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

}  // namespace

Status Launch(const TransposeConfig& c, const Problem& p, const void* in, void* out,
              cudaStream_t stream) {
  TR_RETURN_IF_ERROR(CheckConfig(c, p));
  const int e = p.elem_size();
  const int align = (c.algorithm == Algorithm::kTile && c.vec_bytes > e) ? c.vec_bytes : e;
  TR_RETURN_IF_ERROR(CheckPointers(p, in, out, align));
  const std::vector<internal::Entry>* table = TableFor(e);
  if (table != nullptr) {
    for (const internal::Entry& entry : *table) {
      if (entry.config == c)
        return FromCuda(entry.launch(p, in, out, stream), "launch of " + c.Name());
    }
  }
  // CheckConfig accepted it, so the host list and the instantiations disagree: a build bug.
  return Status::Internal("config " + c.Name() + " is listed but not instantiated for " +
                          std::to_string(e) + "-byte elements");
}

Status LaunchReference(const Problem& p, const void* in, void* out, cudaStream_t stream) {
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  const int e = p.elem_size();
  TR_RETURN_IF_ERROR(CheckPointers(p, in, out, e));
  cudaError_t err = cudaSuccess;
  switch (e) {
    case 1:
      err = internal::LaunchReferenceE<1>(p, in, out, stream);
      break;
    case 2:
      err = internal::LaunchReferenceE<2>(p, in, out, stream);
      break;
    case 4:
      err = internal::LaunchReferenceE<4>(p, in, out, stream);
      break;
    case 8:
      err = internal::LaunchReferenceE<8>(p, in, out, stream);
      break;
    case 16:
      err = internal::LaunchReferenceE<16>(p, in, out, stream);
      break;
    default:
      return Status::InvalidArgument("unsupported element size " + std::to_string(e));
  }
  return FromCuda(err, "launch of the reference kernel");
}

}  // namespace transposed::kernels
