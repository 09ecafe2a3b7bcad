// The one JSON-lines format of exported entries (`transposectl export`, `transposectl import`,
// `transposed --seed`): one transposed.v1.ExportedEntry per line, in the one JSON mapping
// (proto/json.h) and read back by protobuf's JSON parser (unknown fields refused).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "transposed/v1/transposed.pb.h"

namespace transposed {

// The longest line read (an entry with every candidate of a large tune is well below).
inline constexpr size_t kMaxExportedLineBytes = 64 << 20;

// One line, without the newline.
StatusOr<std::string> ExportedEntryToLine(const v1::ExportedEntry& entry);
// INVALID_ARGUMENT "not an ExportedEntry: ..." for a line that does not parse.
StatusOr<v1::ExportedEntry> ExportedEntryFromLine(const std::string& line);
// True for a line to skip: blank (spaces, tabs, a carriage return).
bool IsBlankLine(const std::string& line);

}  // namespace transposed
