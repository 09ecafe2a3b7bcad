#include "store/rows.h"

#include <chrono>
#include <utility>

#include "core/device_class.h"
#include "store/entry_validation.h"
#include "store/sql_values.h"

namespace transposed {
namespace store_internal {
namespace {

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
    // The kernel library version the entry was measured with (not its device row's, which is the
    // version the device was last seen with): ReadEntry puts it back after the device columns.
    c->push_back(FieldColumn<T>(
        "library_version", [](auto& r) -> auto& { return r.device.library_version; }));
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

// Reads one row of EntrySelect().
StatusOr<TuneResult> ReadEntry(const Stmt& st, int64_t* entry_id) {
  TuneResult r;
  *entry_id = st.Int(0);
  TR_ASSIGN_OR_RETURN(int next, ReadRow(st, EntryColumns(), 1, r));
  std::string library_version = std::move(r.device.library_version);  // the entry's
  TR_ASSIGN_OR_RETURN(next, ReadRow(st, DeviceColumns(), next, r.device));
  (void)next;
  if (!library_version.empty()) r.device.library_version = std::move(library_version);
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

}  // namespace

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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

const std::string& EntrySelect() {
  static const std::string sql = "SELECT e.id, " + ColumnList(EntryColumns(), false, "e.") + ", " +
                                 ColumnList(DeviceColumns(), false, "d.") +
                                 " FROM entries e JOIN devices d ON d.fingerprint = "
                                 "e.device_fingerprint";
  return sql;
}


const std::string& ClassLookupSql() {
  static const std::string sql = EntrySelect() +
                                 " WHERE d.device_class = ?1 AND e.problem_key = ?2"
                                 " ORDER BY e.library_version = ?3 DESC, e.median_s ASC,"
                                 " e.tuned_at_unix_ms DESC";
  return sql;
}

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


StatusOr<std::vector<DeviceInfo>> ReadDevices(sqlite3* db) {
  const auto& cols = DeviceColumns();
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
}

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

}  // namespace store_internal
}  // namespace transposed
