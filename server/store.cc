#include "server/store.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

namespace transposed {
namespace {

// Schema migrations: step i (0-based) takes a file from user_version i to i + 1. Each step ends
// by setting user_version itself, so the version number is part of the SQL text, never a value
// built at run time. Steps are applied in one transaction. Never edit a released step; append.
// server/store_schema.md documents the resulting schema.
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
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Store::kSchemaVersion,
              "one migration step per schema version");

constexpr int kBusyTimeoutMs = 5000;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string SqliteError(sqlite3* db) {
  return std::string(sqlite3_errmsg(db)) + " (sqlite code " +
         std::to_string(sqlite3_extended_errcode(db)) + ")";
}

Status Internal(sqlite3* db, const std::string& what) {
  return Status::Internal("store: " + what + ": " + SqliteError(db));
}

// A prepared statement; finalized on destruction. Values are only ever bound, never spliced.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  static StatusOr<std::unique_ptr<Stmt>> Prepare(sqlite3* db, const std::string& sql) {
    auto s = std::make_unique<Stmt>();
    s->db_ = db;
    if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &s->stmt_, nullptr) !=
        SQLITE_OK) {
      return Internal(db, "prepare \"" + sql.substr(0, 60) + "\"");
    }
    return s;
  }

  Status Bind(int i, const std::string& v) {
    return Check(
        sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Status Bind(int i, int64_t v) { return Check(sqlite3_bind_int64(stmt_, i, v)); }
  Status Bind(int i, int v) { return Check(sqlite3_bind_int64(stmt_, i, v)); }
  // Non-finite reals (a zero time's bandwidth) are stored as NULL.
  Status Bind(int i, double v) {
    return Check(std::isfinite(v) ? sqlite3_bind_double(stmt_, i, v) : sqlite3_bind_null(stmt_, i));
  }
  Status BindNull(int i) { return Check(sqlite3_bind_null(stmt_, i)); }

  // Steps once: true while a row is available, false when done.
  StatusOr<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Internal(db_, "step \"" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "\"");
  }
  // Makes the statement ready to run again with new bindings.
  Status Reset() {
    sqlite3_reset(stmt_);
    return Check(sqlite3_clear_bindings(stmt_));
  }
  Status Run() {
    TR_ASSIGN_OR_RETURN(bool row, Step());
    (void)row;
    return Status::OK();
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    if (t == nullptr) return "";
    return std::string(reinterpret_cast<const char*>(t),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  Status Check(int rc) {
    if (rc != SQLITE_OK) return Internal(db_, "bind");
    return Status::OK();
  }
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return Status::Internal(std::string("store: ") + sql + ": " + msg);
  }
  return Status::OK();
}

StatusOr<int64_t> QueryInt(sqlite3* db, const char* sql) {
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, sql));
  TR_ASSIGN_OR_RETURN(bool row, st->Step());
  if (!row) return Status::Internal(std::string("store: ") + sql + ": no row");
  return st->Int(0);
}

// JSON never throws here: invalid UTF-8 is replaced rather than rejected.
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ParamsJson(const std::map<std::string, int64_t>& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : params) j[k] = v;
  return Dump(j);
}

std::string AttributesJson(const std::map<std::string, std::string>& attrs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : attrs) j[k] = v;
  return Dump(j);
}

