// --seed: merges the entries of an export file (written by `transposectl export`, one
// ExportedEntry JSON per line) into the daemon's store before it serves.
//
// Thread-safety: call it before serving (it runs on main's thread; the service is thread-safe).
#pragma once

#include <string>

#include "core/status.h"
#include "server/service.h"

namespace transposed {

// Rows that do not parse or validate are logged (warn, "--seed PATH:LINE: skipped: ...") and
// counted as refused at door "seed"; the others are merged in batches of 1000
// (TransposeService::MergeEntries) and the totals logged. NOT_FOUND "--seed: cannot read PATH"
// when the file cannot be read; a failed merge's status otherwise.
Status SeedFromFile(const std::string& path, TransposeService* service);

}  // namespace transposed
