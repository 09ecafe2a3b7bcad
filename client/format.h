// Formatting of the service's messages for people and scripts (used by transposectl).
//
// The JSON forms are the stable, documented output of `transposectl --json`; the text forms are
// for terminals and may change. All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "transposed/v1/transposed.pb.h"

namespace transposed {

// "cache", "tuned", "peer", "nearest", "heuristic", "shared" or "unspecified".
std::string SourceName(v1::Source source);
// "tuned", "imported", "peer", "shared" or "unspecified".
std::string OriginName(v1::Origin origin);

// Milliseconds since the Unix epoch as ISO-8601 UTC, e.g. "2024-05-01T12:34:56.789Z".
std::string IsoTimeUtc(int64_t unix_ms);

nlohmann::ordered_json ProblemToJson(const v1::Problem& problem);
nlohmann::ordered_json DeviceToJson(const v1::Device& device);
nlohmann::ordered_json MeasurementToJson(const v1::Measurement& measurement);
nlohmann::ordered_json CandidateToJson(const v1::CandidateResult& candidate);
// One object with: variant (name), params, backend, gbps, ceiling_gbps, ratio, rel_spread,
// source, device {index, name, uuid, backend, fingerprint, memory_bytes, library_version},
// problem {rows, cols, batch, dtype, ld_in, ld_out, exactness}, tuned_at (ISO-8601 UTC), tuned_at_unix_ms,
// candidates_tried, candidates_valid, tune_seconds, measurement, ceiling.
nlohmann::ordered_json AnswerToJson(const v1::Answer& answer);
// An entry: the answer's fields, plus "candidates" (an array) when the entry has any.
nlohmann::ordered_json EntryToJson(const v1::Entry& entry);
// A streamed Tune message: {"event":"candidate","index","total",...candidate fields} or
// {"event":"answer","index","total",...AnswerToJson fields}.
nlohmann::ordered_json ProgressToJson(const v1::TuneProgress& progress);

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
