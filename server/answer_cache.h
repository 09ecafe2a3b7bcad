// AnswerCache: a read-through cache, in the daemon's memory, of the store's class lookups
// (Store::LookupByClass: the answer a GetConfig hit serves, or that there is none).
//
// SQLite stays the source of truth; the cache only saves reading it again:
//   - this daemon's own writes (a tune saved, a peer's result, an import, a delete) call
//     Invalidate() once the write has returned, so the next lookup reads the store;
//   - any other writer of the same database file (another process, another connection) is seen
//     through the store's version (Store::Version: SQLite's PRAGMA data_version, no table read),
//     re-read when the cache last read it `recheck` ago or more (default 10 ms), so its commit is
//     seen at most about that long after it; a new version forgets every answer.
// An answer read from the store is kept only if nothing was forgotten while it was read, so a
// stale answer is never kept. Misses are cached too (a CACHE_ONLY miss costs what a hit costs).
// At most `max_entries` answers are kept; a full cache is emptied and refilled. On a hit the
// store is not touched at all (no lock of the store, no SQLite call).
//
// Thread-safety: thread-safe; the cache's own lock is short and never held while the store is
// read.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "core/tune_result.h"
#include "store/store.h"

namespace transposed {

class AnswerCache {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kDefaultMaxEntries = 65536;
  static constexpr Clock::duration kDefaultRecheck = std::chrono::milliseconds(10);

  // `store` must outlive the cache.
  explicit AnswerCache(Store* store, size_t max_entries = kDefaultMaxEntries,
                       Clock::duration recheck = kDefaultRecheck)
      : store_(store), max_entries_(max_entries), recheck_(recheck) {}

  // An entry: the stored answer, or nullopt when none is stored. Never changed once made.
  using Entry = std::shared_ptr<const std::optional<TuneResult>>;

  // Store::LookupByClass(device_class, problem), through the cache: the cache's own entry (no
  // copy). The same entry is returned until the answers are forgotten.
  StatusOr<Entry> Find(const std::string& device_class, const Problem& problem) EXCLUDES(mu_);
  // The same, copied.
  StatusOr<std::optional<TuneResult>> LookupByClass(const std::string& device_class,
                                                    const Problem& problem) EXCLUDES(mu_);

  // This process has written to the store: every answer is forgotten now. Call it after the
  // write returned.
  void Invalidate() EXCLUDES(mu_);

  // Answers held now (for tests and metrics).
  size_t size() const EXCLUDES(mu_);

 private:
  void ForgetLocked() REQUIRES(mu_);

  Store* const store_;
  const size_t max_entries_;
  const Clock::duration recheck_;
  mutable Mutex mu_;
  bool valid_ GUARDED_BY(mu_) = false;  // version_ was read
  StoreVersion version_ GUARDED_BY(mu_);
  Clock::time_point checked_at_ GUARDED_BY(mu_);  // when version_ was last (to be) re-read
  uint64_t epoch_ GUARDED_BY(mu_) = 0;            // bumped whenever the answers are forgotten
  // device class "|" problem key -> the stored answer (nullopt: none stored); shared, so that a
  // lookup copies it after the lock is released.
  std::unordered_map<std::string, Entry> answers_ GUARDED_BY(mu_);
};

}  // namespace transposed
