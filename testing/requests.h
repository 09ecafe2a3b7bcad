// GetConfigRequestFor: the one builder of the GetConfig request of the daemon tests (a matrix of
// f32 on the default device, with a cache policy: TUNE_IF_MISSING unless told; cache_only: policy
// CACHE_ONLY). Header-only; link the proto target.
// Thread-safe (no state).
#pragma once

#include <cstdint>

#include "transposed/v1/transposed.pb.h"

namespace transposed::testing {

inline v1::GetConfigRequest GetConfigRequestFor(int64_t rows, int64_t cols,
                                                v1::CachePolicy policy) {
  v1::GetConfigRequest req;
  req.mutable_problem()->set_rows(rows);
  req.mutable_problem()->set_cols(cols);
  req.mutable_problem()->set_dtype("f32");
  req.set_policy(policy);
  return req;
}

inline v1::GetConfigRequest GetConfigRequestFor(int64_t rows, int64_t cols,
                                                bool cache_only = false) {
  return GetConfigRequestFor(rows, cols, cache_only ? v1::CACHE_ONLY : v1::TUNE_IF_MISSING);
}

}  // namespace transposed::testing
