#include "store/store.h"

#include "core/device_class.h"
#include "store/entry_validation.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace transposed {
namespace {

// Schema migrations: step i (0-based) takes a file from user_version i to i + 1. Each step ends
// by setting user_version itself, so the version number is part of the SQL text, never a value
// built at run time. Steps are applied in one transaction. Never edit a released step; append.
// docs/design/store.md documents the resulting schema.
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
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Store::kSchemaVersion,
              "one migration step per schema version");

constexpr int kBusyTimeoutMs = 5000;
// Reads wait at most this long for a lock (in WAL mode only a checkpoint or an exclusive lock
// held elsewhere makes them wait at all); then UNAVAILABLE.
constexpr int kReadBusyTimeoutMs = 250;
#define TRANSPOSED_SCHEMA_VERSION_TEXT "4"
static_assert(Store::kSchemaVersion == 4, "update TRANSPOSED_SCHEMA_VERSION_TEXT");

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string SqliteError(sqlite3* db) {
  return std::string(sqlite3_errmsg(db)) + " (sqlite code " +
         std::to_string(sqlite3_extended_errcode(db)) + ")";
}

// A failed call's Status: UNAVAILABLE when another connection or process holds a lock (worth a
// retry), FAILED_PRECONDITION when the file cannot be written, INTERNAL otherwise.
Status ErrorStatus(sqlite3* db, const std::string& message) {
  switch (sqlite3_extended_errcode(db) & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(message + " (the database is locked by another connection or "
                                           "process; retry later)");
    case SQLITE_READONLY:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      return Status::FailedPrecondition(message);
    default:
      return Status::Internal(message);
  }
}

Status Internal(sqlite3* db, const std::string& what) {
  return ErrorStatus(db, "store: " + what + ": " + SqliteError(db));
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
    // Quote only the start of the statement: a migration is dozens of lines.
    std::string head(sql);
    const size_t first = head.find_first_not_of(" \n");
    head = first == std::string::npos ? "" : head.substr(first);
    if (head.size() > 60) head = head.substr(0, 60) + "...";
    for (char& c : head)
      if (c == '\n') c = ' ';
    return ErrorStatus(db, "store: \"" + head + "\": " + msg);
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

// --- SQL values: one overload pair per C++ type the tables store. ------------------------------

Status ToSql(Stmt& st, int i, const std::string& v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, int64_t v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, int v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, uint64_t v) { return st.Bind(i, static_cast<int64_t>(v)); }
Status ToSql(Stmt& st, int i, double v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, bool v) { return st.Bind(i, v ? 1 : 0); }
Status ToSql(Stmt& st, int i, DType v) { return st.Bind(i, std::string(DTypeName(v))); }
Status ToSql(Stmt& st, int i, Phase v) { return st.Bind(i, std::string(PhaseName(v))); }
Status ToSql(Stmt& st, int i, Origin v) { return st.Bind(i, std::string(OriginName(v))); }
Status ToSql(Stmt& st, int i, Exactness v) { return st.Bind(i, std::string(ExactnessName(v))); }
Status ToSql(Stmt& st, int i, const std::optional<double>& v) {
  return v ? st.Bind(i, *v) : st.BindNull(i);
}
Status ToSql(Stmt& st, int i, const std::map<std::string, int64_t>& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : params) j[k] = v;
  return st.Bind(i, Dump(j));
}
Status ToSql(Stmt& st, int i, const std::map<std::string, std::string>& attrs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : attrs) j[k] = v;
  return st.Bind(i, Dump(j));
}

// A MeasureMethod is one JSON object column (its field names as keys; zero fields left out).
// Rows of older versions held free-form JSON with the same key names, the measurement's own
// fields sometimes nested under "round" or "measurement": those are read too, other keys ignored.
Status ToSql(Stmt& st, int i, const MeasureMethod& m) {
  nlohmann::json j = nlohmann::json::object();
  auto put = [&j](const char* key, const auto& v, bool set) {
    if (set) j[key] = v;
  };
  put("timer", m.timer, !m.timer.empty());
  put("op", m.op, !m.op.empty());
  put("launches_per_sample", m.launches_per_sample, m.launches_per_sample != 0);
  put("buffers", m.buffers, m.buffers != 0);
  put("working_set_bytes", m.working_set_bytes, m.working_set_bytes != 0);
  put("cache_bytes", m.cache_bytes, m.cache_bytes != 0);
  put("working_set_capped", m.working_set_capped, m.working_set_capped);
  put("threads", m.threads, m.threads != 0);
  put("sm_clock_khz", m.sm_clock_khz, m.sm_clock_khz != 0);
  put("memory_clock_khz", m.memory_clock_khz, m.memory_clock_khz != 0);
  put("preempted_retaken", m.preempted_retaken, m.preempted_retaken != 0);
  put("preempted_kept", m.preempted_kept, m.preempted_kept != 0);
  put("alternatives_median_s", m.alternatives_median_s, !m.alternatives_median_s.empty());
  put("final_rounds", m.final_rounds, m.final_rounds != 0);
  put("remeasured_after_rel_spread", m.remeasured_after_rel_spread,
      m.remeasured_after_rel_spread != 0);
  put("remeasured_after_slowdown", m.remeasured_after_slowdown, m.remeasured_after_slowdown != 0);
  return st.Bind(i, Dump(j));
}
Status FromSql(const Stmt& st, int i, MeasureMethod* out) {
  const std::string text = st.Text(i);
  *out = MeasureMethod();
  if (text.empty()) return Status::OK();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("method: not a JSON object: " + text.substr(0, 80));
  // Older rows: the measurement's fields one level down.
  for (const char* nested : {"measurement", "round"}) {
    for (int depth = 0; depth < 2 && j.contains(nested) && j[nested].is_object(); ++depth) {
      nlohmann::json inner = j[nested];
      j.erase(nested);
      for (auto it = inner.begin(); it != inner.end(); ++it) {
        if (!j.contains(it.key())) j[it.key()] = it.value();
      }
    }
  }
  try {
    auto get = [&j](const char* key, auto* field) {
      if (j.contains(key) && !j[key].is_null()) j[key].get_to(*field);
    };
    get("timer", &out->timer);
    get("op", &out->op);
    get("launches_per_sample", &out->launches_per_sample);
    get("buffers", &out->buffers);
    get("working_set_bytes", &out->working_set_bytes);
    get("cache_bytes", &out->cache_bytes);
    get("working_set_capped", &out->working_set_capped);
    get("threads", &out->threads);
    get("sm_clock_khz", &out->sm_clock_khz);
    get("memory_clock_khz", &out->memory_clock_khz);
    get("preempted_retaken", &out->preempted_retaken);
    get("preempted_kept", &out->preempted_kept);
    get("alternatives_median_s", &out->alternatives_median_s);
    get("final_rounds", &out->final_rounds);
    get("remeasured_after_rel_spread", &out->remeasured_after_rel_spread);
    get("remeasured_after_slowdown", &out->remeasured_after_slowdown);
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("method: ") + e.what());
  }
  return Status::OK();
}

