#include "tuner/backend.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <utility>

namespace transposed {
namespace {

// 64-bit FNV-1a. Every field is followed by a 0xff byte (which never occurs in UTF-8 text), so
// that ("ab","c") and ("a","bc") hash differently.
class Fnv1a64 {
 public:
  void Add(const std::string& s) {
    for (unsigned char c : s) Byte(c);
    Byte(0xff);
  }
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<unsigned char>(v >> (8 * i)));
    Byte(0xff);
  }
  uint64_t value() const { return h_; }

 private:
  void Byte(unsigned char c) {
    h_ ^= c;
    h_ *= 0x100000001b3ULL;
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace

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
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, h.value());
  return buf;
}

Measurement Measurement::FromSamples(std::vector<double> samples_s, int warmup,
                                     std::string method) {
  Measurement m;
  m.warmup = warmup;
  m.method = std::move(method);
  if (samples_s.empty()) {
    m.error = "no samples";
    return m;
  }
  std::sort(samples_s.begin(), samples_s.end());
  const size_t n = samples_s.size();
  m.valid = true;
  m.samples = static_cast<int>(n);
  m.min_s = samples_s.front();
  m.max_s = samples_s.back();
  m.median_s = n % 2 == 1 ? samples_s[n / 2] : 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
  return m;
}

Measurement Measurement::Invalid(std::string error) {
  Measurement m;
  m.valid = false;
  m.error = std::move(error);
  return m;
}

}  // namespace transposed
