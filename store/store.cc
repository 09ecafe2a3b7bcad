#include "store/store.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/device_class.h"
#include "core/version.h"
#include "store/entry_validation.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/sqlite.h"

// The store API over its parts: the SQLite layer (store/sqlite.h), the schema and migrations
// (store/schema.h) and the rows (store/rows.h).
namespace transposed {

using store_internal::ClassLookupSql;
using store_internal::CurrentSchemaShape;
using store_internal::DataVersion;
using store_internal::EntrySelect;
using store_internal::FileUri;
using store_internal::InTransaction;
using store_internal::IsMemoryPath;
using store_internal::Migrate;
using store_internal::NextGoodEntry;
using store_internal::NowUnixMs;
using store_internal::OpenReadConnection;
using store_internal::OpenWriteConnection;
using store_internal::ProbeWrite;
using store_internal::QueryInt;
using store_internal::ReadDevices;
using store_internal::ReadSchemaVersion;
using store_internal::SaveTuneLocked;
using store_internal::SchemaShape;
using store_internal::SetUpWriteConnection;
using store_internal::Stmt;
using store_internal::UpsertDeviceLocked;
using store_internal::UseWriteAheadLog;
using store_internal::kReadBusyTimeoutMs;

namespace {

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
    w.sql += w.sql.empty() ? " WHERE " : " AND ";
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
  if (!f.library_version.empty()) add("e.library_version = ?", f.library_version);
  if (f.contended) {
    w.sql += w.sql.empty() ? " WHERE " : " AND ";
    w.sql += *f.contended ? "e.contention != ''" : "e.contention = ''";
  }
  return w;
}

}  // namespace

bool StoreFilter::empty() const {
  return device_fingerprint.empty() && device_class.empty() && !dtype && rows <= 0 && cols <= 0 && variant.empty() &&
         tuned_before_unix_ms <= 0 && library_version.empty() && !contended;
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
  TR_ASSIGN_OR_RETURN(sqlite3* db, OpenWriteConnection(path));
  // From here on the Store owns the handle, so every early return closes it.
  std::unique_ptr<Store> store(new Store(db));
  TR_RETURN_IF_ERROR(SetUpWriteConnection(db, path));
  TR_ASSIGN_OR_RETURN(const int64_t version, ReadSchemaVersion(db, path));
  TR_RETURN_IF_ERROR(UseWriteAheadLog(db, path));
  // A current file needs no write to open (so a lock held elsewhere does not stop the start).
  if (version != kSchemaVersion)
    TR_RETURN_IF_ERROR(InTransaction(db, [db, &path] { return Migrate(db, path); }));
  if (!IsMemoryPath(path)) {
    // Lookups and listings read on their own connection, so they never queue behind a write
    // waiting for a lock (nor behind the store's write mutex).
    if (sqlite3* rdb = OpenReadConnection(path)) {
      MutexLock lock(&store->read_mu_);
      store->rdb_ = rdb;
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
    TR_RETURN_IF_ERROR(st->Bind(3, r.device.library_version));
    int64_t id = 0;
    TR_ASSIGN_OR_RETURN(auto existing, NextGoodEntry(db_, *st, false, &id, skip_));
    if (existing && existing->device.library_version == r.device.library_version &&
        existing->best_measurement.median_s <= r.best_measurement.median_s)
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
    TR_RETURN_IF_ERROR(st->Bind(3, std::string(kLibraryVersion)));
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
    where.sql += where.sql.empty() ? " WHERE " : " AND ";
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
  return OnReader([](sqlite3* db) { return ReadDevices(db); });
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
