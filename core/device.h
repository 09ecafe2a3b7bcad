// DeviceInfo: the identity of one measuring device (a GPU, or the host CPU).
//
// Defined once here and mapped once per format: proto/transposed/v1 (server/grpc/convert.cc), the
// SQLite `devices` table (store/rows.cc's column table) and the worker protocol. Everything
// except `index` is part of the identity, and so of the cache key root (Fingerprint()).
// Plain value type; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace transposed {

struct DeviceInfo {
  std::string backend;  // "cpu" or "cuda"
  int index = 0;        // position in the daemon's device list (not part of the identity)
  std::string uuid;     // GPU UUID ("GPU-...") or a stable id for a CPU
  std::string name;     // "NVIDIA H100 80GB HBM3", "AMD EPYC 7B13"...
  uint64_t memory_bytes = 0;
  // Compute capability, SM count, L2 bytes, driver and runtime versions; or cores and cache
  // sizes for a CPU. Keys are short snake_case words.
  std::map<std::string, std::string> attributes;
  std::string library_version;  // kernel library version (core/version.h)

  // Stable 16-hex-digit hash (core/hash.h) of all identity fields (not `index`).
  std::string Fingerprint() const;
};

}  // namespace transposed
