// AnswerCache: a read-through cache, in the daemon's memory, of the store's class lookups
// (Store::LookupByClass: the answer a GetConfig hit serves, or that there is none).
//
// SQLite stays the source of truth. Every lookup first asks the store for its version
// (Store::Version: one PRAGMA, no table read), and a version other than the one the cached
// answers were read at forgets them all: a tune saved, an entry imported, merged or deleted, by
// this daemon or by another process on the same database file, is seen by the next lookup. An
// answer read at a version is kept under that version only if no change was seen meanwhile.
// Misses are cached too (a CACHE_ONLY miss costs what a hit costs). At most `max_entries` answers
// are kept; a full cache is emptied and refilled. Lookups with candidates are not cached.
//
// Thread-safety: thread-safe; lookups of different threads run at once outside the cache's own
// short lock (which is never held while the store is read).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "core/tune_result.h"
#include "server/store.h"

namespace transposed {

class AnswerCache {
 public:
  static constexpr size_t kDefaultMaxEntries = 65536;

  // `store` must outlive the cache.
  explicit AnswerCache(Store* store, size_t max_entries = kDefaultMaxEntries)
      : store_(store), max_entries_(max_entries) {}

  // Store::LookupByClass(device_class, problem), through the cache.
  StatusOr<std::optional<TuneResult>> LookupByClass(const std::string& device_class,
                                                    const Problem& problem) EXCLUDES(mu_);

  // Answers held now (for tests and metrics).
  size_t size() const EXCLUDES(mu_);

 private:
  Store* const store_;
  const size_t max_entries_;
  mutable Mutex mu_;
  bool valid_ GUARDED_BY(mu_) = false;  // version_ was read (nothing cached before)
  StoreVersion version_ GUARDED_BY(mu_);
  // device class "|" problem key -> the stored answer (nullopt: none stored).
  std::unordered_map<std::string, std::optional<TuneResult>> answers_ GUARDED_BY(mu_);
};

}  // namespace transposed
