// Constants of the CUDA worker shared with its CUDA sources: the test-fault candidate's name.
// Kept free of other includes so CUDA sources can use it. Constants only; thread-safe.
#pragma once

namespace transposed::cuda_worker {

// Name of the deliberately faulting candidate. Only the test-only executable
// transposed-worker-faults offers and runs it; the installed transposed-worker refuses it.
inline constexpr char kFaultCandidateName[] = "test.fault.illegal_address";

}  // namespace transposed::cuda_worker
