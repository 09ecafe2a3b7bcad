// Text from outside (request fields, file contents) made safe to echo into error messages and
// log lines, and bounded in size.
//
// Quote() writes a value between single quotes with every byte that could forge or garble a log
// line escaped: control bytes (newline, carriage return, NUL, ESC...) as \n \r \t or \xNN, the
// quote and the backslash as \' and \\, bytes >= 0x80 as \xNN (so invalid UTF-8 never reaches
// a log or a gRPC status). Long values are cut after `max_bytes` input bytes and the quote says
// how long the value was. CheckFieldLength() refuses a request field longer than its cap with
// INVALID_ARGUMENT naming the field. Pure functions; thread-safe.
// Ours, not absl::CHexEscape: the core must not need Abseil, and Quote also bounds the length and
// says how long the value was (docs/design/architecture.md, "Abseil").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace transposed {

// The longest string any request field may hold (a dtype, a UUID, a variant name, a fingerprint,
// a library version, a page token are all far shorter).
inline constexpr size_t kMaxFieldBytes = 256;
// How much of a value an error message or log line quotes.
inline constexpr size_t kQuoteBytes = 64;

// 'abc' / 'a\nb' / 'aaaa...' (9000 bytes)
std::string Quote(std::string_view value, size_t max_bytes = kQuoteBytes);
// The escaped value without quotes or truncation note (for single tokens in log lines).
std::string Escape(std::string_view value, size_t max_bytes = kQuoteBytes);

// INVALID_ARGUMENT "<field>: too long (9000 bytes, at most 256): 'xxxx...' (9000 bytes)".
Status CheckFieldLength(std::string_view field, std::string_view value,
                        size_t max_bytes = kMaxFieldBytes);

}  // namespace transposed
