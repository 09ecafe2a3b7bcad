#include "server/backends.h"

#include <spdlog/spdlog.h>

#include "tuner/cpu_backend.h"
#if TRANSPOSED_WITH_CUDA_BACKEND
#include "tuner/cuda/cuda_backend.h"
#endif

namespace transposed {

bool CudaBackendCompiledIn() {
#if TRANSPOSED_WITH_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

namespace {

std::vector<std::unique_ptr<Backend>> MakeCpu(const BackendOptions& options) {
  CpuBackendOptions cpu;
  cpu.max_threads = options.cpu_threads;
  cpu.instance_id = options.cpu_instance_id;
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(std::make_unique<CpuBackend>(cpu));
  return out;
}

#if TRANSPOSED_WITH_CUDA_BACKEND
StatusOr<std::vector<std::unique_ptr<Backend>>> MakeCuda(const BackendOptions& options) {
  CudaBackendOptions cuda;
  cuda.worker_path = options.worker_path;
  return MakeCudaBackends(cuda);
}
#endif

}  // namespace

StatusOr<std::vector<std::unique_ptr<Backend>>> MakeBackends(const std::string& kind,
                                                             const BackendOptions& options) {
  if (options.cpu_threads < 0)
    return Status::InvalidArgument("--cpu-threads: must be >= 0 (0: all), got " +
                                   std::to_string(options.cpu_threads));
  if (kind == "cpu") {
    spdlog::info("backend=cpu (requested with --backend=cpu)");
    return MakeCpu(options);
  }
  if (kind == "cuda") {
#if TRANSPOSED_WITH_CUDA_BACKEND
    auto gpus = MakeCuda(options);
    if (!gpus.ok()) return Status::FailedPrecondition("--backend=cuda: " + gpus.status().message());
    if (gpus->empty()) return Status::FailedPrecondition("--backend=cuda: no GPU is visible");
    spdlog::info("backend=cuda (requested with --backend=cuda; {} GPU(s))", gpus->size());
    return std::move(gpus).value();
#else
    return Status::FailedPrecondition(
        "--backend=cuda: this build of transposed has no CUDA backend (built without nvcc); "
        "use --backend=cpu or auto");
#endif
  }
  if (kind == "auto") {
#if TRANSPOSED_WITH_CUDA_BACKEND
    auto gpus = MakeCuda(options);
    if (gpus.ok() && !gpus->empty()) {
      spdlog::info("backend=cuda (auto: {} GPU(s) visible)", gpus->size());
      return std::move(gpus).value();
    }
    spdlog::info("backend=cpu (auto: CUDA backend compiled in but {})",
                 gpus.ok() ? std::string("no GPU is visible")
                           : "it could not start: " + gpus.status().ToString());
#else
    spdlog::info("backend=cpu (auto: this build has no CUDA backend)");
#endif
    return MakeCpu(options);
  }
  return Status::InvalidArgument("--backend: unknown backend '" + kind +
                                 "' (expected auto, cpu or cuda)");
}

}  // namespace transposed
