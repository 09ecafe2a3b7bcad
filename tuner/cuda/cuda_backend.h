// The CUDA backend: tunes the kernels/ family on NVIDIA GPUs, one measuring worker process per GPU.
//
// The daemon never touches a CUDA context (and does not link the kernels): each GPU gets a
// `transposed-worker` child process (worker_main.cc: a CudaEngine served by the generic loop of
// tuner/worker/) that owns its context, buffers and timers and lists the candidates. The daemon
// side is the generic WorkerBackend (tuner/worker/worker_backend.h): when a candidate faults and
// the worker dies, it restarts the worker, reports the candidate as failed, and goes on.
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
  // Path of the worker executable; empty: $TRANSPOSED_WORKER, then next to the running
  // executable (/proc/self/exe's directory), then $PATH.
  std::string worker_path;
};

// The worker executable MakeCudaBackends would run (NOT_FOUND naming the places looked at).
StatusOr<std::string> FindCudaWorker(const CudaBackendOptions& options);

// GPUs the worker lists (`transposed-worker --list`; 0 without a driver or a GPU). NOT_FOUND
// without a worker, UNAVAILABLE when it cannot run.
StatusOr<int> CountCudaDevices(const CudaBackendOptions& options);

// One Backend per visible GPU, in CUDA device order; an empty vector when no GPU is visible
// (or the worker reports none). An error only when the worker cannot be started at all.
StatusOr<std::vector<std::unique_ptr<Backend>>> MakeCudaBackends(const CudaBackendOptions& options);

}  // namespace transposed