Status FromSql(const Stmt& st, int i, std::string* v) {
  *v = st.Text(i);
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, int64_t* v) {
  *v = st.Int(i);
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, int* v) {
  *v = static_cast<int>(st.Int(i));
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, uint64_t* v) {
  *v = static_cast<uint64_t>(st.Int(i));
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, double* v) {
  *v = st.Real(i);
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, bool* v) {
  *v = st.Int(i) != 0;
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, DType* v) {
  const std::string text = st.Text(i);
  auto parsed = ParseDType(text);
  if (!parsed) return Status::Internal("unknown dtype '" + text + "'");
  *v = *parsed;
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, Phase* v) {
  const std::string text = st.Text(i);
  auto parsed = ParsePhase(text);
  if (!parsed) return Status::Internal("unknown phase '" + text + "'");
  *v = *parsed;
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, Origin* v) {
  const std::string text = st.Text(i);
  auto parsed = ParseOrigin(text);
  if (!parsed) return Status::Internal("unknown origin '" + text + "'");
  *v = *parsed;
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, Exactness* v) {
  const std::string text = st.Text(i);
  auto parsed = ParseExactness(text);
  if (!parsed) return Status::Internal("unknown exactness '" + text + "'");
  *v = *parsed;
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, std::map<std::string, int64_t>* out) {
  const std::string text = st.Text(i);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("not a JSON object: " + text.substr(0, 80));
  out->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer())
      return Status::Internal("key '" + it.key() + "' is not an integer");
    (*out)[it.key()] = it.value().get<int64_t>();
  }
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, std::map<std::string, std::string>* out) {
  const std::string text = st.Text(i);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("not a JSON object: " + text.substr(0, 80));
  out->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return Status::Internal("key '" + it.key() + "' is not a string");
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return Status::OK();
}

// --- Column tables: the one mapping between a row type and its SQL columns. ------------------
//
// Each table lists a row type's columns once: the column name, how it is bound for INSERT and
// how it is read back by SELECT. INSERT and SELECT statements are generated from the same table,
// so a column can never be bound or read at the wrong position.

template <typename T>
struct Column {
  std::string name;
  std::function<Status(Stmt&, int, const T&)> bind;  // every column is written
  std::function<Status(const Stmt&, int, T&)> read;  // empty: derived, written but not read back
};

// A column stored from, and read back into, the field that `field(row)` refers to.
template <typename T, typename FieldRef>
Column<T> FieldColumn(std::string name, FieldRef field) {
  return {std::move(name),
          [field](Stmt& st, int i, const T& row) { return ToSql(st, i, field(row)); },
          [field](const Stmt& st, int i, T& row) { return FromSql(st, i, &field(row)); }};
}

// A column written from a value computed from the row (a key, a rate), never read back.
template <typename T, typename Fn>
Column<T> DerivedColumn(std::string name, Fn fn) {
  return {std::move(name), [fn](Stmt& st, int i, const T& row) { return ToSql(st, i, fn(row)); },
          nullptr};
}

// The columns of a Measurement that `m(row)` refers to, named prefix + field. The winner's
// measurement is always valid and has no valid/error columns (with_validity = false).
template <typename T, typename M>
void AddMeasurementColumns(std::vector<Column<T>>& cols, const std::string& prefix, M m,
                           bool with_validity) {
  if (with_validity) {
    cols.push_back(FieldColumn<T>(prefix + "valid", [m](auto& r) -> auto& { return m(r).valid; }));
    cols.push_back(FieldColumn<T>(prefix + "error", [m](auto& r) -> auto& { return m(r).error; }));
  }
  cols.push_back(
      FieldColumn<T>(prefix + "median_s", [m](auto& r) -> auto& { return m(r).median_s; }));
  cols.push_back(FieldColumn<T>(prefix + "min_s", [m](auto& r) -> auto& { return m(r).min_s; }));
  cols.push_back(FieldColumn<T>(prefix + "max_s", [m](auto& r) -> auto& { return m(r).max_s; }));
  cols.push_back(
      FieldColumn<T>(prefix + "samples", [m](auto& r) -> auto& { return m(r).samples; }));
  cols.push_back(FieldColumn<T>(prefix + "warmup", [m](auto& r) -> auto& { return m(r).warmup; }));
  cols.push_back(FieldColumn<T>(prefix + "method", [m](auto& r) -> auto& { return m(r).method; }));
}

