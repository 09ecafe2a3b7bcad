#include "tuner/cuda/nvml_probe.h"

#include <dlfcn.h>

#include <cstdint>
#include <vector>

namespace transposed::cuda_worker {
namespace {

// The NVML ABI this file uses (nvml.h; not included: the header ships with the CUDA toolkit,
// which the daemon's build may lack, and the library with the driver).
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct ProcessInfoV1 {  // nvmlDeviceGetComputeRunningProcesses
  unsigned int pid;
  unsigned long long used_gpu_memory;
};
struct ProcessInfoV2 {  // nvmlDeviceGetComputeRunningProcesses_v2 and _v3 (nvmlProcessInfo_t)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

// Every process of the device, by one of the three versions of the call; false when it failed.
template <typename Info>
bool Pids(nvmlReturn_t (*fn)(nvmlDevice_t, unsigned int*, Info*), nvmlDevice_t device,
          std::vector<unsigned int>* out) {
  // Room for the processes there are, plus some started meanwhile; a bounded number of tries.
  unsigned int count = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<Info> infos(count + 8);
    unsigned int n = static_cast<unsigned int>(infos.size());
    const nvmlReturn_t r = fn(device, &n, infos.data());
    if (r == kNvmlSuccess) {
      out->clear();
      for (unsigned int i = 0; i < n && i < infos.size(); ++i) out->push_back(infos[i].pid);
      return true;
    }
    if (r != kNvmlInsufficientSize) return false;
    count = n;
  }
  return false;
}

}  // namespace

struct NvmlProbe::Api {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*procs_v3)(nvmlDevice_t, unsigned int*, ProcessInfoV2*) = nullptr;
  nvmlReturn_t (*procs_v2)(nvmlDevice_t, unsigned int*, ProcessInfoV2*) = nullptr;
  nvmlReturn_t (*procs_v1)(nvmlDevice_t, unsigned int*, ProcessInfoV1*) = nullptr;
  bool initialised = false;
  nvmlDevice_t device = nullptr;

  ~Api() {
    if (initialised && shutdown != nullptr) shutdown();
    if (handle != nullptr) dlclose(handle);
  }
};

NvmlProbe::NvmlProbe(const std::string& library, const std::string& uuid, pid_t self_pid)
    : api_(std::make_unique<Api>()), self_pid_(self_pid) {
  Api& a = *api_;
  a.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (a.handle == nullptr) {
    const char* e = dlerror();
    unavailable_ = library + ": " + (e != nullptr ? e : "cannot be loaded");
    return;
  }
  auto sym = [&a](const char* name) { return dlsym(a.handle, name); };
  a.init = reinterpret_cast<decltype(a.init)>(sym("nvmlInit_v2"));
  a.shutdown = reinterpret_cast<decltype(a.shutdown)>(sym("nvmlShutdown"));
  a.by_uuid = reinterpret_cast<decltype(a.by_uuid)>(sym("nvmlDeviceGetHandleByUUID"));
  a.utilization =
      reinterpret_cast<decltype(a.utilization)>(sym("nvmlDeviceGetUtilizationRates"));
  a.procs_v3 =
      reinterpret_cast<decltype(a.procs_v3)>(sym("nvmlDeviceGetComputeRunningProcesses_v3"));
  a.procs_v2 =
      reinterpret_cast<decltype(a.procs_v2)>(sym("nvmlDeviceGetComputeRunningProcesses_v2"));
  a.procs_v1 =
      reinterpret_cast<decltype(a.procs_v1)>(sym("nvmlDeviceGetComputeRunningProcesses"));
  if (a.init == nullptr || a.shutdown == nullptr || a.by_uuid == nullptr ||
      a.utilization == nullptr) {
    unavailable_ = library + ": an NVML entry point is missing";
    return;
  }
  if (nvmlReturn_t r = a.init(); r != kNvmlSuccess) {
    unavailable_ = "nvmlInit failed (NVML error " + std::to_string(r) + ")";
    return;
  }
  a.initialised = true;
  if (nvmlReturn_t r = a.by_uuid(uuid.c_str(), &a.device); r != kNvmlSuccess) {
    unavailable_ = "NVML does not know device " + uuid + " (NVML error " + std::to_string(r) + ")";
    a.device = nullptr;
  }
}

NvmlProbe::~NvmlProbe() = default;

LoadSample NvmlProbe::Sample() {
  LoadSample s;
  if (!unavailable_.empty()) {
    s.detail = unavailable_;
    return s;
  }
  const Api& a = *api_;
  nvmlUtilization_t u{};
  if (nvmlReturn_t r = a.utilization(a.device, &u); r != kNvmlSuccess) {
    s.detail = "nvmlDeviceGetUtilizationRates failed (NVML error " + std::to_string(r) + ")";
    return s;
  }
  s.source = "nvml";
  s.utilization_percent = static_cast<int>(u.gpu > 100 ? 100 : u.gpu);
  std::vector<unsigned int> pids;
  const bool listed = (a.procs_v3 != nullptr && Pids(a.procs_v3, a.device, &pids)) ||
                      (a.procs_v2 != nullptr && Pids(a.procs_v2, a.device, &pids)) ||
                      (a.procs_v1 != nullptr && Pids(a.procs_v1, a.device, &pids));
  if (listed) {
    int others = 0;
    bool self_seen = false;
    for (unsigned int pid : pids) {
      if (static_cast<pid_t>(pid) == self_pid_) {
        self_seen = true;
      } else {
        ++others;
      }
    }
    // In a PID namespace (a container) NVML lists the host's pid of the worker, which holds a
    // context on the device: one of the others is the worker itself. An empty list there means
    // NVML shows no process to this namespace at all: not known.
    if (!self_seen && others > 0) --others;
    s.other_processes = self_seen || !pids.empty() ? others : -1;
    if (s.other_processes < 0) s.detail = "NVML lists no process here (a PID namespace?)";
  } else {
    s.detail = "the device's compute processes could not be listed";
  }
  return s;
}

}  // namespace transposed::cuda_worker
