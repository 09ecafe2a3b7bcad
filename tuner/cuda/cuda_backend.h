// The CUDA backend: tunes the kernels/ family on NVIDIA GPUs, one measuring worker process per GPU.
//
// The daemon never touches a CUDA context itself. Each GPU gets a `transposed-worker` child
// process that owns its context, buffers and timers; a CudaBackend (one per GPU) forwards the
// Backend/Session calls to it over a pipe. When a candidate faults and the worker dies or its
// context breaks, the backend restarts the worker, reports the candidate as failed, and goes on.
//
// Thread-safety: as for every Backend (tuner/backend.h): const methods from any thread, one
// Session measuring per device at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tuner/backend.h"

namespace transposed {

struct CudaBackendOptions {
  // Path of the transposed-worker executable; empty: next to the running executable
  // (/proc/self/exe's directory), then $PATH.
  std::string worker_path;
  // Adds a deliberately faulting candidate (for the fault-survival test only).
  bool enable_test_faults = false;
};

// One Backend per visible GPU, in CUDA device order; an empty vector when no GPU is visible
// (or the worker reports none). An error only when the worker cannot be started at all.
StatusOr<std::vector<std::unique_ptr<Backend>>> MakeCudaBackends(const CudaBackendOptions& options);

}  // namespace transposed