// `devices`, keyed by fingerprint (first/last seen times are added by UpsertDeviceLocked).
const std::vector<Column<DeviceInfo>>& DeviceColumns() {
  using T = DeviceInfo;
  static const auto* cols = new std::vector<Column<T>>{
      DerivedColumn<T>("fingerprint", [](const T& d) { return d.Fingerprint(); }),
      FieldColumn<T>("backend", [](auto& d) -> auto& { return d.backend; }),
      FieldColumn<T>("uuid", [](auto& d) -> auto& { return d.uuid; }),
      FieldColumn<T>("name", [](auto& d) -> auto& { return d.name; }),
      FieldColumn<T>("memory_bytes", [](auto& d) -> auto& { return d.memory_bytes; }),
      FieldColumn<T>("attributes", [](auto& d) -> auto& { return d.attributes; }),
      FieldColumn<T>("library_version", [](auto& d) -> auto& { return d.library_version; }),
      DerivedColumn<T>("device_class", [](const T& d) { return ClassOf(d).key; }),
  };
  return *cols;
}

// The ceiling's bandwidth, or nothing when there is no valid ceiling.
std::optional<double> CeilingGbps(const TuneResult& r) {
  const double g = r.ceiling.valid ? r.ceiling_gbps() : 0;
  if (g > 0) return g;
  return std::nullopt;
}

// `entries`: one row per (device, problem); the device itself is read from `devices`.
const std::vector<Column<TuneResult>>& EntryColumns() {
  using T = TuneResult;
  static const auto* cols = [] {
    auto* c = new std::vector<Column<T>>{
        DerivedColumn<T>("device_fingerprint", [](const T& r) { return r.device.Fingerprint(); }),
        DerivedColumn<T>("problem_key", [](const T& r) { return r.problem.Key(); }),
        FieldColumn<T>("rows", [](auto& r) -> auto& { return r.problem.rows; }),
        FieldColumn<T>("cols", [](auto& r) -> auto& { return r.problem.cols; }),
        FieldColumn<T>("batch", [](auto& r) -> auto& { return r.problem.batch; }),
        FieldColumn<T>("dtype", [](auto& r) -> auto& { return r.problem.dtype; }),
        FieldColumn<T>("ld_in", [](auto& r) -> auto& { return r.problem.ld_in; }),
        FieldColumn<T>("ld_out", [](auto& r) -> auto& { return r.problem.ld_out; }),
        FieldColumn<T>("variant", [](auto& r) -> auto& { return r.best.name; }),
        FieldColumn<T>("params", [](auto& r) -> auto& { return r.best.params; }),
        DerivedColumn<T>("gbps", [](const T& r) { return r.gbps(); }),
        DerivedColumn<T>("ceiling_gbps", [](const T& r) { return CeilingGbps(r); }),
        DerivedColumn<T>("ratio",
                         [](const T& r) -> std::optional<double> {
                           auto ceiling = CeilingGbps(r);
                           if (!ceiling) return std::nullopt;
                           return r.gbps() / *ceiling;
                         }),
    };
    AddMeasurementColumns<T>(*c, "", [](auto& r) -> auto& { return r.best_measurement; },
                             /*with_validity=*/false);
    AddMeasurementColumns<T>(*c, "ceiling_", [](auto& r) -> auto& { return r.ceiling; },
                             /*with_validity=*/true);
    c->push_back(FieldColumn<T>("candidates_tried", [](auto& r) -> auto& { return r.tried; }));
    c->push_back(FieldColumn<T>("candidates_valid", [](auto& r) -> auto& { return r.valid; }));
    c->push_back(FieldColumn<T>("tune_seconds", [](auto& r) -> auto& { return r.tune_seconds; }));
    c->push_back(
        FieldColumn<T>("tuned_at_unix_ms", [](auto& r) -> auto& { return r.tuned_at_unix_ms; }));
    c->push_back(FieldColumn<T>("origin", [](auto& r) -> auto& { return r.origin; }));
    c->push_back(FieldColumn<T>("contention", [](auto& r) -> auto& { return r.contention; }));
    // Normalized, as in problem_key: value-exact only where the dtype tells it apart.
    c->push_back(Column<T>{
        "exactness",
        [](Stmt& st, int i, const T& r) { return ToSql(st, i, r.problem.Normalized().exactness); },
        [](const Stmt& st, int i, T& r) { return FromSql(st, i, &r.problem.exactness); }});
    return c;
  }();
  return *cols;
}

// `candidates`: one row per candidate result of an entry's tune.
struct CandidateRow {
  int64_t entry_id = 0;
  int64_t problem_bytes = 0;  // for the derived gbps column
  CandidateResult result;
};

