// A stand-in for libnvidia-ml.so.1 (test-only, built as a module for nvml_probe_test): the few
// NVML entry points NvmlProbe calls, answering from state the test sets through
// fake_nvml_set(), which it finds in the same loaded module. Knows one device, "GPU-fake".
#include <cstring>

namespace {

struct Info {  // nvmlProcessInfo_t (v2 / v3 layout)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

unsigned int g_utilization = 0;
unsigned int g_pids[16];
unsigned int g_count = 0;
int g_dummy_device = 0;

}  // namespace

extern "C" {

void fake_nvml_set(unsigned int utilization, const unsigned int* pids, unsigned int count) {
  g_utilization = utilization;
  g_count = count < 16 ? count : 16;
  std::memcpy(g_pids, pids, g_count * sizeof(unsigned int));
}

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (std::strcmp(uuid, "GPU-fake") != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = &g_dummy_device;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, Utilization* u) {
  u->gpu = g_utilization;
  u->memory = 0;
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void*, unsigned int* count, Info* infos) {
  if (*count < g_count) {
    *count = g_count;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  for (unsigned int i = 0; i < g_count; ++i) infos[i] = Info{g_pids[i], 1u << 20, 0, 0};
  *count = g_count;
  return 0;
}

}  // extern "C"
