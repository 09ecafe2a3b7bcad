#include "core/text.h"

namespace transposed {

std::string Escape(std::string_view value, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t n = value.size() < max_bytes ? value.size() : max_bytes;
  out.reserve(n + 8);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += "\\\""; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  if (value.size() > max_bytes) out += "...";
  return out;
}

std::string Quote(std::string_view value, size_t max_bytes) {
  std::string out = "'" + Escape(value, max_bytes) + "'";
  if (value.size() > max_bytes) out += " (" + std::to_string(value.size()) + " bytes)";
  return out;
}

Status CheckFieldLength(std::string_view field, std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return Status::OK();
  return Status::InvalidArgument(std::string(field) + ": too long (" +
                                 std::to_string(value.size()) + " bytes, at most " +
                                 std::to_string(max_bytes) + "): " + Quote(value));
}

}  // namespace transposed