const std::vector<Column<CandidateRow>>& CandidateColumns() {
  using T = CandidateRow;
  static const auto* cols = [] {
    auto* c = new std::vector<Column<T>>{
        DerivedColumn<T>("entry_id", [](const T& r) { return r.entry_id; }),
        FieldColumn<T>("variant", [](auto& r) -> auto& { return r.result.candidate.name; }),
        FieldColumn<T>("params", [](auto& r) -> auto& { return r.result.candidate.params; }),
        FieldColumn<T>("phase", [](auto& r) -> auto& { return r.result.phase; }),
        DerivedColumn<T>("gbps",
                         [](const T& r) -> std::optional<double> {
                           const Measurement& m = r.result.measurement;
                           if (!m.valid || m.median_s <= 0) return std::nullopt;
                           return EffectiveGBps(r.problem_bytes, m.median_s);
                         }),
    };
    AddMeasurementColumns<T>(*c, "", [](auto& r) -> auto& { return r.result.measurement; },
                             /*with_validity=*/true);
    return c;
  }();
  return *cols;
}

// "a, b, c" of every column (written = true) or of the columns read back, each prefixed.
template <typename T>
std::string ColumnList(const std::vector<Column<T>>& cols, bool written,
                       const std::string& prefix = "") {
  std::string out;
  for (const Column<T>& c : cols) {
    if (!written && !c.read) continue;
    if (!out.empty()) out += ", ";
    out += prefix + c.name;
  }
  return out;
}

// "?1, ?2, ..." for every column.
template <typename T>
std::string Placeholders(const std::vector<Column<T>>& cols) {
  std::string out;
  for (size_t i = 1; i <= cols.size(); ++i) out += (i > 1 ? ", ?" : "?") + std::to_string(i);
  return out;
}

// "INSERT INTO table (every column) VALUES (?1, ...)".
template <typename T>
std::string InsertSql(const char* table, const std::vector<Column<T>>& cols) {
  return std::string("INSERT INTO ") + table + " (" + ColumnList(cols, true) + ") VALUES (" +
         Placeholders(cols) + ")";
}

// Binds every column of `row` to ?1 ... ?n.
template <typename T>
Status BindRow(Stmt& st, const std::vector<Column<T>>& cols, const T& row) {
  for (size_t i = 0; i < cols.size(); ++i) {
    Status s = cols[i].bind(st, static_cast<int>(i) + 1, row);
    if (!s.ok()) return Status(s.code(), "store: column " + cols[i].name + ": " + s.message());
  }
  return Status::OK();
}

// Reads the columns that are read back, in ColumnList(cols, false) order, from result column
// `first` on. Returns the index after the last column read.
template <typename T>
StatusOr<int> ReadRow(const Stmt& st, const std::vector<Column<T>>& cols, int first, T& row) {
  int i = first;
  for (const Column<T>& c : cols) {
    if (!c.read) continue;
    Status s = c.read(st, i++, row);
    if (!s.ok()) return Status::Internal("store: column " + c.name + ": " + s.message());
  }
  return i;
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
  const auto& cols = DeviceColumns();
  static const std::string sql = [&cols] {
    std::string update;
    for (const auto& c : cols) {
      if (c.name == "fingerprint") continue;
      update += c.name + " = excluded." + c.name + ", ";
    }
    const std::string now = "?" + std::to_string(cols.size() + 1);
    return "INSERT INTO devices (" + ColumnList(cols, true) +
           ", first_seen_unix_ms, last_seen_unix_ms) VALUES (" + Placeholders(cols) + ", " + now +
           ", " + now + ") ON CONFLICT (fingerprint) DO UPDATE SET " + update +
           "last_seen_unix_ms = excluded.last_seen_unix_ms";
  }();
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, sql));
  TR_RETURN_IF_ERROR(BindRow(*st, cols, d));
  TR_RETURN_IF_ERROR(st->Bind(static_cast<int>(cols.size()) + 1, now_ms));
  return st->Run();
}

// What every entry query selects: the entry id, the entry's columns, then its device's. `e` is
// entries, `d` is devices.
const std::string& EntrySelect() {
  static const std::string sql = "SELECT e.id, " + ColumnList(EntryColumns(), false, "e.") + ", " +
                                 ColumnList(DeviceColumns(), false, "d.") +
                                 " FROM entries e JOIN devices d ON d.fingerprint = "
                                 "e.device_fingerprint";
  return sql;
}

// Reads one row of EntrySelect().
StatusOr<TuneResult> ReadEntry(const Stmt& st, int64_t* entry_id) {
  TuneResult r;
  *entry_id = st.Int(0);
  TR_ASSIGN_OR_RETURN(int next, ReadRow(st, EntryColumns(), 1, r));
  TR_ASSIGN_OR_RETURN(next, ReadRow(st, DeviceColumns(), next, r.device));
  (void)next;
  r.best_measurement.valid = true;  // only valid winners are stored
  return r;
}

// Reads the candidates of an entry (at most kMaxCandidatesPerEntry; one more makes the row bad).
// A failed read of the database is the Status; a row that does not parse sets *bad instead.
Status ReadCandidates(sqlite3* db, int64_t entry_id, std::vector<CandidateResult>* out,
                      Status* bad) {
  const auto& cols = CandidateColumns();
  TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, "SELECT " + ColumnList(cols, false) +
                                                     " FROM candidates WHERE entry_id = ?1 "
                                                     "ORDER BY id LIMIT ?2"));
  TR_RETURN_IF_ERROR(st->Bind(1, entry_id));
  TR_RETURN_IF_ERROR(st->Bind(2, kMaxCandidatesPerEntry + 1));
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) break;
    if (out->size() >= static_cast<size_t>(kMaxCandidatesPerEntry)) {
      *bad = Status::InvalidArgument("candidates: more than " +
                                     std::to_string(kMaxCandidatesPerEntry) + " per entry");
      return Status::OK();
    }
    CandidateRow c;
    StatusOr<int> next = ReadRow(*st, cols, 0, c);
    if (!next.ok()) {
      *bad = next.status();
      return Status::OK();
    }
    out->push_back(std::move(c.result));
  }
  return Status::OK();
}

