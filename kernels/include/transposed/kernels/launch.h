// Launching members of the transpose family on a CUDA stream.
//
// Launch() runs one configuration (see config.h) on device buffers laid out as core/problem.h
// describes; LaunchReference() runs a deliberately simple kernel (one element per thread, 64-bit
// index math) that checks and benchmarks use as the trusted reference. Both are asynchronous on
// `stream`, never abort, and report errors as Status: INVALID_ARGUMENT for a problem or config
// that does not fit (including misaligned pointers), INTERNAL with the CUDA error string when the
// launch itself fails. Errors of the kernel's execution surface at the caller's next
// synchronization. Thread-safe: no shared mutable state; CUDA's own rules for streams apply.
// Only available when built with CUDA (TRANSPOSED_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include "core/problem.h"
#include "core/status.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels {

// Launches config `c` on `stream` (asynchronously). in/out are device pointers laid out as
// core/problem.h says. Returns INVALID_ARGUMENT for a config that does not fit the problem,
// INTERNAL with the CUDA error string if the launch fails. Never aborts.
Status Launch(const TransposeConfig& c, const Problem& p, const void* in, void* out,
              cudaStream_t stream);

// A deliberately simple trusted kernel (one element per thread, 64-bit index math), used as the
// reference in checks.
Status LaunchReference(const Problem& p, const void* in, void* out, cudaStream_t stream);

}  // namespace transposed::kernels
