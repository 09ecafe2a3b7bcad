// The store's rows: one column table per row type (devices, entries, candidates), the one
// mapping between a row's SQL columns and its fields; the INSERT and SELECT text of each table is
// generated from it, so a column can never be bound or read at the wrong position. On top of the
// tables, the row reads and writes the store API is made of: a device upsert, a tune's entry and
// candidate rows, the entry query and the reading back of entries, each checked
// (store/entry_validation.h), and the migration step that SQL cannot do.
//
// Thread-safety: the functions keep no state (the tables and the SQL built from them are built
// once, on first use, thread-safely); each runs on the connection it is given, which the caller
// uses from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/status.h"
#include "core/tune_result.h"
#include "store/sqlite.h"

namespace transposed {
namespace store_internal {

// Milliseconds since the Unix epoch (system clock): a device's last sighting.
int64_t NowUnixMs();

// Records (or refreshes) a device row, first seen at now_ms the first time; last seen now_ms.
Status UpsertDeviceLocked(sqlite3* db, const DeviceInfo& d, int64_t now_ms);
// Replaces the entry and candidate rows of (r.device, r.problem); the caller holds the
// transaction.
Status SaveTuneLocked(sqlite3* db, const TuneResult& r);

// What every entry query selects: the entry id, the entry's columns, then its device's. `e` is
// entries, `d` is devices.
const std::string& EntrySelect();
// The entries of (class ?1, problem key ?2), those of library version ?3 first, then fastest
// first: the first good one is the answer.
const std::string& ClassLookupSql();
// The next entry of an EntrySelect() statement that reads back whole and passes ValidateEntry,
// with its candidates when asked (its id in *entry_id); nullopt at the end. Rows that do not are
// handed to `skip` and passed over. A failed read of the database is the Status.
StatusOr<std::optional<TuneResult>> NextGoodEntry(
    sqlite3* db, Stmt& st, bool include_candidates, int64_t* entry_id,
    const std::function<void(int64_t, const Status&)>& skip);
// Every device row, in the order first seen.
StatusOr<std::vector<DeviceInfo>> ReadDevices(sqlite3* db);

// Migrations 1 -> 2 and 4 -> 5, the part SQL cannot do: the class key of every device row that
// has none, from its columns.
Status FillDeviceClasses(sqlite3* db);

}  // namespace store_internal
}  // namespace transposed
