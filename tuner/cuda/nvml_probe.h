// NvmlProbe: the driver's view of how busy one GPU is, for the worker process that owns it
// (issue 26's busy signal; core/device_load.h).
//
// NVML (libnvidia-ml.so.1, part of the driver, not of the CUDA toolkit) is loaded at run time
// with dlopen, so the worker builds and runs without it: a missing library, a missing symbol, a
// failed nvmlInit or a device NVML does not know makes every sample "no source" with the reason
// in LoadSample::detail, never an error. Each Sample() reads the device's utilization (the share
// of the driver's last sample period in which a kernel ran) and counts the compute processes on
// it other than `self_pid` (the worker itself), so a job running beside the daemon shows up (in
// a PID namespace, where NVML lists the host's pid, one process stands for the worker instead,
// and an empty list, which NVML gives a namespace that sees no process, leaves them unknown).
// Only the few NVML entry points it calls are declared here (their C ABI is stable across
// drivers); the process list uses nvmlDeviceGetComputeRunningProcesses_v3, else _v2, else the
// first version, each with its own record layout.
//
// Thread-safety: none; one per worker, used by its serve loop only.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/device_load.h"

namespace transposed::cuda_worker {

class NvmlProbe {
 public:
  // Loads `library` ("libnvidia-ml.so.1" in the worker; tests pass a name that does not exist)
  // and finds the device whose UUID is `uuid` ("GPU-...", DeviceInfo::uuid). Never fails: a
  // probe that cannot sample says why in every sample.
  NvmlProbe(const std::string& library, const std::string& uuid, pid_t self_pid);
  ~NvmlProbe();
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  LoadSample Sample();

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  std::string unavailable_;  // non-empty: why there is no sample
  pid_t self_pid_;
};

}  // namespace transposed::cuda_worker
