#include "core/device_class.h"

#include <cstdlib>

#include "core/hash.h"

namespace transposed {
namespace {

std::string Attribute(const DeviceInfo& d, const std::string& key) {
  auto it = d.attributes.find(key);
  return it == d.attributes.end() ? "" : it->second;
}

// "13000" (cudaDriverGetVersion: 1000 * major + 10 * minor) -> "13". Anything that is not a
// plain positive number is kept whole (never merges two different strings into one class).
std::string DriverMajor(const std::string& version) {
  if (version.empty() || version.size() > 9) return version;
  for (char c : version)
    if (c < '0' || c > '9') return version;
  return std::to_string(std::atol(version.c_str()) / 1000);
}

}  // namespace

DeviceClass ClassOf(const DeviceInfo& d) {
  DeviceClass c;
  auto& f = c.fields;
  f["backend"] = d.backend;
  f["name"] = d.name;
  if (d.backend == "cuda") {
    f["memory_bytes"] = std::to_string(d.memory_bytes);
    // "cublas", "cutensor": the cuBLAS / cuTENSOR the worker loads. A value-exact entry's winner
    // may be cublas.geam or cutensor.permute, which run only where their library loads (and are
    // as fast only with that version). "cublas" is empty without one; "cutensor" is a field only
    // where one loads, so the class of a node without it is what it was before cutensor.permute.
    for (const char* k : {"compute_capability", "sm_count", "l2_bytes", "memory_clock_khz",
                          "memory_bus_width", "runtime_version", "cublas"})
      f[k] = Attribute(d, k);
    if (std::string t = Attribute(d, "cutensor"); !t.empty()) f["cutensor"] = t;
    f["driver_major"] = DriverMajor(Attribute(d, "driver_version"));
  } else if (d.backend == "cpu") {
    for (const char* k :
         {"arch", "cores", "logical_cpus", "threads_max", "l1d_bytes", "l2_bytes", "l3_bytes"})
      f[k] = Attribute(d, k);
  } else {
    f["memory_bytes"] = std::to_string(d.memory_bytes);
    for (const auto& [k, v] : d.attributes) f["attr." + k] = v;
  }
  Fnv1a64 h;
  h.Add("device-class-v2");  // v2: without the kernel library version
  h.Add(static_cast<uint64_t>(f.size()));
  for (const auto& [k, v] : f) {  // std::map: sorted by key
    h.Add(k);
    h.Add(v);
  }
  c.key = h.Hex();
  return c;
}

}  // namespace transposed
