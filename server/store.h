// Store: the daemon's SQLite cache of tuning results, one file, rows per device.
//
// Tables (see README "Database schema"): devices (identity, keyed by fingerprint), entries (the
// winner per device and problem), candidates (every candidate's measurement of that tune).
// WAL mode, a busy timeout, PRAGMA user_version with migrations; SaveTune writes one tune in one
// transaction, so a crash leaves either the old state or the new one.
//
// Thread-safety: a Store is safe to use from many threads; calls are serialised internally on
// one connection (each is short: tuning happens outside the store).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/problem.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "core/tune_result.h"

struct sqlite3;

namespace transposed {

// Every set field must match; a default-constructed filter matches everything.
struct StoreFilter {
  std::string device_fingerprint;
  std::optional<DType> dtype;
  int64_t rows = 0;
  int64_t cols = 0;
  std::string variant;
  int64_t tuned_before_unix_ms = 0;
  std::string library_version;

  bool empty() const;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens (creating if needed) and migrates the database at `path`. ":memory:" works for tests.
  // FAILED_PRECONDITION if the file's schema is newer than this build knows.
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
  // Entries matching the filter, newest first; limit 0 = all.
  StatusOr<std::vector<TuneResult>> List(const StoreFilter& filter, bool include_candidates = false,
                                         int limit = 0);
  // Deletes matching entries and their candidates; returns how many entries went.
  StatusOr<int64_t> Delete(const StoreFilter& filter);
  // All device identities ever recorded.
  StatusOr<std::vector<DeviceInfo>> Devices();

 private:
  explicit Store(sqlite3* db);
  Mutex mu_;
  sqlite3* const db_ GUARDED_BY(mu_);  // the pointer is set once; every use holds mu_
};

}  // namespace transposed
