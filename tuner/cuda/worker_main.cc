// transposed-worker: the measuring process of one GPU (see tuner/cuda/cuda_backend.h).
//
//   transposed-worker --list         prints the number of visible CUDA devices
//   transposed-worker --device N     serves the worker protocol (tuner/worker/worker.proto) on
//                                    stdin/stdout with a CudaEngine; exits 0 when stdin closes,
//                                    kExitBroken right after answering a request that broke the
//                                    CUDA context.
// Built twice from this file: the installed transposed-worker, and the test-only
// transposed-worker-faults (TRANSPOSED_WORKER_TEST_FAULTS=1), whose engine also offers the
// deliberately faulting candidate. The installed worker has no way to enable it.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tuner/cuda/cuda_engine.h"
#include "tuner/cuda/gpu_measurer.h"
#include "tuner/worker/serve.h"

#ifndef TRANSPOSED_WORKER_TEST_FAULTS
#define TRANSPOSED_WORKER_TEST_FAULTS 0
#endif

namespace transposed::cuda_worker {
namespace {

int Usage() {
  std::fprintf(stderr, "usage: transposed-worker --list | --device N\n");
  return worker::kExitUsage;
}

int Main(int argc, char** argv) {
  int device = -1;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list") {
      list = true;
    } else if (a == "--device" && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0 || v > 1024) {
        std::fprintf(stderr, "transposed-worker: bad --device '%s'\n", argv[i]);
        return worker::kExitUsage;
      }
      device = static_cast<int>(v);
    } else {
      return Usage();
    }
  }
  if (list) {
    auto n = CudaDeviceCount();
    if (!n.ok()) std::fprintf(stderr, "transposed-worker: %s\n", n.status().ToString().c_str());
    std::printf("%d\n", n.ok() ? *n : 0);
    return worker::kExitOk;
  }
  if (device < 0) return Usage();
  return worker::ServeStdio(CreateCudaEngine(device, TRANSPOSED_WORKER_TEST_FAULTS != 0));
}

}  // namespace
}  // namespace transposed::cuda_worker

int main(int argc, char** argv) { return transposed::cuda_worker::Main(argc, argv); }