StatusOr<std::map<std::string, int64_t>> ParseParams(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("store: params is not a JSON object: " + text.substr(0, 80));
  std::map<std::string, int64_t> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer())
      return Status::Internal("store: params." + it.key() + " is not an integer");
    out[it.key()] = it.value().get<int64_t>();
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> ParseAttributes(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("store: attributes is not a JSON object: " + text.substr(0, 80));
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string())
      return Status::Internal("store: attributes." + it.key() + " is not a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back on any error.
Status InTransaction(sqlite3* db, const std::function<Status()>& body) {
  TR_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
  Status s = body();
  if (s.ok()) s = Exec(db, "COMMIT");
  if (!s.ok() && !sqlite3_get_autocommit(db)) {
    // Rolls back whatever the body or a failed COMMIT left open; its own error adds nothing.
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  return s;
}

Status UpsertDeviceLocked(sqlite3* db, const DeviceInfo& d, int64_t now_ms) {
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, R"sql(
INSERT INTO devices (fingerprint, backend, uuid, name, memory_bytes, attributes, library_version,
                     first_seen_unix_ms, last_seen_unix_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
ON CONFLICT (fingerprint) DO UPDATE SET
  backend = excluded.backend, uuid = excluded.uuid, name = excluded.name,
  memory_bytes = excluded.memory_bytes, attributes = excluded.attributes,
  library_version = excluded.library_version, last_seen_unix_ms = excluded.last_seen_unix_ms
)sql"));
  TR_RETURN_IF_ERROR(st->Bind(1, d.Fingerprint()));
  TR_RETURN_IF_ERROR(st->Bind(2, d.backend));
  TR_RETURN_IF_ERROR(st->Bind(3, d.uuid));
  TR_RETURN_IF_ERROR(st->Bind(4, d.name));
  TR_RETURN_IF_ERROR(st->Bind(5, static_cast<int64_t>(d.memory_bytes)));
  TR_RETURN_IF_ERROR(st->Bind(6, AttributesJson(d.attributes)));
  TR_RETURN_IF_ERROR(st->Bind(7, d.library_version));
  TR_RETURN_IF_ERROR(st->Bind(8, now_ms));
  return st->Run();
}

// The columns every entry query selects, in the order ReadEntry expects. `e` is entries, `d` is
// devices.
constexpr const char* kEntryColumns = R"sql(
  e.id, e.rows, e.cols, e.batch, e.dtype, e.ld_in, e.ld_out, e.variant, e.params,
  e.median_s, e.min_s, e.max_s, e.samples, e.warmup, e.method,
  e.ceiling_valid, e.ceiling_error, e.ceiling_median_s, e.ceiling_min_s, e.ceiling_max_s,
  e.ceiling_samples, e.ceiling_warmup, e.ceiling_method,
  e.candidates_tried, e.candidates_valid, e.tune_seconds, e.tuned_at_unix_ms,
  d.backend, d.uuid, d.name, d.memory_bytes, d.attributes, d.library_version
FROM entries e JOIN devices d ON d.fingerprint = e.device_fingerprint
)sql";

StatusOr<TuneResult> ReadEntry(const Stmt& st, int64_t* entry_id) {
  TuneResult r;
  int c = 0;
  *entry_id = st.Int(c++);
  r.problem.rows = st.Int(c++);
  r.problem.cols = st.Int(c++);
  r.problem.batch = st.Int(c++);
  const std::string dtype = st.Text(c++);
  auto parsed = ParseDType(dtype);
  if (!parsed)
    return Status::Internal("store: entry " + std::to_string(*entry_id) + " has unknown dtype '" +
                            dtype + "'");
  r.problem.dtype = *parsed;
  r.problem.ld_in = st.Int(c++);
  r.problem.ld_out = st.Int(c++);
  r.best.name = st.Text(c++);
  TR_ASSIGN_OR_RETURN(r.best.params, ParseParams(st.Text(c++)));
  Measurement& m = r.best_measurement;
  m.valid = true;  // only valid winners are stored
  m.median_s = st.Real(c++);
  m.min_s = st.Real(c++);
  m.max_s = st.Real(c++);
  m.samples = static_cast<int>(st.Int(c++));
  m.warmup = static_cast<int>(st.Int(c++));
  m.method = st.Text(c++);
  Measurement& ce = r.ceiling;
  ce.valid = st.Int(c++) != 0;
  ce.error = st.Text(c++);
  ce.median_s = st.Real(c++);
  ce.min_s = st.Real(c++);
  ce.max_s = st.Real(c++);
  ce.samples = static_cast<int>(st.Int(c++));
  ce.warmup = static_cast<int>(st.Int(c++));
  ce.method = st.Text(c++);
  r.tried = static_cast<int>(st.Int(c++));
  r.valid = static_cast<int>(st.Int(c++));
  r.tune_seconds = st.Real(c++);
  r.tuned_at_unix_ms = st.Int(c++);
  r.device.backend = st.Text(c++);
  r.device.uuid = st.Text(c++);
  r.device.name = st.Text(c++);
  r.device.memory_bytes = static_cast<uint64_t>(st.Int(c++));
  TR_ASSIGN_OR_RETURN(r.device.attributes, ParseAttributes(st.Text(c++)));
  r.device.library_version = st.Text(c++);
  return r;
}

Status ReadCandidates(sqlite3* db, int64_t entry_id, std::vector<CandidateResult>* out) {
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, R"sql(
SELECT variant, params, phase, valid, error, median_s, min_s, max_s, samples, warmup, method
FROM candidates WHERE entry_id = ?1 ORDER BY id
)sql"));
  TR_RETURN_IF_ERROR(st->Bind(1, entry_id));
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) break;
    CandidateResult c;
    c.candidate.name = st->Text(0);
    TR_ASSIGN_OR_RETURN(c.candidate.params, ParseParams(st->Text(1)));
    c.phase = st->Text(2);
    c.measurement.valid = st->Int(3) != 0;
    c.measurement.error = st->Text(4);
    c.measurement.median_s = st->Real(5);
    c.measurement.min_s = st->Real(6);
    c.measurement.max_s = st->Real(7);
    c.measurement.samples = static_cast<int>(st->Int(8));
    c.measurement.warmup = static_cast<int>(st->Int(9));
    c.measurement.method = st->Text(10);
    out->push_back(std::move(c));
  }
  return Status::OK();
}

