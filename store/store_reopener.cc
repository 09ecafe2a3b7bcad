#include "store/store_reopener.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace transposed {

StoreReopener::StoreReopener(Store* store, std::function<void(bool writable)> on_change)
    : store_(store), on_change_(std::move(on_change)), thread_([this] { Loop(); }) {}

StoreReopener::~StoreReopener() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

bool StoreReopener::Sleep(double seconds) {
  MutexLock lock(&mu_);
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(seconds));
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) break;
    cv_.WaitFor(&mu_, until - now);
  }
  return !stop_;
}

void StoreReopener::Loop() {
  bool writable = store_->read_only().empty();
  double backoff = kFirstBackoffSeconds;
  int attempts = 0;
  while (Sleep(writable ? kPollSeconds : backoff)) {
    if (writable) {
      if (store_->read_only().empty()) continue;
      writable = false;  // a write failed since (the store logged why)
      backoff = kFirstBackoffSeconds;
      attempts = 0;
      if (on_change_) on_change_(false);
      continue;
    }
    Status s = store_->TryWritable();
    ++attempts;
    if (!s.ok()) {
      spdlog::debug("the database cannot be written yet (attempt {}; next in {} s): {}", attempts,
                    std::min(2 * backoff, kMaxBackoffSeconds), s.ToString());
      backoff = std::min(2 * backoff, kMaxBackoffSeconds);
      continue;
    }
    writable = true;
    spdlog::info("the database is writable again (after {} attempts): tunes are stored from now "
                 "on; health service 'transposed.store' answers SERVING",
                 attempts);
    if (on_change_) on_change_(true);
  }
}

}  // namespace transposed
