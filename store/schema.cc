#include "store/schema.h"

#include "store/rows.h"
#include "store/store.h"

namespace transposed {
namespace store_internal {
namespace {

// Schema migrations: step i (0-based) takes a file from user_version i to i + 1. Each step ends
// by setting user_version itself, so the version number is part of the SQL text, never a value
// built at run time. Steps are applied in one transaction. Never edit a released step; append.
// store/schema.md documents the resulting schema.
const char* const kMigrations[] = {
    // 0 -> 1: the initial schema.
    R"sql(
CREATE TABLE devices (
  fingerprint        TEXT PRIMARY KEY NOT NULL,
  backend            TEXT NOT NULL,
  uuid               TEXT NOT NULL,
  name               TEXT NOT NULL,
  memory_bytes       INTEGER NOT NULL,
  attributes         TEXT NOT NULL DEFAULT '{}',
  library_version    TEXT NOT NULL,
  first_seen_unix_ms INTEGER NOT NULL,
  last_seen_unix_ms  INTEGER NOT NULL
);
CREATE INDEX devices_library_version ON devices(library_version);

CREATE TABLE entries (
  id                 INTEGER PRIMARY KEY,
  device_fingerprint TEXT NOT NULL REFERENCES devices(fingerprint) ON DELETE CASCADE,
  problem_key        TEXT NOT NULL,
  rows               INTEGER NOT NULL,
  cols               INTEGER NOT NULL,
  batch              INTEGER NOT NULL,
  dtype              TEXT NOT NULL,
  ld_in              INTEGER NOT NULL,
  ld_out             INTEGER NOT NULL,
  variant            TEXT NOT NULL,
  params             TEXT NOT NULL DEFAULT '{}',
  gbps               REAL,
  ceiling_gbps       REAL,
  ratio              REAL,
  median_s           REAL NOT NULL,
  min_s              REAL NOT NULL,
  max_s              REAL NOT NULL,
  samples            INTEGER NOT NULL,
  warmup             INTEGER NOT NULL,
  method             TEXT NOT NULL DEFAULT '',
  ceiling_valid      INTEGER NOT NULL,
  ceiling_error      TEXT NOT NULL DEFAULT '',
  ceiling_median_s   REAL NOT NULL,
  ceiling_min_s      REAL NOT NULL,
  ceiling_max_s      REAL NOT NULL,
  ceiling_samples    INTEGER NOT NULL,
  ceiling_warmup     INTEGER NOT NULL,
  ceiling_method     TEXT NOT NULL DEFAULT '',
  candidates_tried   INTEGER NOT NULL,
  candidates_valid   INTEGER NOT NULL,
  tune_seconds       REAL NOT NULL,
  tuned_at_unix_ms   INTEGER NOT NULL,
  UNIQUE (device_fingerprint, problem_key)
);
CREATE INDEX entries_shape ON entries(dtype, rows, cols);
CREATE INDEX entries_variant ON entries(variant);
CREATE INDEX entries_tuned_at ON entries(tuned_at_unix_ms);

CREATE TABLE candidates (
  id       INTEGER PRIMARY KEY,
  entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
  variant  TEXT NOT NULL,
  params   TEXT NOT NULL DEFAULT '{}',
  phase    TEXT NOT NULL,
  valid    INTEGER NOT NULL,
  error    TEXT NOT NULL DEFAULT '',
  median_s REAL NOT NULL,
  min_s    REAL NOT NULL,
  max_s    REAL NOT NULL,
  samples  INTEGER NOT NULL,
  warmup   INTEGER NOT NULL,
  gbps     REAL,
  method   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX candidates_entry ON candidates(entry_id);

PRAGMA user_version = 1;
)sql",
    // 1 -> 2: device classes (core/device_class.h) and where entries came from. device_class of
    // the rows already there is filled in by Store::Open right after this step (it is a hash
    // computed in C++), so an old database's entries are served to every device of their class.
    R"sql(
ALTER TABLE devices ADD COLUMN device_class TEXT NOT NULL DEFAULT '';
CREATE INDEX devices_device_class ON devices(device_class);
ALTER TABLE entries ADD COLUMN origin TEXT NOT NULL DEFAULT 'tuned';
PRAGMA user_version = 2;
)sql",
    // 2 -> 3: value-exact problems (core/problem.h Exactness). Every entry of an older file was
    // tuned bit-exact, and its problem_key (Problem::Key() of a bit-exact problem) is unchanged.
    R"sql(
ALTER TABLE entries ADD COLUMN exactness TEXT NOT NULL DEFAULT 'bit';
PRAGMA user_version = 3;
)sql",
    // 3 -> 4: results measured under contention (TuneResult::contention; server/polite.h). Every
    // entry of an older file is taken as measured on an idle device.
    R"sql(
ALTER TABLE entries ADD COLUMN contention TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 4;
)sql",
    // 4 -> 5: the kernel library version moves from the device class into each entry (the
    // version the entry was measured with), so an upgrade keeps the class and its entries
    // (core/device_class.h). Every entry takes its device row's version; every device row's class
    // key is computed again (without the version) by Store::Open right after this step.
    R"sql(
ALTER TABLE entries ADD COLUMN library_version TEXT NOT NULL DEFAULT '';
UPDATE entries SET library_version =
  (SELECT d.library_version FROM devices d WHERE d.fingerprint = entries.device_fingerprint);
CREATE INDEX entries_library_version ON entries(library_version);
UPDATE devices SET device_class = '';
PRAGMA user_version = 5;
)sql",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Store::kSchemaVersion,
              "one migration step per schema version");

}  // namespace

