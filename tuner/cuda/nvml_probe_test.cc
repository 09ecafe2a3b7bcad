// NvmlProbe (nvml_probe.h) without a GPU: a missing library is a sample without a source that
// names it, and the stand-in library fake_nvml.cc shows the utilization and the processes other
// than the worker (the worker's own pid, and the pid it has in a container, left out).
#include "tuner/cuda/nvml_probe.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace transposed::cuda_worker {
namespace {

TEST(NvmlProbe, AMissingLibraryIsNoSourceNamingIt) {
  NvmlProbe probe("libnvidia-ml-absent.so.1", "GPU-x", getpid());
  const LoadSample s = probe.Sample();
  EXPECT_EQ(s.source, "");
  EXPECT_EQ(s.utilization_percent, -1);
  EXPECT_EQ(s.other_processes, -1);
  EXPECT_NE(s.detail.find("libnvidia-ml-absent.so.1"), std::string::npos) << s.detail;
}

TEST(NvmlProbe, AnUnknownDeviceIsNoSource) {
  NvmlProbe probe(FAKE_NVML_PATH, "GPU-other", getpid());
  const LoadSample s = probe.Sample();
  EXPECT_EQ(s.source, "");
  EXPECT_NE(s.detail.find("GPU-other"), std::string::npos) << s.detail;
}

TEST(NvmlProbe, UtilizationAndOtherProcesses) {
  void* lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto set = reinterpret_cast<void (*)(unsigned, const unsigned*, unsigned)>(
      dlsym(lib, "fake_nvml_set"));
  ASSERT_NE(set, nullptr);
  const unsigned self = static_cast<unsigned>(getpid());
  NvmlProbe probe(FAKE_NVML_PATH, "GPU-fake", getpid());

  const unsigned with_self[] = {self, 4242, 4343};
  set(97, with_self, 3);
  LoadSample s = probe.Sample();
  EXPECT_EQ(s.source, "nvml");
  EXPECT_EQ(s.utilization_percent, 97);
  EXPECT_EQ(s.other_processes, 2);  // itself left out

  // More processes than the probe's first guess of room: asked again with enough.
  unsigned many[12];
  for (unsigned i = 0; i < 12; ++i) many[i] = 5000 + i;
  many[0] = self;
  set(40, many, 12);
  s = probe.Sample();
  EXPECT_EQ(s.utilization_percent, 40);
  EXPECT_EQ(s.other_processes, 11);

  // In a container NVML lists the host's pid of the worker: one process stands for it.
  const unsigned namespaced[] = {777777, 4242};
  set(0, namespaced, 2);
  s = probe.Sample();
  EXPECT_EQ(s.utilization_percent, 0);
  EXPECT_EQ(s.other_processes, 1);

  // A namespace that sees no process at all, not even the worker: not known.
  set(88, namespaced, 0);
  s = probe.Sample();
  EXPECT_EQ(s.utilization_percent, 88);
  EXPECT_EQ(s.other_processes, -1);
  dlclose(lib);
}

}  // namespace
}  // namespace transposed::cuda_worker
