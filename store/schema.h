// The store's schema: the migrations (one SQL step per schema version, applied together in one
// transaction, each ending by setting user_version), the adoption of a schema restored without
// its version (sqlite3 .dump writes none), and the probe write that tells whether a file can be
// written. The tables and every step are documented in store/schema.md.
//
// Thread-safety: the functions keep no state; each runs on the connection it is given, which the
// caller uses from one thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "store/sqlite.h"

namespace transposed {
namespace store_internal {

// The file's schema version (PRAGMA user_version), read first after opening: a file that is not
// a database fails here (OpenFailure). FAILED_PRECONDITION when newer than this build's.
StatusOr<int64_t> ReadSchemaVersion(sqlite3* db, const std::string& path);
// Migrates the file to Store::kSchemaVersion from the version read again here, so that two
// processes opening a fresh file at once apply each step exactly once; the caller holds the write
// transaction. Tables without a version are adopted when they are exactly this build's schema.
Status Migrate(sqlite3* db, const std::string& path);
// The columns of every table, to recognise a schema restored without its user_version:
// "table(col,col,...);..." in name order.
StatusOr<std::string> SchemaShape(sqlite3* db);
// SchemaShape of this build's schema (every migration applied to an in-memory database).
StatusOr<std::string> CurrentSchemaShape();
// One real write that changes nothing: the schema version, set to what it is. Fails for a
// read-only file and, when the write-ahead log has to grow, for a full disk.
Status ProbeWrite(sqlite3* db);

}  // namespace store_internal
}  // namespace transposed