// A WHERE clause for a filter: fixed SQL fragments plus the values to bind, in order.
struct Where {
  std::string sql;
  std::vector<std::function<Status(Stmt&, int)>> binds;

  Status BindAll(Stmt& st) const {
    for (size_t i = 0; i < binds.size(); ++i)
      TR_RETURN_IF_ERROR(binds[i](st, static_cast<int>(i) + 1));
    return Status::OK();
  }
};

Where BuildWhere(const StoreFilter& f) {
  Where w;
  auto add = [&w](const char* clause, auto value) {
    w.sql += w.binds.empty() ? " WHERE " : " AND ";
    w.sql += clause;
    w.binds.push_back([value](Stmt& st, int i) { return st.Bind(i, value); });
  };
  if (!f.device_fingerprint.empty()) add("e.device_fingerprint = ?", f.device_fingerprint);
  if (f.dtype) add("e.dtype = ?", std::string(DTypeName(*f.dtype)));
  if (f.rows > 0) add("e.rows = ?", f.rows);
  if (f.cols > 0) add("e.cols = ?", f.cols);
  if (!f.variant.empty()) add("e.variant = ?", f.variant);
  if (f.tuned_before_unix_ms > 0) add("e.tuned_at_unix_ms < ?", f.tuned_before_unix_ms);
  if (!f.library_version.empty()) add("d.library_version = ?", f.library_version);
  return w;
}

bool IsMemoryPath(const std::string& path) { return path == ":memory:"; }

}  // namespace

bool StoreFilter::empty() const {
  return device_fingerprint.empty() && !dtype && rows <= 0 && cols <= 0 && variant.empty() &&
         tuned_before_unix_ms <= 0 && library_version.empty();
}

Store::Store(sqlite3* db) : db_(db) {}

