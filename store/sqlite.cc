#include "store/sqlite.h"

#include <filesystem>
#include <string>
#include <system_error>

namespace transposed {
namespace store_internal {

std::string SqliteError(sqlite3* db) {
  return std::string(sqlite3_errmsg(db)) + " (sqlite code " +
         std::to_string(sqlite3_extended_errcode(db)) + ")";
}

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

bool IsMemoryPath(const std::string& path) { return path == ":memory:"; }

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

Status OpenFailure(const std::string& path, const Status& s) {
  return Status(s.code() == StatusCode::kInternal ? StatusCode::kFailedPrecondition : s.code(),
                "store: cannot open database " + path + ": " + s.message());
}

StatusOr<sqlite3*> OpenWriteConnection(const std::string& path) {
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
  return db;
}

Status SetUpWriteConnection(sqlite3* db, const std::string& path) {
  // SQLite opens a file it may not write (mode 0444) read-only without an error.
  if (sqlite3_db_readonly(db, "main") == 1) {
    return Status::FailedPrecondition("store: cannot open database " + path +
                                      " for writing: this process may not write the file");
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  return Status::OK();
}

Status UseWriteAheadLog(sqlite3* db, const std::string& path) {
  {
    auto st = Stmt::Prepare(db, "PRAGMA journal_mode = WAL");
    if (!st.ok()) return OpenFailure(path, st.status());
    auto row = (*st)->Step();
    if (!row.ok()) return OpenFailure(path, row.status());
    const std::string mode = *row ? (*st)->Text(0) : "";
    if (mode != "wal" && !(IsMemoryPath(path) && mode == "memory")) {
      return Status::FailedPrecondition("store: database " + path +
                                        ": cannot switch to WAL journal mode (got '" + mode + "')");
    }
  }
  for (const char* pragma : {"PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON"}) {
    Status s = Exec(db, pragma);
    if (!s.ok()) return OpenFailure(path, s);
  }
  return Status::OK();
}

sqlite3* OpenReadConnection(const std::string& path) {
  sqlite3* rdb = nullptr;
  if (sqlite3_open_v2(path.c_str(), &rdb, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    sqlite3_close_v2(rdb);
    return nullptr;
  }
  sqlite3_extended_result_codes(rdb, 1);
  sqlite3_busy_timeout(rdb, kReadBusyTimeoutMs);
  return rdb;
}

StatusOr<int64_t> DataVersion(sqlite3* db, sqlite3_stmt** stmt, sqlite3** stmt_db) {
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


}  // namespace store_internal
}  // namespace transposed
