#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dispatch.cuh"
#include "transposed/kernels/launch.h"
#include "transposed/kernels/pointer_alignment.h"

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

Status CheckPointersFor(const Problem& p, const void* in, const void* out, int align) {
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

}  // namespace

StatusOr<PreparedLaunch> PreparedLaunch::Prepare(const TransposeConfig& c, const Problem& p,
                                                 const LaunchOptions& options) {
  TR_RETURN_IF_ERROR(CheckConfig(c, p));
  if (options.max_persistent_blocks < 0)
    return Status::InvalidArgument("max_persistent_blocks must be >= 0");
  const int e = p.elem_size();
  PreparedLaunch l;
  l.config_ = c;
  l.problem_ = p;
  l.options_ = options;
  l.align_ = PointerAlignment(c, p);
  if (const std::vector<internal::Entry>* table = TableFor(e)) {
    for (const internal::Entry& entry : *table) {
      if (entry.config == c) {
        l.entry_ = &entry;
        break;
      }
    }
  }
  // CheckConfig accepted it, so the host list and the instantiations disagree: a build bug.
  if (l.entry_ == nullptr)
    return Status::Internal("config " + c.Name() + " is listed but not instantiated for " +
                            std::to_string(e) + "-byte elements");
  if (c.vendor() && !VendorAvailable(c))
    return Status::FailedPrecondition(c.Name() + ": " + VendorDescription(c));
  return l;
}

Status PreparedLaunch::CheckPointers(const void* in, const void* out) const {
  return CheckPointersFor(problem_, in, out, align_);
}

Status PreparedLaunch::Run(const void* in, void* out, cudaStream_t stream) const {
  Status s = entry_->launch(problem_, in, out, stream, options_);
  if (s.ok()) return s;
  return Status(s.code(), "launch of " + config_.Name() + ": " + s.message());
}

Status Launch(const TransposeConfig& c, const Problem& p, const void* in, void* out,
              cudaStream_t stream, const LaunchOptions& options) {
  TR_ASSIGN_OR_RETURN(PreparedLaunch l, PreparedLaunch::Prepare(c, p, options));
  TR_RETURN_IF_ERROR(l.CheckPointers(in, out));
  return l.Run(in, out, stream);
}

Status LaunchReference(const Problem& p, const void* in, void* out, cudaStream_t stream) {
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  const int e = p.elem_size();
  TR_RETURN_IF_ERROR(CheckPointersFor(p, in, out, e));
  Status s;
  switch (e) {
    case 1:
      s = internal::LaunchReferenceE<1>(p, in, out, stream);
      break;
    case 2:
      s = internal::LaunchReferenceE<2>(p, in, out, stream);
      break;
    case 4:
      s = internal::LaunchReferenceE<4>(p, in, out, stream);
      break;
    case 8:
      s = internal::LaunchReferenceE<8>(p, in, out, stream);
      break;
    case 16:
      s = internal::LaunchReferenceE<16>(p, in, out, stream);
      break;
    default:
      return Status::InvalidArgument("unsupported element size " + std::to_string(e));
  }
  if (s.ok()) return s;
  return Status(s.code(), "launch of the reference kernel: " + s.message());
}

bool VendorAvailable(const TransposeConfig& c) {
  if (c.algorithm == Algorithm::kCublasGeam) return internal::CublasLoaded();
  if (c.algorithm == Algorithm::kCutensorPermute) return internal::CutensorLoaded();
  return true;
}

std::string VendorDescription(const TransposeConfig& c) {
  if (c.algorithm == Algorithm::kCublasGeam) return internal::CublasDescription();
  if (c.algorithm == Algorithm::kCutensorPermute) return internal::CutensorDescription();
  return "our own kernel";
}

std::vector<TransposeConfig> AvailableCandidateConfigs(const Problem& p) {
  std::vector<TransposeConfig> out;
  for (const TransposeConfig& c : CandidateConfigs(p))
    if (!c.vendor() || VendorAvailable(c)) out.push_back(c);
  return out;
}

}  // namespace transposed::kernels
