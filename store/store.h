// Store: the daemon's SQLite cache of tuning results, one file, rows per device.
//
// Tables (store/schema.md; design: docs/design/store.md): devices (identity, keyed by
// fingerprint), entries (the winner per device and problem), candidates (every candidate's
// measurement of that tune).
// WAL mode, a busy timeout, PRAGMA user_version with migrations; SaveTune writes one tune in one
// transaction, so a crash leaves either the old state or the new one.
//
// Thread-safety: a Store is safe to use from many threads. Writes are serialised on one
// connection, reads on a second one (each call is short: tuning happens outside the store), so a
// write that waits for a lock another process holds (busy timeout 5 s, then UNAVAILABLE) never
// delays a lookup; a read waits at most 250 ms for a lock, then UNAVAILABLE.
//
// Bad rows: every row read back is checked (store/entry_validation.h); one that does not parse
// or validate (an older version stored NaN as NULL, say) is skipped, logged once and counted
// (bad_rows_skipped), and the other rows are served. Read-only: a file that cannot be written is
// served read-only (Open, or a write that fails for a read-only file or a full disk); TryWritable
// (called with backoff by store/store_reopener.h) opens it for writing again.
//
// Its parts, one job each: the SQLite layer (store/sqlite.h), the schema and its migrations
// (store/schema.h), the SQL values of the fields (store/sql_values.h) and the rows, one column
// table per row type (store/rows.h); this file and store.cc are the API over them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/problem.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "core/tune_result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace transposed {

// Every set field must match; a default-constructed filter matches everything.
struct StoreFilter {
  std::string device_fingerprint;
  std::string device_class;  // entries measured on any device of this class (core/device_class.h)
  std::optional<DType> dtype;
  int64_t rows = 0;
  int64_t cols = 0;
  std::string variant;
  int64_t tuned_before_unix_ms = 0;
  std::string library_version;  // entries measured with this kernel library version
  // true: only entries measured under contention (TuneResult::contention set); false: only
  // those measured on an idle device.
  std::optional<bool> contended;

  bool empty() const;
};

// A position in the newest-first order of entries (List resumes strictly after it).
struct EntryCursor {
  int64_t tuned_at_unix_ms = 0;
  int64_t id = 0;
};

// What a store's reads see, as a value that changes whenever that may have changed
// (Store::Version); equal values mean the same content.
struct StoreVersion {
  int64_t data_version = 0;  // SQLite's PRAGMA data_version of the connection reads use
  int64_t own_changes = 0;   // rows this store wrote on that same connection (none with two)
  int64_t generation = 0;    // connections replaced (Store::TryWritable): counters start over

  bool operator==(const StoreVersion& o) const {
    return data_version == o.data_version && own_changes == o.own_changes &&
           generation == o.generation;
  }
  bool operator!=(const StoreVersion& o) const { return !(*this == o); }
};

class Store {
 public:
  static constexpr int kSchemaVersion = 5;

  // Opens (creating if needed) and migrates the database at `path`. ":memory:" works for tests.
  // FAILED_PRECONDITION if the file's schema is newer than this build knows. A file restored
  // from `sqlite3 .dump` output (this schema, but user_version 0) is adopted. When an existing
  // file cannot be opened for writing (read-only file or directory, full disk...) but can be read
  // and has this schema, the store opens read-only: read_only() says why, every write answers
  // FAILED_PRECONDITION.
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  // Records (or refreshes) a device identity row. Idempotent.
  Status UpsertDevice(const DeviceInfo& device);
  // Replaces the entry and candidate rows of (result.device, result.problem) in one transaction.
  Status SaveTune(const TuneResult& result);
  // The stored result for a device fingerprint and problem, or nullopt on a miss.
  StatusOr<std::optional<TuneResult>> Lookup(const std::string& device_fingerprint,
                                             const Problem& problem,
                                             bool include_candidates = false);
  // The fastest stored result for the problem measured on any device of the class (result.device
  // is the instance it was measured on, with the kernel library version the entry was measured
  // with), or nullopt on a miss. Entries of this build's library version (kLibraryVersion) come
  // first: an entry of an older version is returned only when the class has none of this one
  // (the caller decides whether it may serve it: server/previous_entry.h).
  StatusOr<std::optional<TuneResult>> LookupByClass(const std::string& device_class,
                                                    const Problem& problem,
                                                    bool include_candidates = false);
  // Merges one result measured elsewhere (its origin says how it came): stored, under its own
  // instance, only when no device of its class has a result for the problem, of the same kernel
  // library version, that is as fast or faster (the faster winner is kept, never a downgrade;
  // an entry of another version never keeps a result out). true when stored.
  StatusOr<bool> Merge(const TuneResult& result);
  // Entries matching the filter, newest first; limit 0 = all. With `after`, only entries after
  // that cursor (keyset pagination); with `cursors`, each returned entry's cursor is appended.
  // max_bytes > 0: stops after the entry that brings the entries' ApproxEntryBytes
  // (store/entry_validation.h) to max_bytes or more (so memory holds about one page).
  StatusOr<std::vector<TuneResult>> List(const StoreFilter& filter, bool include_candidates = false,
                                         int limit = 0, const EntryCursor* after = nullptr,
                                         std::vector<EntryCursor>* cursors = nullptr,
                                         size_t max_bytes = 0);
  // Deletes matching entries and their candidates; returns how many entries went.
  StatusOr<int64_t> Delete(const StoreFilter& filter);
  // All device identities ever recorded.
  StatusOr<std::vector<DeviceInfo>> Devices();

