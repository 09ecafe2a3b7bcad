// The benchmark problems of issue #3, in one place: transpose_bench measures the kernel family on
// them and tune_eval checks the tuner's fast search on them. Header-only; pure data.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/problem.h"

namespace transposed::bench {

inline Problem MakeProblem(int64_t rows, int64_t cols, DType t, int64_t batch = 1) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = t;
  p.batch = batch;
  return p;
}

// f32 1024^2, 4096^2, 8192^2, 16384^2, 8192x1024, 1024x8192, 4097x3001, 2^20x8, 8x2^20;
// f64 8192^2, 4097x3001; f16 and i8 8192^2, 4097x3001, 2^20x8; 256 x 512x384 f16.
inline std::vector<Problem> BenchmarkProblems() {
  std::vector<Problem> v;
  const int64_t k = 1024, m = 1 << 20;
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{
           {k, k}, {4 * k, 4 * k}, {8 * k, 8 * k}, {16 * k, 16 * k}, {8 * k, k}, {k, 8 * k},
           {4097, 3001}, {m, 8}, {8, m}}) {
    v.push_back(MakeProblem(r, c, DType::kF32));
  }
  v.push_back(MakeProblem(8 * k, 8 * k, DType::kF64));
  v.push_back(MakeProblem(4097, 3001, DType::kF64));
  for (DType t : {DType::kF16, DType::kI8}) {
    v.push_back(MakeProblem(8 * k, 8 * k, t));
    v.push_back(MakeProblem(4097, 3001, t));
    v.push_back(MakeProblem(m, 8, t));
  }
  v.push_back(MakeProblem(512, 384, DType::kF16, 256));
  return v;
}

}  // namespace transposed::bench