// The next entry of an EntrySelect() statement that reads back whole and passes ValidateEntry,
// with its candidates when asked (its id in *entry_id); nullopt at the end. Rows that do not are
// handed to `skip` and passed over. A failed read of the database is the Status.
StatusOr<std::optional<TuneResult>> NextGoodEntry(
    sqlite3* db, Stmt& st, bool include_candidates, int64_t* entry_id,
    const std::function<void(int64_t, const Status&)>& skip) {
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return std::optional<TuneResult>();
    StatusOr<TuneResult> r = ReadEntry(st, entry_id);  // reads columns only: a parse error
    Status bad = r.status();
    if (bad.ok() && include_candidates)
      TR_RETURN_IF_ERROR(ReadCandidates(db, *entry_id, &r->candidates, &bad));
    if (bad.ok()) bad = ValidateEntry(*r);
    if (bad.ok()) return std::optional<TuneResult>(std::move(r).value());
    skip(*entry_id, bad);
  }
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
  if (!f.device_class.empty()) add("d.device_class = ?", f.device_class);
  if (f.dtype) add("e.dtype = ?", std::string(DTypeName(*f.dtype)));
  if (f.rows > 0) add("e.rows = ?", f.rows);
  if (f.cols > 0) add("e.cols = ?", f.cols);
  if (!f.variant.empty()) add("e.variant = ?", f.variant);
  if (f.tuned_before_unix_ms > 0) add("e.tuned_at_unix_ms < ?", f.tuned_before_unix_ms);
  if (!f.library_version.empty()) add("d.library_version = ?", f.library_version);
  return w;
}

bool IsMemoryPath(const std::string& path) { return path == ":memory:"; }

// Migration 1 -> 2, the part SQL cannot do: every device row's class key, from its columns.
Status FillDeviceClasses(sqlite3* db) {
  const auto& cols = DeviceColumns();
  TR_ASSIGN_OR_RETURN(auto sel, Stmt::Prepare(db, "SELECT fingerprint, " +
                                                      ColumnList(cols, false) +
                                                      " FROM devices WHERE device_class = ''"));
  std::vector<std::pair<std::string, std::string>> updates;  // fingerprint, class
  while (true) {
    TR_ASSIGN_OR_RETURN(bool row, sel->Step());
    if (!row) break;
    DeviceInfo d;
    TR_ASSIGN_OR_RETURN(int next, ReadRow(*sel, cols, 1, d));
    (void)next;
    updates.emplace_back(sel->Text(0), ClassOf(d).key);
  }
  TR_ASSIGN_OR_RETURN(auto upd,
                      Stmt::Prepare(db, "UPDATE devices SET device_class = ?2 WHERE fingerprint = ?1"));
  for (const auto& [fingerprint, cls] : updates) {
    TR_RETURN_IF_ERROR(upd->Bind(1, fingerprint));
    TR_RETURN_IF_ERROR(upd->Bind(2, cls));
    TR_RETURN_IF_ERROR(upd->Run());
    TR_RETURN_IF_ERROR(upd->Reset());
  }
  return Status::OK();
}

// Replaces the entry and candidate rows of (r.device, r.problem); the caller holds the
// transaction.
Status SaveTuneLocked(sqlite3* db, const TuneResult& r) {
  TR_RETURN_IF_ERROR(UpsertDeviceLocked(db, r.device, NowUnixMs()));
  {
    TR_ASSIGN_OR_RETURN(auto del, Stmt::Prepare(db, R"sql(
DELETE FROM entries WHERE device_fingerprint = ?1 AND problem_key = ?2
)sql"));
    TR_RETURN_IF_ERROR(del->Bind(1, r.device.Fingerprint()));
    TR_RETURN_IF_ERROR(del->Bind(2, r.problem.Key()));
    TR_RETURN_IF_ERROR(del->Run());
  }
  TR_ASSIGN_OR_RETURN(auto ins, Stmt::Prepare(db, InsertSql("entries", EntryColumns())));
  TR_RETURN_IF_ERROR(BindRow(*ins, EntryColumns(), r));
  TR_RETURN_IF_ERROR(ins->Run());
  CandidateRow row;
  row.entry_id = sqlite3_last_insert_rowid(db);
  row.problem_bytes = r.problem.bytes();
  TR_ASSIGN_OR_RETURN(auto cand, Stmt::Prepare(db, InsertSql("candidates", CandidateColumns())));
  for (const CandidateResult& c : r.candidates) {
    row.result = c;
    TR_RETURN_IF_ERROR(BindRow(*cand, CandidateColumns(), row));
    TR_RETURN_IF_ERROR(cand->Run());
    TR_RETURN_IF_ERROR(cand->Reset());
  }
  return Status::OK();
}

// The entries of (class, problem key), fastest first: the first good one is the answer.
const std::string& ClassLookupSql() {
  static const std::string sql = EntrySelect() +
                                 " WHERE d.device_class = ?1 AND e.problem_key = ?2"
                                 " ORDER BY e.median_s ASC, e.tuned_at_unix_ms DESC";
  return sql;
}

// One real write that changes nothing: the schema version, set to what it is. Fails for a
// read-only file and, when the write-ahead log has to grow, for a full disk.
Status ProbeWrite(sqlite3* db) {
  return InTransaction(db, [db]() -> Status {
    return Exec(db, "PRAGMA user_version = " TRANSPOSED_SCHEMA_VERSION_TEXT);
  });
}

}  // namespace

