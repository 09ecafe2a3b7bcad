// DeviceClass: which devices share tuned results.
//
// A tuned winner depends on the device's silicon and its software stack, not on which physical
// card it ran on: every H100 SXM of a cluster with the same driver branch and CUDA runtime picks
// the same kernel. So results are keyed by the device *class* (ClassOf: the fields
// below, hashed into DeviceClass::key), and each entry records the device *instance* (the
// DeviceInfo with its UUID) it was measured on. An entry measured on one instance is served to
// every instance of its class, marked with where it was measured (`measured_on`).
//
// What is in the class, and why (docs/user/fleet.md, its opening section):
//   every backend: backend, name (the model: "NVIDIA H100 80GB HBM3" vs "NVIDIA H200").
//     Not the kernel library version: each entry keeps the version it was measured with
//     (TuneResult::device.library_version, the store's entries.library_version), so an upgrade
//     keeps the class, and an entry of an older version whose variant still exists is served as
//     provisional (SOURCE_PREVIOUS) while it is re-validated once for the class
//     (server/previous_entry.h; docs/user/fleet.md, "Upgrades").
//   cuda: memory size, compute capability, SM count, L2 size, memory clock and bus width (what
//     bounds a transpose: bandwidth and on-chip caching), CUDA driver major version (the
//     driver's CUDA API level, cudaDriverGetVersion / 1000: a driver *patch* keeps the class,
//     a new driver branch with a new CUDA level does not), CUDA runtime version.
//   cpu: model, architecture, physical cores, logical CPUs, the daemon's thread cap
//     (threads_max: candidates are measured with it), L1d/L2/L3 sizes. Not the RAM size (nodes of
//     one model differ in installed or reserved memory; a transpose does not depend on it).
//   other backends: everything except the UUID (the strictest key that still shares).
// Not in the class: the UUID (the instance), `index`, clocks that are not the memory's
// (sm_clock_khz), shared_mem_per_block_optin (implied by the compute capability), the full driver
// version.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>

#include "core/device.h"

namespace transposed {

struct DeviceClass {
  // The fields that define the class, by name ("backend", "name", "compute_capability",
  // "driver_major", ...).
  std::map<std::string, std::string> fields;
  // 16 hex digits (core/hash.h) over `fields`: the key results are shared under.
  std::string key;
};

DeviceClass ClassOf(const DeviceInfo& device);

// True when a result measured on `measured` may be served for `device`.
inline bool SameClass(const DeviceInfo& a, const DeviceInfo& b) {
  return ClassOf(a).key == ClassOf(b).key;
}

}  // namespace transposed
