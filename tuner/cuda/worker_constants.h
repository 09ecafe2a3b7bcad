// Constants of the CUDA worker shared with its CUDA sources: the test-fault candidate's name.
// Kept free of other includes so CUDA sources can use it. Constants only; thread-safe.
#pragma once

namespace transposed::cuda_worker {

// Name of the deliberately faulting candidate. Only the test-only executable
// transposed-worker-faults offers and runs it; the installed transposed-worker refuses it.
inline constexpr char kFaultCandidateName[] = "test.fault.illegal_address";
// Test-only candidates of transposed-worker-faults that are checked but never listed: a correct
// transpose with one output byte flipped, and one that also writes a byte of the first gap
// between output rows (or flips an element when the problem has no gap). Their checks must fail.
inline constexpr char kWrongOutputCandidateName[] = "test.fault.wrong_output";
inline constexpr char kGapWriteCandidateName[] = "test.fault.gap_write";

}  // namespace transposed::cuda_worker