Store::~Store() { sqlite3_close_v2(db_); }

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("store: empty database path");
  if (!IsMemoryPath(path)) {
    std::filesystem::path p(path);
    std::filesystem::path dir = p.parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      return Status::FailedPrecondition("store: cannot open database " + path + ": directory " +
                                        dir.string() + " does not exist");
    }
    if (std::filesystem::is_directory(p, ec)) {
      return Status::FailedPrecondition("store: cannot open database " + path +
                                        ": it is a directory");
    }
  }
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Status::FailedPrecondition("store: cannot open database " + path + ": " + msg);
  }
  // From here on the Store owns the handle, so every early return closes it.
  std::unique_ptr<Store> store(new Store(db));
  auto fail = [&path](const Status& s) {
    return Status(s.code() == StatusCode::kInternal ? StatusCode::kFailedPrecondition : s.code(),
                  "store: cannot open database " + path + ": " + s.message());
  };

  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // The first read of the file: a non-database file fails here.
  auto version = QueryInt(db, "PRAGMA user_version");
  if (!version.ok()) return fail(version.status());
  if (*version > kSchemaVersion) {
    return Status::FailedPrecondition(
        "store: database " + path + " has schema version " + std::to_string(*version) +
        ", newer than this build's schema version " + std::to_string(kSchemaVersion));
  }
  {
    auto st = Stmt::Prepare(db, "PRAGMA journal_mode = WAL");
    if (!st.ok()) return fail(st.status());
    auto row = (*st)->Step();
    if (!row.ok()) return fail(row.status());
    const std::string mode = *row ? (*st)->Text(0) : "";
    if (mode != "wal" && !(IsMemoryPath(path) && mode == "memory")) {
      return Status::FailedPrecondition("store: database " + path +
                                        ": cannot switch to WAL journal mode (got '" + mode + "')");
    }
  }
  for (const char* pragma : {"PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON"}) {
    Status s = Exec(db, pragma);
    if (!s.ok()) return fail(s);
  }

  // Migrate from the version read again inside the write transaction, so that two processes
  // opening a fresh file at once apply each step exactly once.
  Status migrated = InTransaction(db, [db, &path]() -> Status {
    TR_ASSIGN_OR_RETURN(int64_t v, QueryInt(db, "PRAGMA user_version"));
    if (v > kSchemaVersion) {
      return Status::FailedPrecondition(
          "store: database " + path + " has schema version " + std::to_string(v) +
          ", newer than this build's schema version " + std::to_string(kSchemaVersion));
    }
    for (int64_t step = v; step < kSchemaVersion; ++step) {
      Status s = Exec(db, kMigrations[step]);
      if (!s.ok()) {
        return Status::Internal("store: migration of " + path + " from schema version " +
                                std::to_string(step) + " failed: " + s.message());
      }
    }
    return Status::OK();
  });
  if (!migrated.ok()) return migrated;
  return store;
}

Status Store::UpsertDevice(const DeviceInfo& device) {
  std::lock_guard<std::mutex> lock(mu_);
  return UpsertDeviceLocked(db_, device, NowUnixMs());
}

