// CudaEngine: the worker Engine (tuner/worker/engine.h) of one GPU. It wraps GpuMeasurer
// (gpu_measurer.h: the CUDA context, buffers, checks and timers) and lists the kernels/ family's
// configurations valid for a problem as the candidates. Served by transposed-worker
// (worker_main.cc) through the generic loop (tuner/worker/serve.h).
//
// Thread-safety: none (one serve loop).
#pragma once

#include <memory>

#include "core/status.h"
#include "tuner/worker/engine.h"

namespace transposed::cuda_worker {

// Creates the engine of CUDA device `device`. test_faults (only in the test-only executable
// transposed-worker-faults) adds kFaultCandidateName (worker_constants.h), a kernel that faults
// with an illegal address, to every candidate list.
StatusOr<std::unique_ptr<worker::Engine>> CreateCudaEngine(int device, bool test_faults);

}  // namespace transposed::cuda_worker