bool StoreFilter::empty() const {
  return device_fingerprint.empty() && device_class.empty() && !dtype && rows <= 0 && cols <= 0 && variant.empty() &&
         tuned_before_unix_ms <= 0 && library_version.empty();
}

Store::Store(sqlite3* db)
    : db_(db), skip_([this](int64_t id, const Status& why) { SkipBadRow(id, why); }) {}

std::string Store::read_only() const {
  MutexLock lock(&state_mu_);
  return read_only_reason_;
}

void Store::SkipBadRow(int64_t entry_id, const Status& why) {
  bad_rows_skipped_.fetch_add(1);
  {
    MutexLock lock(&state_mu_);
    if (bad_rows_logged_.size() >= 256 || !bad_rows_logged_.insert(entry_id).second) return;
  }
  spdlog::warn("store: skipped entry id={} (not served, listed or exported; delete it or tune "
               "its problem again to replace it): {}",
               entry_id, why.message());
}

Status Store::NoteWriteFailure(const Status& s) {
  if (s.code() != StatusCode::kFailedPrecondition || IsMemoryPath(path_)) return s;
  {
    MutexLock lock(&state_mu_);
    if (!read_only_reason_.empty()) return s;
    read_only_reason_ = s.message();
  }
  spdlog::warn("the database became READ-ONLY: lookups are served from it, tunes are answered "
               "but not stored until it can be written again (retried with backoff). Cause: {}",
               s.message());
  return s;
}

Status Store::TryWritable() {
  if (read_only().empty()) return Status::OK();
  auto fresh = OpenWritable(path_);
  if (!fresh.ok()) return fresh.status();
  Store& f = **fresh;
  {
    MutexLock lock(&f.mu_);
    TR_RETURN_IF_ERROR(ProbeWrite(f.db_));
  }
  {
    // The new connections serve from now on; `fresh` closes the old ones.
    MutexLock lock(&mu_);
    MutexLock read_lock(&read_mu_);
    MutexLock fresh_lock(&f.mu_);
    MutexLock fresh_read_lock(&f.read_mu_);
    std::swap(db_, f.db_);
    std::swap(rdb_, f.rdb_);
    generation_.fetch_add(1);
  }
  MutexLock lock(&state_mu_);
  read_only_reason_.clear();
  return Status::OK();
}

Store::~Store() {
  {
    MutexLock lock(&read_mu_);
    sqlite3_finalize(version_stmt_);
    if (rdb_ != nullptr) sqlite3_close_v2(rdb_);
  }
  MutexLock lock(&mu_);
  sqlite3_finalize(wversion_stmt_);
  sqlite3_close_v2(db_);
}

template <typename Fn>
auto Store::OnReader(Fn&& fn) -> decltype(fn(static_cast<sqlite3*>(nullptr))) {
  {
    MutexLock lock(&read_mu_);
    if (rdb_ != nullptr) return fn(rdb_);
  }
  MutexLock lock(&mu_);
  return fn(db_);
}

Status Store::CheckWritable() const {
  const std::string reason = read_only();
  if (reason.empty()) return Status::OK();
  return Status::FailedPrecondition("store: the database is read-only (" + reason +
                                    "): nothing is written");
}

namespace {

// "file:" URI of a path, for opening it read-only.
std::string FileUri(const std::string& path, bool immutable) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 0xf];
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + (immutable ? "?mode=ro&immutable=1" : "?mode=ro");
}

// The columns of every table the migrations create, to recognise a schema restored without its
// user_version (sqlite3 .dump writes none): "table(col,col,...);..." in name order.
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

}  // namespace

