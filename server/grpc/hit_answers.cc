#include "server/grpc/hit_answers.h"

namespace transposed {

std::optional<grpc::Slice> HitAnswers::Find(const std::shared_ptr<const TuneResult>& stored,
                                            int device) const {
  MutexLock l(&mu_);
  auto it = encoded_.find(Key{stored.get(), device});
  if (it == encoded_.end()) return std::nullopt;
  return it->second.bytes;
}

grpc::Slice HitAnswers::Keep(std::shared_ptr<const TuneResult> stored, int device,
                             const std::string& encoded) {
  grpc::Slice bytes(encoded);  // copied outside the lock
  const Key key{stored.get(), device};
  MutexLock l(&mu_);
  if (encoded_.size() >= max_entries_ && encoded_.find(key) == encoded_.end()) encoded_.clear();
  return encoded_.emplace(key, Encoded{std::move(stored), std::move(bytes)}).first->second.bytes;
}

size_t HitAnswers::size() const {
  MutexLock l(&mu_);
  return encoded_.size();
}

}  // namespace transposed
