#include "server/answer_cache.h"

#include <utility>

namespace transposed {

void AnswerCache::ForgetLocked() {
  answers_.clear();
  ++epoch_;
}

void AnswerCache::Invalidate() {
  MutexLock l(&mu_);
  ForgetLocked();
}

StatusOr<std::optional<TuneResult>> AnswerCache::LookupByClass(const std::string& device_class,
                                                              const Problem& problem) {
  TR_ASSIGN_OR_RETURN(const Entry entry, Find(device_class, problem));
  return *entry;
}

StatusOr<AnswerCache::Entry> AnswerCache::Find(const std::string& device_class,
                                               const Problem& problem) {
  std::string key = device_class;
  key += '|';
  key += problem.Key();
  Entry found;
  uint64_t epoch = 0;
  bool recheck = false;
  {
    MutexLock l(&mu_);
    const Clock::time_point now = Clock::now();
    recheck = !valid_ || now - checked_at_ >= recheck_;
    if (recheck) {
      checked_at_ = now;  // the others trust the version meanwhile
    } else {
      if (auto it = answers_.find(key); it != answers_.end()) found = it->second;
      epoch = epoch_;
    }
  }
  if (recheck) {
    TR_ASSIGN_OR_RETURN(const StoreVersion version, store_->Version());
    MutexLock l(&mu_);
    if (!valid_ || version != version_) {
      ForgetLocked();
      version_ = version;
      valid_ = true;
    }
    if (auto it = answers_.find(key); it != answers_.end()) found = it->second;
    epoch = epoch_;
  }
  if (found) return found;
  // Kept only if nothing was forgotten since `epoch`: a write that returned before this read
  // began is in what it reads; one that returns during the read bumps the epoch.
  TR_ASSIGN_OR_RETURN(std::optional<TuneResult> answer,
                      store_->LookupByClass(device_class, problem));
  Entry made = std::make_shared<const std::optional<TuneResult>>(std::move(answer));
  MutexLock l(&mu_);
  if (epoch_ == epoch) {
    if (answers_.size() >= max_entries_) answers_.clear();
    // Another lookup may have read and kept it meanwhile: hand out the one kept.
    return answers_.emplace(std::move(key), made).first->second;
  }
  return made;
}

size_t AnswerCache::size() const {
  MutexLock l(&mu_);
  return answers_.size();
}

}  // namespace transposed