StatusOr<std::unique_ptr<Store>> Store::OpenReadOnly(const std::string& path,
                                                     const std::string& reason) {
  Status last;
  for (bool immutable : {false, true}) {
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(FileUri(path, immutable).c_str(), &db,
                                   SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX,
                                   nullptr);
    if (rc != SQLITE_OK) {
      last = Status::FailedPrecondition(db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
      sqlite3_close_v2(db);
      continue;
    }
    std::unique_ptr<Store> store(new Store(db));
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, kReadBusyTimeoutMs);
    auto version = QueryInt(db, "PRAGMA user_version");
    if (!version.ok()) {
      last = version.status();
      continue;
    }
    if (*version != kSchemaVersion) {
      auto shape = SchemaShape(db);
      auto want = CurrentSchemaShape();
      if (!(*version == 0 && shape.ok() && want.ok() && *shape == *want)) {
        last = Status::FailedPrecondition("schema version " + std::to_string(*version) +
                                          ", this build reads " + std::to_string(kSchemaVersion));
        continue;
      }
    }
    MutexLock lock(&store->state_mu_);
    store->read_only_reason_ = reason;
    return store;
  }
  return last;
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  auto store = OpenWritable(path);
  if (store.ok() && !IsMemoryPath(path)) {
    // Opening a current file writes nothing: try one write now, so that a full disk is found at
    // start, not at the first tune. A lock held elsewhere (UNAVAILABLE) is not a reason to stop.
    Status probe;
    {
      MutexLock lock(&(*store)->mu_);
      probe = ProbeWrite((*store)->db_);
    }
    if (!probe.ok() && probe.code() != StatusCode::kUnavailable)
      store = Status(probe.code(), "store: cannot write to database " + path + ": " +
                                       probe.message());
  }
  if (store.ok() || IsMemoryPath(path) || path.empty()) {
    if (store.ok()) (*store)->path_ = path;
    return store;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return store;
  // The file exists but cannot be opened for writing (read-only file or directory, full disk,
  // locked, newer schema...): serve what it holds, read-only, if it is a database we can read.
  auto ro = OpenReadOnly(path, store.status().message());
  if (!ro.ok()) return store;
  (*ro)->path_ = path;
  return ro;
}

StatusOr<std::unique_ptr<Store>> Store::OpenWritable(const std::string& path) {
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
  // SQLite opens a file it may not write (mode 0444) read-only without an error.
  if (sqlite3_db_readonly(db, "main") == 1) {
    return Status::FailedPrecondition("store: cannot open database " + path +
                                      " for writing: this process may not write the file");
  }
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

  // A current file needs no write to open (so a lock held elsewhere does not stop the start).
  // Otherwise migrate from the version read again inside the write transaction, so that two
  // processes opening a fresh file at once apply each step exactly once.
  auto migrate = [db, &path]() -> Status {
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
    if (v < 2) TR_RETURN_IF_ERROR(FillDeviceClasses(db));
    return Status::OK();
  };
  Status migrated = *version == kSchemaVersion ? Status::OK() : InTransaction(db, migrate);
  if (!migrated.ok()) return migrated;
  if (!IsMemoryPath(path)) {
    // Lookups and listings read on their own connection, so they never queue behind a write
    // waiting for a lock (nor behind the store's write mutex).
    sqlite3* rdb = nullptr;
    if (sqlite3_open_v2(path.c_str(), &rdb, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX,
                        nullptr) == SQLITE_OK) {
      sqlite3_extended_result_codes(rdb, 1);
      sqlite3_busy_timeout(rdb, kReadBusyTimeoutMs);
      MutexLock lock(&store->read_mu_);
      store->rdb_ = rdb;
    } else {
      sqlite3_close_v2(rdb);  // reads share the write connection
    }
  }
  return store;
}

Status Store::UpsertDevice(const DeviceInfo& device) {
  TR_RETURN_IF_ERROR(CheckWritable());
  MutexLock lock(&mu_);
  return NoteWriteFailure(UpsertDeviceLocked(db_, device, NowUnixMs()));
}

Status Store::SaveTune(const TuneResult& r) {
  if (!r.best_measurement.valid) {
    return Status::InvalidArgument("store: refusing to save a tune of " + r.problem.ToString() +
                                   " without a valid winner");
  }
  if (Status valid = ValidateEntry(r); !valid.ok()) {
    return Status(valid.code(), "store: refusing to save a tune of " + r.problem.ToString() +
                                    ": " + valid.message());
  }
  TR_RETURN_IF_ERROR(CheckWritable());
  MutexLock lock(&mu_);
  return NoteWriteFailure(
      InTransaction(db_, [&, db_ = db_]() -> Status {  // a copy read under mu_
        return SaveTuneLocked(db_, r);
      }));
}

StatusOr<bool> Store::Merge(const TuneResult& r) {
  if (!r.best_measurement.valid || !(r.best_measurement.median_s > 0)) {
    return Status::InvalidArgument("store: refusing to merge a result of " + r.problem.ToString() +
                                   " without a valid winner");
  }
  if (Status valid = ValidateEntry(r); !valid.ok()) {
    return Status(valid.code(), "store: refusing to merge a result of " + r.problem.ToString() +
                                    ": " + valid.message());
  }
  const std::string cls = ClassOf(r.device).key;
  TR_RETURN_IF_ERROR(CheckWritable());
  MutexLock lock(&mu_);
  bool stored = false;
  Status s = InTransaction(db_, [&, db_ = db_]() -> Status {  // a copy read under mu_
    TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db_, ClassLookupSql()));
    TR_RETURN_IF_ERROR(st->Bind(1, cls));
    TR_RETURN_IF_ERROR(st->Bind(2, r.problem.Key()));
    int64_t id = 0;
    TR_ASSIGN_OR_RETURN(auto existing, NextGoodEntry(db_, *st, false, &id, skip_));
    if (existing && existing->best_measurement.median_s <= r.best_measurement.median_s)
      return Status::OK();
    stored = true;
    return SaveTuneLocked(db_, r);
  });
  if (!s.ok()) return NoteWriteFailure(s);
  return stored;
}

StatusOr<std::optional<TuneResult>> Store::LookupByClass(const std::string& device_class,
                                                         const Problem& problem,
                                                         bool include_candidates) {
  return OnReader([&](sqlite3* db) -> StatusOr<std::optional<TuneResult>> {
    TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, ClassLookupSql()));
    TR_RETURN_IF_ERROR(st->Bind(1, device_class));
    TR_RETURN_IF_ERROR(st->Bind(2, problem.Key()));
    int64_t id = 0;
    return NextGoodEntry(db, *st, include_candidates, &id, skip_);
  });
}

StatusOr<std::optional<TuneResult>> Store::Lookup(const std::string& device_fingerprint,
                                                  const Problem& problem, bool include_candidates) {
  return OnReader([&](sqlite3* db) -> StatusOr<std::optional<TuneResult>> {
    TR_ASSIGN_OR_RETURN(
        auto st, Stmt::Prepare(db, EntrySelect() +
                                       " WHERE e.device_fingerprint = ?1 AND e.problem_key = ?2"));
    TR_RETURN_IF_ERROR(st->Bind(1, device_fingerprint));
    TR_RETURN_IF_ERROR(st->Bind(2, problem.Key()));
    int64_t id = 0;
    return NextGoodEntry(db, *st, include_candidates, &id, skip_);
  });
}