Status Store::SaveTune(const TuneResult& r) {
  if (!r.best_measurement.valid) {
    return Status::InvalidArgument("store: refusing to save a tune of " + r.problem.ToString() +
                                   " without a valid winner");
  }
  const std::string fingerprint = r.device.Fingerprint();
  const std::string key = r.problem.Key();
  const double gbps = r.gbps();
  const double ceiling_gbps = r.ceiling.valid ? r.ceiling_gbps() : 0;
  std::lock_guard<std::mutex> lock(mu_);
  return InTransaction(db_, [&]() -> Status {
    TR_RETURN_IF_ERROR(UpsertDeviceLocked(db_, r.device, NowUnixMs()));
    {
      TR_ASSIGN_OR_RETURN(auto del, Stmt::Prepare(db_, R"sql(
DELETE FROM entries WHERE device_fingerprint = ?1 AND problem_key = ?2
)sql"));
      TR_RETURN_IF_ERROR(del->Bind(1, fingerprint));
      TR_RETURN_IF_ERROR(del->Bind(2, key));
      TR_RETURN_IF_ERROR(del->Run());
    }
    TR_ASSIGN_OR_RETURN(auto ins, Stmt::Prepare(db_, R"sql(
INSERT INTO entries (device_fingerprint, problem_key, rows, cols, batch, dtype, ld_in, ld_out,
  variant, params, gbps, ceiling_gbps, ratio, median_s, min_s, max_s, samples, warmup, method,
  ceiling_valid, ceiling_error, ceiling_median_s, ceiling_min_s, ceiling_max_s, ceiling_samples,
  ceiling_warmup, ceiling_method, candidates_tried, candidates_valid, tune_seconds,
  tuned_at_unix_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
  ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)
)sql"));
    const Measurement& m = r.best_measurement;
    const Measurement& ce = r.ceiling;
    int i = 1;
    TR_RETURN_IF_ERROR(ins->Bind(i++, fingerprint));
    TR_RETURN_IF_ERROR(ins->Bind(i++, key));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.problem.rows));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.problem.cols));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.problem.batch));
    TR_RETURN_IF_ERROR(ins->Bind(i++, std::string(DTypeName(r.problem.dtype))));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.problem.ld_in));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.problem.ld_out));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.best.name));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ParamsJson(r.best.params)));
    TR_RETURN_IF_ERROR(ins->Bind(i++, gbps));
    if (ceiling_gbps > 0) {
      TR_RETURN_IF_ERROR(ins->Bind(i++, ceiling_gbps));
      TR_RETURN_IF_ERROR(ins->Bind(i++, gbps / ceiling_gbps));
    } else {
      TR_RETURN_IF_ERROR(ins->BindNull(i++));
      TR_RETURN_IF_ERROR(ins->BindNull(i++));
    }
    TR_RETURN_IF_ERROR(ins->Bind(i++, m.median_s));
    TR_RETURN_IF_ERROR(ins->Bind(i++, m.min_s));
    TR_RETURN_IF_ERROR(ins->Bind(i++, m.max_s));
    TR_RETURN_IF_ERROR(ins->Bind(i++, m.samples));
    TR_RETURN_IF_ERROR(ins->Bind(i++, m.warmup));
    TR_RETURN_IF_ERROR(ins->Bind(i++, m.method));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.valid ? 1 : 0));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.error));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.median_s));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.min_s));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.max_s));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.samples));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.warmup));
    TR_RETURN_IF_ERROR(ins->Bind(i++, ce.method));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.tried));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.valid));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.tune_seconds));
    TR_RETURN_IF_ERROR(ins->Bind(i++, r.tuned_at_unix_ms));
    TR_RETURN_IF_ERROR(ins->Run());
    const int64_t entry_id = sqlite3_last_insert_rowid(db_);

    TR_ASSIGN_OR_RETURN(auto cand, Stmt::Prepare(db_, R"sql(
INSERT INTO candidates (entry_id, variant, params, phase, valid, error, median_s, min_s, max_s,
  samples, warmup, gbps, method)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
)sql"));
    for (const CandidateResult& c : r.candidates) {
      const Measurement& cm = c.measurement;
      TR_RETURN_IF_ERROR(cand->Bind(1, entry_id));
      TR_RETURN_IF_ERROR(cand->Bind(2, c.candidate.name));
      TR_RETURN_IF_ERROR(cand->Bind(3, ParamsJson(c.candidate.params)));
      TR_RETURN_IF_ERROR(cand->Bind(4, c.phase));
      TR_RETURN_IF_ERROR(cand->Bind(5, cm.valid ? 1 : 0));
      TR_RETURN_IF_ERROR(cand->Bind(6, cm.error));
      TR_RETURN_IF_ERROR(cand->Bind(7, cm.median_s));
      TR_RETURN_IF_ERROR(cand->Bind(8, cm.min_s));
      TR_RETURN_IF_ERROR(cand->Bind(9, cm.max_s));
      TR_RETURN_IF_ERROR(cand->Bind(10, cm.samples));
      TR_RETURN_IF_ERROR(cand->Bind(11, cm.warmup));
      if (cm.valid && cm.median_s > 0) {
        TR_RETURN_IF_ERROR(cand->Bind(12, EffectiveGBps(r.problem.bytes(), cm.median_s)));
      } else {
        TR_RETURN_IF_ERROR(cand->BindNull(12));
      }
      TR_RETURN_IF_ERROR(cand->Bind(13, cm.method));
      TR_RETURN_IF_ERROR(cand->Run());
      TR_RETURN_IF_ERROR(cand->Reset());
    }
    return Status::OK();
  });
}

