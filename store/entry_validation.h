// Entry validation: the one check of a tuning result that comes from outside this process (an
// ImportEntries row, a `transposed --seed` line, a peer's answer) or that the store reads back
// from its file (a row an older version wrote). Every numeric field must be finite and in range,
// every string and list bounded, the candidates of one entry at most kMaxCandidatesPerEntry and
// their text at most kMaxEntryBytes, so that one entry always fits a reply page (and a gRPC
// message) and nothing it holds can later fail to serialise.
//
// The doors call ValidateEntry after parsing (server/grpc/convert.cc ExportedEntryFromProto, used by
// all three), the store again before it writes a foreign row (Store::Merge) and on every row it
// reads (a row that fails is skipped and counted, the others are served). A refused row is never
// stored. Errors are INVALID_ARGUMENT naming the field as the API spells it
// ("answer.measurement.method.alternatives_median_s['memcpy']: must be a finite number ...").
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tune_result.h"

namespace transposed {

// The most candidate results one entry may hold (a real tune measures tens: docs/lab/benchmark.md).
inline constexpr int kMaxCandidatesPerEntry = 4096;
// The most bytes of text and numbers one entry may hold, as ApproxEntryBytes counts them: an
// entry always fits in a ListEntries page (about 3 MiB) and an ExportEntries message.
inline constexpr size_t kMaxEntryBytes = 1 << 20;
// The longest error text of one measurement.
inline constexpr size_t kMaxMeasurementErrorBytes = 4096;

// An upper bound of the bytes of the entry's ExportedEntry message (strings plus a fixed size
// per number), for kMaxEntryBytes.
size_t ApproxEntryBytes(const TuneResult& r);

// OK, or INVALID_ARGUMENT naming the first bad field: the device described (strings 1..256
// bytes, at most 64 attributes), the problem (ValidateProblem), the winner (name, at most 64
// params) and its valid measurement, the ceiling, the counts (0 <= valid <= tried <= 100000; a
// row from outside must have 1 <= valid, checked where it is parsed),
// tune_seconds in [0, 86400], tuned_at_unix_ms >= 0, at most kMaxCandidatesPerEntry candidates,
// each measurement's times finite in [0, 86400] (valid: > 0), samples,
// warmup and every MeasureMethod field in range, and ApproxEntryBytes <= kMaxEntryBytes. (The
// order min_s <= median_s <= max_s of a row from outside is checked where it is parsed.)
Status ValidateEntry(const TuneResult& r);

// Of one measurement (its fields named under `field`): times, counts, error text, method.
Status ValidateMeasurement(const std::string& field, const Measurement& m, bool must_be_valid);
// Of one MeasureMethod: strings at most 64 bytes, counts >= 0 and bounded, at most 16
// alternatives (keys at most 64 bytes, times finite in [0, 86400]), re-measure factors finite in
// [0, 1e6].
Status ValidateMeasureMethod(const std::string& field, const MeasureMethod& m);

}  // namespace transposed