StatusOr<std::vector<TuneResult>> Store::List(const StoreFilter& filter, bool include_candidates,
                                              int limit, const EntryCursor* after,
                                              std::vector<EntryCursor>* cursors,
                                              size_t max_bytes) {
  Where where = BuildWhere(filter);
  if (after != nullptr) {
    where.sql += where.binds.empty() ? " WHERE " : " AND ";
    where.sql += "(e.tuned_at_unix_ms < ? OR (e.tuned_at_unix_ms = ? AND e.id < ?))";
    const EntryCursor c = *after;
    where.binds.push_back([c](Stmt& st, int i) { return st.Bind(i, c.tuned_at_unix_ms); });
    where.binds.push_back([c](Stmt& st, int i) { return st.Bind(i, c.tuned_at_unix_ms); });
    where.binds.push_back([c](Stmt& st, int i) { return st.Bind(i, c.id); });
  }
  // No SQL LIMIT: rows that are skipped (NextGoodEntry) do not count towards `limit`.
  const std::string sql =
      EntrySelect() + where.sql + " ORDER BY e.tuned_at_unix_ms DESC, e.id DESC";
  return OnReader([&](sqlite3* db) -> StatusOr<std::vector<TuneResult>> {
    TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, sql));
    TR_RETURN_IF_ERROR(where.BindAll(*st));
    std::vector<TuneResult> out;
    size_t bytes = 0;
    while ((limit <= 0 || static_cast<int>(out.size()) < limit) &&
           (max_bytes == 0 || bytes < max_bytes)) {
      int64_t id = 0;
      TR_ASSIGN_OR_RETURN(auto r, NextGoodEntry(db, *st, include_candidates, &id, skip_));
      if (!r) break;
      if (cursors != nullptr) cursors->push_back(EntryCursor{r->tuned_at_unix_ms, id});
      if (max_bytes > 0) bytes += ApproxEntryBytes(*r);
      out.push_back(std::move(*r));
    }
    return out;
  });
}

StatusOr<int64_t> Store::Delete(const StoreFilter& filter) {
  const Where where = BuildWhere(filter);
  const std::string sql =
      "DELETE FROM entries WHERE id IN (SELECT e.id FROM entries e JOIN devices d "
      "ON d.fingerprint = e.device_fingerprint" +
      where.sql + ")";
  TR_RETURN_IF_ERROR(CheckWritable());
  MutexLock lock(&mu_);
  int64_t deleted = 0;
  TR_RETURN_IF_ERROR(NoteWriteFailure(
      InTransaction(db_, [&, db_ = db_]() -> Status {  // a copy read under mu_
        TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db_, sql));
        TR_RETURN_IF_ERROR(where.BindAll(*st));
        TR_RETURN_IF_ERROR(st->Run());
        deleted = sqlite3_changes64(db_);
        return Status::OK();
      })));
  return deleted;
}

StatusOr<std::vector<DeviceInfo>> Store::Devices() {
  const auto& cols = DeviceColumns();
  return OnReader([&](sqlite3* db) -> StatusOr<std::vector<DeviceInfo>> {
    TR_ASSIGN_OR_RETURN(auto st, Stmt::Prepare(db, "SELECT " + ColumnList(cols, false) +
                                                       " FROM devices ORDER BY "
                                                       "first_seen_unix_ms, fingerprint"));
    std::vector<DeviceInfo> out;
    while (true) {
      TR_ASSIGN_OR_RETURN(bool row, st->Step());
      if (!row) break;
      DeviceInfo d;
      TR_ASSIGN_OR_RETURN(int next, ReadRow(*st, cols, 0, d));
      (void)next;
      out.push_back(std::move(d));
    }
    return out;
  });
}

// PRAGMA data_version on `db` through *stmt, prepared once for the connection *stmt_db (a lookup
// runs it every time: no parse).
static StatusOr<int64_t> DataVersion(sqlite3* db, sqlite3_stmt** stmt, sqlite3** stmt_db) {
  if (*stmt == nullptr || *stmt_db != db) {
    sqlite3_finalize(*stmt);
    *stmt = nullptr;
    *stmt_db = nullptr;
    if (sqlite3_prepare_v3(db, "PRAGMA data_version", -1, SQLITE_PREPARE_PERSISTENT, stmt,
                           nullptr) != SQLITE_OK) {
      sqlite3_finalize(*stmt);
      *stmt = nullptr;
      return Internal(db, "prepare \"PRAGMA data_version\"");
    }
    *stmt_db = db;
  }
  const int rc = sqlite3_step(*stmt);
  const int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(*stmt, 0) : 0;
  sqlite3_reset(*stmt);
  if (rc != SQLITE_ROW) return Internal(db, "step \"PRAGMA data_version\"");
  return v;
}

StatusOr<StoreVersion> Store::Version() {
  {
    // A separate read connection sees every commit, ours (on db_) included, in data_version.
    MutexLock lock(&read_mu_);
    if (rdb_ != nullptr) {
      TR_ASSIGN_OR_RETURN(int64_t v, DataVersion(rdb_, &version_stmt_, &version_stmt_db_));
      return StoreVersion{v, 0, generation_.load()};
    }
  }
  // One connection: data_version counts other processes' commits, total_changes our own.
  MutexLock lock(&mu_);
  TR_ASSIGN_OR_RETURN(int64_t v, DataVersion(db_, &wversion_stmt_, &wversion_stmt_db_));
  return StoreVersion{v, sqlite3_total_changes64(db_), generation_.load()};
}

}  // namespace transposed
