// GetConfigRequestFor: the one builder of the GetConfig request of the daemon tests (a matrix of
// f32 on the default device; cache_only: policy CACHE_ONLY). Header-only; link the proto target.
// Thread-safe (no state).
#pragma once

#include <cstdint>

#include "transposed/v1/transposed.pb.h"

namespace transposed::testing {

inline v1::GetConfigRequest GetConfigRequestFor(int64_t rows, int64_t cols,
                                                bool cache_only = false) {
  v1::GetConfigRequest req;
  req.mutable_problem()->set_rows(rows);
  req.mutable_problem()->set_cols(cols);
  req.mutable_problem()->set_dtype("f32");
  if (cache_only) req.set_policy(v1::CACHE_ONLY);
  return req;
}

}  // namespace transposed::testing
