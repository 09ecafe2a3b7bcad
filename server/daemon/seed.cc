#include "server/daemon/seed.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <vector>

#include "core/text.h"
#include "core/version.h"
#include "proto/exported_entry_json.h"
#include "server/grpc/convert.h"

namespace transposed {

Status SeedFromFile(const std::string& path, TransposeService* service) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("--seed: cannot read " + path);
  std::vector<TuneResult> rows;
  int64_t invalid = 0, number = 0;
  std::string line;
  auto merge = [&]() -> StatusOr<MergeCounts> {
    auto counts = service->MergeEntries(rows);
    rows.clear();
    return counts;
  };
  MergeCounts total;
  auto add = [&](const MergeCounts& c) {
    total.imported += c.imported;
    total.kept_existing += c.kept_existing;
    total.refused_library_version += c.refused_library_version;
  };
  while (std::getline(in, line)) {
    ++number;
    if (IsBlankLine(line)) continue;
    auto entry = ExportedEntryFromLine(line);
    StatusOr<TuneResult> row =
        entry.ok() ? ExportedEntryFromProto(*entry) : StatusOr<TuneResult>(entry.status());
    if (!row.ok()) {
      ++invalid;
      service->CountRefusedEntry("seed");
      spdlog::warn("--seed {}:{}: skipped: {}", path, number, row.status().ToString());
      continue;
    }
    rows.push_back(std::move(row).value());
    if (rows.size() >= 1000) {
      TR_ASSIGN_OR_RETURN(auto c, merge());
      add(c);
    }
  }
  TR_ASSIGN_OR_RETURN(auto c, merge());
  add(c);
  spdlog::info(
      "--seed {}: imported={} kept_existing={} refused_library_version={} (this daemon has {}) "
      "invalid={}",
      path, total.imported, total.kept_existing, total.refused_library_version, kLibraryVersion,
      invalid);
  return Status::OK();
}

}  // namespace transposed