#define TRANSPOSED_SCHEMA_VERSION_TEXT "5"
static_assert(Store::kSchemaVersion == 5, "update TRANSPOSED_SCHEMA_VERSION_TEXT");

StatusOr<int64_t> ReadSchemaVersion(sqlite3* db, const std::string& path) {
  auto version = QueryInt(db, "PRAGMA user_version");
  if (!version.ok()) return OpenFailure(path, version.status());
  if (*version > Store::kSchemaVersion) {
    return Status::FailedPrecondition(
        "store: database " + path + " has schema version " + std::to_string(*version) +
        ", newer than this build's schema version " + std::to_string(Store::kSchemaVersion));
  }
  return *version;
}

Status Migrate(sqlite3* db, const std::string& path) {
  constexpr int kSchemaVersion = Store::kSchemaVersion;
  TR_ASSIGN_OR_RETURN(int64_t v, QueryInt(db, "PRAGMA user_version"));
  if (v > kSchemaVersion) {
    return Status::FailedPrecondition(
        "store: database " + path + " has schema version " + std::to_string(v) +
        ", newer than this build's schema version " + std::to_string(kSchemaVersion));
  }
  if (v == 0) {
    // Tables without a version: a restore of `sqlite3 .dump` output (which does not carry
    // user_version). Adopt them if they are exactly this build's schema.
    TR_ASSIGN_OR_RETURN(std::string shape, SchemaShape(db));
    if (!shape.empty()) {
      TR_ASSIGN_OR_RETURN(std::string want, CurrentSchemaShape());
      if (shape != want) {
        return Status::FailedPrecondition(
            "store: database " + path +
            " has tables but no schema version (user_version 0), and they are not schema "
            "version " + std::to_string(kSchemaVersion) + " of this build: has " +
            shape.substr(0, 200) + (shape.size() > 200 ? "..." : ""));
      }
      return Exec(db, "PRAGMA user_version = " TRANSPOSED_SCHEMA_VERSION_TEXT);
    }
  }
  for (int64_t step = v; step < kSchemaVersion; ++step) {
    Status s = Exec(db, kMigrations[step]);
    if (!s.ok()) {
      return Status::Internal("store: migration of " + path + " from schema version " +
                              std::to_string(step) + " failed: " + s.message());
    }
  }
  // Classes are computed in C++: added in version 2, computed without the library version from 5.
  if (v < 5) TR_RETURN_IF_ERROR(FillDeviceClasses(db));
  return Status::OK();
}

StatusOr<std::string> SchemaShape(sqlite3* db) {
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, R"sql(
SELECT m.name, group_concat(p.name, ',') FROM sqlite_master m, pragma_table_info(m.name) p
WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' GROUP BY m.name ORDER BY m.name
)sql"));
  std::string shape;
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) break;
    shape += st->Text(0) + "(" + st->Text(1) + ");";
  }
  return shape;
}

StatusOr<std::string> CurrentSchemaShape() {
  sqlite3* mem = nullptr;
  if (sqlite3_open(":memory:", &mem) != SQLITE_OK) {
    sqlite3_close(mem);
    return Status::Internal("store: cannot open an in-memory database");
  }
  Status s;
  for (const char* step : kMigrations) {
    s = Exec(mem, step);
    if (!s.ok()) break;
  }
  StatusOr<std::string> shape = s.ok() ? SchemaShape(mem) : StatusOr<std::string>(s);
  sqlite3_close(mem);
  return shape;
}

Status ProbeWrite(sqlite3* db) {
  return InTransaction(db, [db]() -> Status {
    return Exec(db, "PRAGMA user_version = " TRANSPOSED_SCHEMA_VERSION_TEXT);
  });
}


}  // namespace store_internal
}  // namespace transposed
