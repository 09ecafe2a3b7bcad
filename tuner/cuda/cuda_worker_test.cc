// The real CUDA worker without the GPU suite (label unit, runs in CI with nvcc but no GPU): on a
// machine without a GPU MakeCudaBackends is an empty vector, not an error; on a GPU machine, one
// backend per device that `--list` reports, described by the worker itself.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tuner/cuda/cuda_backend.h"
#include "tuner/worker/process.h"

namespace transposed {
namespace {

std::string WorkerPath() {
  const char* e = std::getenv("TRANSPOSED_WORKER");
  return e && *e ? e : TRANSPOSED_WORKER_PATH;
}

TEST(MakeCudaBackendsTest, OneBackendPerListedDevice) {
  auto listed = worker::RunAndCapture(WorkerPath(), {"--list"}, 60);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  const int count = std::atoi(listed->c_str());
  CudaBackendOptions o;
  o.worker_path = WorkerPath();
  auto backends = MakeCudaBackends(o);
  ASSERT_TRUE(backends.ok()) << backends.status().ToString();
  ASSERT_EQ(static_cast<int>(backends->size()), count);
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ((*backends)[i]->device().backend, "cuda");
    EXPECT_EQ((*backends)[i]->device().index, i);
    EXPECT_EQ((*backends)[i]->device().uuid.rfind("GPU-", 0), 0u);
  }
}

TEST(MakeCudaBackendsTest, MissingWorkerIsAnError) {
  CudaBackendOptions o;
  o.worker_path = "/nonexistent/transposed-worker";
  EXPECT_EQ(MakeCudaBackends(o).status().code(), StatusCode::kNotFound);
}

TEST(MakeCudaBackendsTest, BadDeviceFlagIsAUsageError) {
  auto r = worker::RunAndCapture(WorkerPath(), {"--device", "x"}, 60);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exit code 2"), std::string::npos) << r.status().message();
  // The installed worker has no test-fault switch.
  r = worker::RunAndCapture(WorkerPath(), {"--enable-test-faults", "--list"}, 60);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exit code 2"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace transposed
