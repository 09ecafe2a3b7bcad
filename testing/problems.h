// MakeTestProblem: the one builder of a core Problem from its dimensions for tests (rows, cols,
// dtype, then batch and leading dimensions with their defaults: one matrix, dense);
// MakeTestProblemOfSize the same with an element size in bytes (DTypeOfSize's dtype).
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

inline Problem MakeTestProblemOfSize(int64_t rows, int64_t cols, int esize, int64_t batch = 1,
                                     int64_t ld_in = 0, int64_t ld_out = 0) {
  return MakeTestProblem(rows, cols, *DTypeOfSize(esize), batch, ld_in, ld_out);
}

}  // namespace transposed
