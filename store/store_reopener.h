// StoreReopener: the way back from read-only. While the store is read-only (a read-only file, a
// full disk, a lock held elsewhere at start, or a write that failed for one of those later), a
// thread calls Store::TryWritable with backoff: after 1 s, then 2, 4, 8, at most every
// kMaxBackoffSeconds. When the database can be written again the store serves and stores from
// its new connections, and `on_change(true)` tells the daemon (health service
// `transposed.store` SERVING; the metric transposed_store_read_only reads the store itself).
// When the store becomes read-only again, `on_change(false)` and the retries start over.
//
// Thread-safety: construct and destroy on one thread; on_change runs on the reopener's thread
// and must not destroy it. The store must outlive the reopener.
#pragma once

#include <functional>
#include <thread>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "store/store.h"

namespace transposed {

class StoreReopener {
 public:
  static constexpr double kFirstBackoffSeconds = 1;
  static constexpr double kMaxBackoffSeconds = 16;
  // How often a writable store is checked for having become read-only.
  static constexpr double kPollSeconds = 1;

  StoreReopener(Store* store, std::function<void(bool writable)> on_change);
  ~StoreReopener();  // stops and joins the thread
  StoreReopener(const StoreReopener&) = delete;
  StoreReopener& operator=(const StoreReopener&) = delete;

 private:
  void Loop() EXCLUDES(mu_);
  // Sleeps up to `seconds`; false when stopping.
  bool Sleep(double seconds) EXCLUDES(mu_);

  Store* const store_;
  const std::function<void(bool)> on_change_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above
};

}  // namespace transposed
