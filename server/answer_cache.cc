#include "server/answer_cache.h"

#include <utility>

namespace transposed {

StatusOr<std::optional<TuneResult>> AnswerCache::LookupByClass(const std::string& device_class,
                                                              const Problem& problem) {
  TR_ASSIGN_OR_RETURN(const StoreVersion version, store_->Version());
  std::string key = device_class;
  key += '|';
  key += problem.Key();
  {
    MutexLock l(&mu_);
    if (!valid_ || version != version_) {
      answers_.clear();
      version_ = version;
      valid_ = true;
    }
    if (auto it = answers_.find(key); it != answers_.end()) return it->second;
  }
  // Read at `version` or later: any change after `version` changes the version, so keeping the
  // answer under `version` (and only while that is still the cache's) never keeps a stale one.
  TR_ASSIGN_OR_RETURN(std::optional<TuneResult> answer,
                      store_->LookupByClass(device_class, problem));
  MutexLock l(&mu_);
  if (valid_ && version_ == version) {
    if (answers_.size() >= max_entries_) answers_.clear();
    answers_.emplace(std::move(key), answer);
  }
  return answer;
}

size_t AnswerCache::size() const {
  MutexLock l(&mu_);
  return answers_.size();
}

}  // namespace transposed
