// Fnv1a64: the one stable, non-cryptographic hash of transposed (device fingerprints, CPU ids).
//
// 64-bit FNV-1a over a sequence of fields. Every field is followed by a 0xff byte (which never
// occurs in UTF-8 text), so that ("ab","c") and ("a","bc") hash differently. The values are
// stored in databases and compared across builds: never change the algorithm or the field
// encoding. Thread-compatible value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace transposed {

class Fnv1a64 {
 public:
  // A string field: its bytes, then 0xff.
  void Add(std::string_view s) {
    for (unsigned char c : s) Byte(c);
    Byte(0xff);
  }
  // An integer field: its 8 bytes little-endian, then 0xff.
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<unsigned char>(v >> (8 * i)));
    Byte(0xff);
  }
  uint64_t value() const { return h_; }
  // The value as 16 lower-case hex digits.
  std::string Hex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 0; i < 16; ++i) out[15 - i] = kDigits[(h_ >> (4 * i)) & 0xf];
    return out;
  }

 private:
  void Byte(unsigned char c) {
    h_ ^= c;
    h_ *= 0x100000001b3ULL;
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace transposed
