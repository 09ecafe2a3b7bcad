// HitAnswers: the encoded Answer message of each cache hit that GetConfig serves, kept so that
// the next hit of the same stored entry is answered with the same bytes: gRPC is handed a
// reference-counted slice, and no message is built, copied or serialised per hit.
//
// An encoding is keyed by the answer cache's entry it was made from (ConfigAnswer::stored: the
// same pointer while the cache holds the entry, a new one once the store changed, so a changed
// entry is never answered with old bytes) and by the device the answer is for. Each kept
// encoding holds its entry, so the entry's address cannot be reused while it is kept. At most
// `max_entries` encodings are kept (an answer of two devices is ~2 KB); a full memo is emptied
// and refilled, each encoding made again on its next hit.
//
// Thread-safety: thread-safe; one short lock per call, never held while an answer is encoded.
#pragma once

#include <grpcpp/support/slice.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "core/tune_result.h"

namespace transposed {

class HitAnswers {
 public:
  static constexpr size_t kDefaultMaxEntries = 4096;

  explicit HitAnswers(size_t max_entries = kDefaultMaxEntries) : max_entries_(max_entries) {}

  // The encoding kept for (stored, device), if any: a new reference to the same bytes.
  std::optional<grpc::Slice> Find(const std::shared_ptr<const TuneResult>& stored,
                                  int device) const EXCLUDES(mu_);
  // Keeps `encoded` as the encoding of (stored, device) and returns it (a slice of its own; the
  // one kept first when another thread kept one meanwhile).
  grpc::Slice Keep(std::shared_ptr<const TuneResult> stored, int device,
                   const std::string& encoded) EXCLUDES(mu_);

  size_t size() const EXCLUDES(mu_);

 private:
  struct Key {
    const TuneResult* stored;
    int device;
    bool operator==(const Key& o) const { return stored == o.stored && device == o.device; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.stored) * 31 + static_cast<size_t>(k.device);
    }
  };
  struct Encoded {
    std::shared_ptr<const TuneResult> stored;  // keeps the key's address from being reused
    grpc::Slice bytes;
  };

  const size_t max_entries_;
  mutable Mutex mu_;
  std::unordered_map<Key, Encoded, KeyHash> encoded_ GUARDED_BY(mu_);
};

}  // namespace transposed