  // Changes whenever what reads see may have changed: a commit by any connection, this store's
  // or another process's (so a cache of lookups, server/answer_cache.h, knows when to forget).
  // Reads no table: one PRAGMA on the read connection. A connection replaced must not repeat a
  // version the old one gave.
  StatusOr<StoreVersion> Version();

  // Empty when writable; else why the store is read-only.
  std::string read_only() const EXCLUDES(state_mu_);
  // Leaves read-only mode when the file can be written again: opens it for writing and writes
  // to it (the schema version, unchanged), then serves from the new connections. OK when the
  // store is writable now (also when it already was); else why not (the store stays as it was).
  // ":memory:" is always writable.
  Status TryWritable() EXCLUDES(mu_, read_mu_, state_mu_);
  // Rows read back that did not parse or validate and were skipped (each read of one counts).
  int64_t bad_rows_skipped() const { return bad_rows_skipped_.load(); }

 private:
  explicit Store(sqlite3* db);
  // A write failed: when for a read-only file or a full disk, the store becomes read-only
  // (logged once) until TryWritable succeeds. Returns `s`.
  Status NoteWriteFailure(const Status& s) EXCLUDES(state_mu_);
  // A row that failed to read back (entry id, why): counted, logged the first time per id.
  void SkipBadRow(int64_t entry_id, const Status& why) EXCLUDES(state_mu_);
  static StatusOr<std::unique_ptr<Store>> OpenWritable(const std::string& path);
  static StatusOr<std::unique_ptr<Store>> OpenReadOnly(const std::string& path,
                                                       const std::string& reason);
  Status CheckWritable() const;
  // Runs fn(connection) on the read connection under read_mu_, or, without one (":memory:", a
  // read-only store), on the write connection under mu_.
  template <typename Fn>
  auto OnReader(Fn&& fn) -> decltype(fn(static_cast<sqlite3*>(nullptr)));

  // Writes (and reads without a read connection) on db_ under mu_; reads on rdb_ under
  // read_mu_, so that a write waiting for a lock held by another process never delays a lookup.
  Mutex mu_;
  sqlite3* db_ GUARDED_BY(mu_);  // replaced only by TryWritable
  Mutex read_mu_;
  sqlite3* rdb_ GUARDED_BY(read_mu_) = nullptr;  // set by OpenWritable, replaced by TryWritable
  std::string path_;                             // set once by Open, before the store is shared
  mutable Mutex state_mu_;
  std::string read_only_reason_ GUARDED_BY(state_mu_);
  std::set<int64_t> bad_rows_logged_ GUARDED_BY(state_mu_);  // at most 256 ids
  std::atomic<int64_t> bad_rows_skipped_{0};
  std::atomic<int64_t> generation_{0};  // connections replaced by TryWritable (in Version())
  const std::function<void(int64_t, const Status&)> skip_;  // SkipBadRow, for the row readers
  // Version()'s PRAGMA data_version, prepared once per connection (the one it was prepared on is
  // kept with it: a replaced connection gets a new statement).
  sqlite3_stmt* version_stmt_ GUARDED_BY(read_mu_) = nullptr;
  sqlite3* version_stmt_db_ GUARDED_BY(read_mu_) = nullptr;
  sqlite3_stmt* wversion_stmt_ GUARDED_BY(mu_) = nullptr;
  sqlite3* wversion_stmt_db_ GUARDED_BY(mu_) = nullptr;
};

}  // namespace transposed
