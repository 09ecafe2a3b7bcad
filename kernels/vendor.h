// Vendor members of the family: cuBLAS geam (op(A) = A^T, alpha 1, beta 0) as a transpose,
// loaded at run time with dlopen so that a node without libcublas still builds and runs (the
// member is then simply not available: VendorAvailable() in launch.h).
//
// Internal to kernels/. Thread-safe: the library is loaded once (function-local static), and a
// mutex guards each device's cuBLAS handle, whose stream is set per call.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/problem.h"
#include "core/status.h"
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

}  // namespace transposed::kernels::internal
