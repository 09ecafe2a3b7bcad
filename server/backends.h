// MakeBackends: picks and builds the daemon's measuring backends from the --backend flag.
//
// "cpu": one CpuBackend (the host). "cuda": one CudaBackend per visible GPU (FAILED_PRECONDITION
// when this build has no CUDA backend or no GPU is visible). "auto": CUDA when compiled in and at
// least one GPU is visible, otherwise the CPU. The choice and its reason are logged (spdlog info).
// Call from one thread (startup); the returned backends follow tuner/backend.h's rules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tuner/backend.h"

namespace transposed {

struct BackendOptions {
  int cpu_threads = 0;      // most threads a CPU candidate uses; 0: all hardware threads
  std::string worker_path;  // the CUDA worker executable; empty: next to this executable
  std::string cpu_instance_id;  // the CPU device's instance id (CpuBackendOptions::instance_id)
};

// True when this build includes the CUDA backend.
bool CudaBackendCompiledIn();

StatusOr<std::vector<std::unique_ptr<Backend>>> MakeBackends(const std::string& kind,
                                                             const BackendOptions& options);

}  // namespace transposed
