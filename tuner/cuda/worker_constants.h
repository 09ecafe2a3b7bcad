// Constants shared by the CUDA backend's daemon side and its worker process (exit codes, limits,
// the test-fault candidate's name). Kept free of other includes so CUDA sources can use it.
// Constants only; thread-safe.
#pragma once

#include <cstdint>

namespace transposed::cuda_worker {

// Frames larger than this are rejected (a corrupted length must not allocate gigabytes).
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Exit codes of the worker process.
inline constexpr int kExitOk = 0;           // stdin closed or "close" of the process
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitStickyError = 3;  // the CUDA context broke (illegal address...)
inline constexpr int kExitProtocol = 4;     // malformed frame on stdin

// Name of the deliberately faulting candidate (only with --enable-test-faults).
inline constexpr char kFaultCandidateName[] = "test.fault.illegal_address";

}  // namespace transposed::cuda_worker
