#include "core/device.h"

#include "core/hash.h"

namespace transposed {

std::string DeviceInfo::Fingerprint() const {
  Fnv1a64 h;
  h.Add(backend);
  h.Add(uuid);
  h.Add(name);
  h.Add(memory_bytes);
  h.Add(static_cast<uint64_t>(attributes.size()));
  for (const auto& [key, value] : attributes) {  // std::map: sorted by key
    h.Add(key);
    h.Add(value);
  }
  h.Add(library_version);
  return h.Hex();
}

}  // namespace transposed
