// example_batch_job: how a batch job uses the daemon and the kernel library together.
//
// Connects to the daemon, asks for the best configuration of one transpose problem on a CUDA
// device, rebuilds the kernel configuration from the answer, launches it on device buffers
// through transposed::kernels::Launch, and checks every element of the result on the host.
//
//   example_batch_job [--server ADDR] [--rows R] [--cols C] [--dtype T] [--batch B] [--device I]
//
// Exit status 0 when the transpose is correct, 1 on any error (printed to stderr).
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/problem.h"
#include "core/status.h"
#include "transposed/kernels/config.h"
#include "transposed/kernels/launch.h"

namespace transposed {
namespace {

Status CudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device buffers freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

Status RunJob(const std::string& server, const Problem& problem, int device_index) {
  // 1. Ask the daemon. ANSWER_NOW: a problem it has not tuned yet answers at once (the nearest
  // tuned problem's winner, or a heuristic default, always valid for this problem) while the
  // daemon tunes it in the background; later jobs get the tuned winner from its cache.
  ClientOptions options;
  options.deadline_seconds = 60;
  TR_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(server, options));
  TR_ASSIGN_OR_RETURN(v1::Answer answer, client->GetConfig(problem, DeviceByIndex(device_index),
                                                           v1::ANSWER_NOW));
  if (answer.variant().backend() != "cuda") {
    return Status::FailedPrecondition("device " + std::to_string(device_index) + " of " + server +
                                      " is a '" + answer.variant().backend() +
                                      "' device; this example launches CUDA kernels");
  }
  std::cout << "daemon: " << answer.variant().name() << " (" << answer.gbps() << " GB/s, "
            << v1::Source_Name(answer.source()) << ") on "
            << answer.device().name() << "\n";

  // 2. Rebuild the configuration; the name and the parameters must agree.
  TR_ASSIGN_OR_RETURN(kernels::TransposeConfig config,
                      kernels::TransposeConfig::FromParams(VariantParams(answer.variant())));
  TR_ASSIGN_OR_RETURN(kernels::TransposeConfig by_name,
                      kernels::TransposeConfig::FromName(answer.variant().name()));
  if (config != by_name) {
    return Status::Internal("variant " + answer.variant().name() + ": its parameters describe " +
                            config.Name());
  }

  // 3. Device buffers; the CUDA device must be the one the daemon tuned for. The daemon lists
  //    devices in CUDA order, so the index carries over.
  TR_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(device_index), "cudaSetDevice"));
  const int64_t in_bytes = problem.in_alloc_bytes();
  const int64_t out_bytes = problem.out_alloc_bytes();
  const int es = problem.elem_size();
  std::vector<unsigned char> host_in(in_bytes);
  for (int64_t i = 0; i < in_bytes; ++i) {
    host_in[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  }
  DeviceBuffer d_in, d_out;
  TR_RETURN_IF_ERROR(CudaCheck(cudaMalloc(&d_in.ptr, in_bytes), "cudaMalloc(in)"));
  TR_RETURN_IF_ERROR(CudaCheck(cudaMalloc(&d_out.ptr, out_bytes), "cudaMalloc(out)"));
  TR_RETURN_IF_ERROR(CudaCheck(
      cudaMemcpy(d_in.ptr, host_in.data(), in_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(in)"));
  TR_RETURN_IF_ERROR(CudaCheck(cudaMemset(d_out.ptr, 0, out_bytes), "cudaMemset(out)"));

  // 4. Launch through the kernel library and wait.
  cudaStream_t stream;
  TR_RETURN_IF_ERROR(CudaCheck(cudaStreamCreate(&stream), "cudaStreamCreate"));
  auto start = std::chrono::steady_clock::now();
  Status launched = kernels::Launch(config, problem, d_in.ptr, d_out.ptr, stream);
  Status synced = CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cudaStreamDestroy(stream);
  TR_RETURN_IF_ERROR(launched);
  TR_RETURN_IF_ERROR(synced);

  // 5. Check every element: out[b][j][i] == in[b][i][j].
  std::vector<unsigned char> host_out(out_bytes);
  TR_RETURN_IF_ERROR(
      CudaCheck(cudaMemcpy(host_out.data(), d_out.ptr, out_bytes, cudaMemcpyDeviceToHost),
                "cudaMemcpy(out)"));
  const int64_t ldi = problem.in_ld(), ldo = problem.out_ld();
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t i = 0; i < problem.rows; ++i) {
      for (int64_t j = 0; j < problem.cols; ++j) {
        const int64_t src = (b * problem.rows * ldi + i * ldi + j) * es;
        const int64_t dst = (b * problem.cols * ldo + j * ldo + i) * es;
        if (std::memcmp(&host_in[src], &host_out[dst], es) != 0) {
          return Status::Internal("wrong result at batch " + std::to_string(b) + ", row " +
                                  std::to_string(i) + ", col " + std::to_string(j));
        }
      }
    }
  }
  std::cout << "ok: " << problem.ToString() << " transposed correctly with " << config.Name()
            << " (first launch, including warm-up: " << seconds * 1e3 << " ms)\n";
  return Status::OK();
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) {
  const char* env = std::getenv("TRANSPOSED_SERVER");
  std::string server = (env != nullptr && *env != '\0') ? env : "127.0.0.1:50051";
  transposed::Problem problem;
  problem.rows = 4096;
  problem.cols = 2048;
  std::string dtype = "f32";
  int device = 0;
  CLI::App app{"example_batch_job: get a config from transposed, launch it, check the result"};
  app.add_option("--server", server, "Daemon address")->capture_default_str();
  app.add_option("--rows", problem.rows)->capture_default_str();
  app.add_option("--cols", problem.cols)->capture_default_str();
  app.add_option("--batch", problem.batch)->capture_default_str();
  app.add_option("--dtype", dtype)->capture_default_str();
  app.add_option("--device", device, "CUDA device index")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto parsed = transposed::ParseDType(dtype);
  if (!parsed) {
    std::cerr << "example_batch_job: unknown dtype " << dtype << "\n";
    return 2;
  }
  problem.dtype = *parsed;
  transposed::Status s = transposed::ValidateProblem(problem);
  if (s.ok()) s = transposed::RunJob(server, problem, device);
  if (!s.ok()) {
    std::cerr << "example_batch_job: " << s.ToString() << "\n";
    return 1;
  }
  return 0;
}
