// MakeTestProblem: the one builder of a core Problem from its dimensions for tests (rows, cols,
// dtype, then batch and leading dimensions with their defaults: one matrix, dense).
// Header-only; no state. Thread-safe.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace transposed {

inline Problem MakeTestProblem(int64_t rows, int64_t cols, DType t, int64_t batch = 1,
                               int64_t ld_in = 0, int64_t ld_out = 0) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = t;
  p.batch = batch;
  p.ld_in = ld_in;
  p.ld_out = ld_out;
  return p;
}

}  // namespace transposed