StatusOr<std::optional<TuneResult>> Store::Lookup(const std::string& device_fingerprint,
                                                  const Problem& problem, bool include_candidates) {
  std::lock_guard<std::mutex> lock(mu_);
  TR_ASSIGN_OR_RETURN(
      auto st, Stmt::Prepare(db_, std::string("SELECT ") + kEntryColumns +
                                      " WHERE e.device_fingerprint = ?1 AND e.problem_key = ?2"));
  TR_RETURN_IF_ERROR(st->Bind(1, device_fingerprint));
  TR_RETURN_IF_ERROR(st->Bind(2, problem.Key()));
  TR_ASSIGN_OR_RETURN(bool row, st->Step());
  if (!row) return std::optional<TuneResult>();
  int64_t entry_id = 0;
  TR_ASSIGN_OR_RETURN(TuneResult r, ReadEntry(*st, &entry_id));
  if (include_candidates) TR_RETURN_IF_ERROR(ReadCandidates(db_, entry_id, &r.candidates));
  return std::optional<TuneResult>(std::move(r));
}

StatusOr<std::vector<TuneResult>> Store::List(const StoreFilter& filter, bool include_candidates,
                                              int limit) {
  const Where where = BuildWhere(filter);
  std::string sql = std::string("SELECT ") + kEntryColumns + where.sql +
                    " ORDER BY e.tuned_at_unix_ms DESC, e.id DESC";
  if (limit > 0) sql += " LIMIT ?";
  std::lock_guard<std::mutex> lock(mu_);
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db_, sql));
  TR_RETURN_IF_ERROR(where.BindAll(*st));
  if (limit > 0) TR_RETURN_IF_ERROR(st->Bind(static_cast<int>(where.binds.size()) + 1, limit));
  std::vector<TuneResult> out;
  std::vector<int64_t> ids;
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) break;
    int64_t id = 0;
    TR_ASSIGN_OR_RETURN(TuneResult r, ReadEntry(*st, &id));
    out.push_back(std::move(r));
    ids.push_back(id);
  }
  if (include_candidates) {
    for (size_t i = 0; i < out.size(); ++i)
      TR_RETURN_IF_ERROR(ReadCandidates(db_, ids[i], &out[i].candidates));
  }
  return out;
}

StatusOr<int64_t> Store::Delete(const StoreFilter& filter) {
  const Where where = BuildWhere(filter);
  const std::string sql =
      "DELETE FROM entries WHERE id IN (SELECT e.id FROM entries e JOIN devices d "
      "ON d.fingerprint = e.device_fingerprint" +
      where.sql + ")";
  std::lock_guard<std::mutex> lock(mu_);
  int64_t deleted = 0;
  TR_RETURN_IF_ERROR(InTransaction(db_, [&]() -> Status {
    TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db_, sql));
    TR_RETURN_IF_ERROR(where.BindAll(*st));
    TR_RETURN_IF_ERROR(st->Run());
    deleted = sqlite3_changes64(db_);
    return Status::OK();
  }));
  return deleted;
}

StatusOr<std::vector<DeviceInfo>> Store::Devices() {
  std::lock_guard<std::mutex> lock(mu_);
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db_, R"sql(
SELECT backend, uuid, name, memory_bytes, attributes, library_version
FROM devices ORDER BY first_seen_unix_ms, fingerprint
)sql"));
  std::vector<DeviceInfo> out;
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) break;
    DeviceInfo d;
    d.backend = st->Text(0);
    d.uuid = st->Text(1);
    d.name = st->Text(2);
    d.memory_bytes = static_cast<uint64_t>(st->Int(3));
    TR_ASSIGN_OR_RETURN(d.attributes, ParseAttributes(st->Text(4)));
    d.library_version = st->Text(5);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace transposed
