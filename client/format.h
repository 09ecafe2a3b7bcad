// Formatting of the service's messages for people and scripts (used by transposectl).
//
// The text forms are for terminals and may change; `transposectl --json` prints the messages
// themselves in the one JSON mapping (proto/json.h). All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "transposed/v1/transposed.pb.h"

namespace transposed {

// "cache", "tuned", "peer", "nearest", "heuristic", "shared", "previous" or "unspecified".
std::string SourceName(v1::Source source);
// "tuned", "imported", "peer", "shared" or "unspecified".
std::string OriginName(v1::Origin origin);

// Milliseconds since the Unix epoch as ISO-8601 UTC, e.g. "2024-05-01T12:34:56.789Z".
std::string IsoTimeUtc(int64_t unix_ms);

// "tile32x32.rows8.vec16" style name; "(none)" when empty.
std::string VariantLabel(const v1::Variant& variant);
// "4096x4096 f32" style, batch and strides only when set, " value-exact" for EXACTNESS_VALUE.
std::string ProblemLabel(const v1::Problem& problem);

// A readable key/value table of an answer (one "key: value" line each, aligned).
std::string AnswerToText(const v1::Answer& answer);
// "[12/40] tile32x32.rows8.vec16.pad1  1234.5 GB/s  valid  quick" (no newline).
std::string ProgressToText(const v1::TuneProgress& progress);
// One line per device.
std::string DeviceToText(const v1::Device& device);
// One line per entry; with candidates, one indented line per candidate below it.
std::string EntryToText(const v1::Entry& entry);

}  // namespace transposed
