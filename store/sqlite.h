// The store's SQLite layer: a prepared statement (Stmt) whose values are only ever bound, whole
// statements (Exec, QueryInt), transactions, how a failed SQLite call becomes a Status
// (UNAVAILABLE for a lock held elsewhere, FAILED_PRECONDITION for a file that cannot be written,
// INTERNAL otherwise), and opening and setting up the write and read connections (WAL mode, busy
// timeouts). Nothing here knows the tables: the schema is store/schema.h, the rows store/rows.h,
// the API that puts them together store/store.h.
//
// Thread-safety: the functions keep no state; a connection and its statements are used by one
// thread at a time (Store holds each connection's mutex around every use).
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace transposed {
namespace store_internal {

// Writes wait this long for a lock another connection or process holds; then UNAVAILABLE.
inline constexpr int kBusyTimeoutMs = 5000;
// Reads wait at most this long for a lock (in WAL mode only a checkpoint or an exclusive lock
// held elsewhere makes them wait at all); then UNAVAILABLE.
inline constexpr int kReadBusyTimeoutMs = 250;

// The connection's last error: its message and extended code.
std::string SqliteError(sqlite3* db);
// A failed call's Status: UNAVAILABLE when another connection or process holds a lock (worth a
// retry), FAILED_PRECONDITION when the file cannot be written, INTERNAL otherwise.
Status ErrorStatus(sqlite3* db, const std::string& message);
// ErrorStatus of "store: <what>: <the connection's last error>".
Status Internal(sqlite3* db, const std::string& what);

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

// Runs one or more statements whole (no values); the error quotes the start of the SQL.
Status Exec(sqlite3* db, const char* sql);
// The first column of the first row of `sql` (a PRAGMA); INTERNAL when there is no row.
StatusOr<int64_t> QueryInt(sqlite3* db, const char* sql);
// Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back on any error.
Status InTransaction(sqlite3* db, const std::function<Status()>& body);

// ":memory:": a database of this connection only (tests); no file, no read connection.
bool IsMemoryPath(const std::string& path);
// "file:" URI of a path, for opening it read-only (immutable: no locks, no WAL).
std::string FileUri(const std::string& path, bool immutable);
// The store's open error: "store: cannot open database <path>: <s>", INTERNAL made
// FAILED_PRECONDITION (the file, not the store, is wrong).
Status OpenFailure(const std::string& path, const Status& s);

// Opens (creating if needed) `path` for reading and writing. FAILED_PRECONDITION when its
// directory is missing, it is a directory or SQLite cannot open it; INVALID_ARGUMENT when empty.
StatusOr<sqlite3*> OpenWriteConnection(const std::string& path);
// Makes a connection from OpenWriteConnection ready: FAILED_PRECONDITION when this process may not
// write the file (SQLite opens it read-only without an error); else extended result codes and
// the busy timeout.
Status SetUpWriteConnection(sqlite3* db, const std::string& path);
// WAL journal mode (so reads never wait for a write), synchronous = NORMAL, foreign keys on.
Status UseWriteAheadLog(sqlite3* db, const std::string& path);
// A second, read-only connection to the file for lookups and listings, so that they never queue
// behind a write waiting for a lock; nullptr when it cannot be opened (reads then share the
// write connection).
sqlite3* OpenReadConnection(const std::string& path);

// PRAGMA data_version on `db` through *stmt, prepared once for the connection *stmt_db (a lookup
// runs it every time: no parse). A statement prepared for another connection is replaced.
StatusOr<int64_t> DataVersion(sqlite3* db, sqlite3_stmt** stmt, sqlite3** stmt_db);

}  // namespace store_internal
}  // namespace transposed
