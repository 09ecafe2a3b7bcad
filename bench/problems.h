// The benchmark problems in one place: the fixed list of issue #3 and the seeded random draw of
// issue #7 ("shapes nobody picked"). transpose_bench measures the family on them and tune_eval
// checks the tuner's fast search on them, so both draw the same problems from the same seed.
// Header-only; pure functions of their arguments.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
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

// One randomly drawn problem and the class it was drawn as: "odd" (rows and columns of any
// value, so rows start at every alignment), "aligned" (both sides multiples of 64), "skinny" (one
// side 1..16), "batched" (2..512 matrices) or "strided" (leading dimensions larger than the
// matrix).
struct RandomProblem {
  std::string kind;
  Problem problem;
};

// n problems drawn from `seed` (the same seed gives the same problems wherever the same standard
// library runs: std::mt19937_64 is exactly specified, its distributions are the library's).
// Element sizes cycle through 1, 2, 4, 8, 16 so each size gets n/5 problems; the matrix bytes
// are log-uniform in [min_bytes, max_bytes] (16 MiB to 2 GiB by default); classes are odd 40%,
// aligned 15%, skinny 15%, batched 15%, strided 15%; the aspect ratio is log-uniform in
// [1/64, 64] (skinny: the long side takes the rest).
inline std::vector<RandomProblem> RandomProblems(uint64_t seed, int n,
                                                 int64_t min_bytes = int64_t{16} << 20,
                                                 int64_t max_bytes = int64_t{2} << 30) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return lo + (hi - lo) * std::uniform_real_distribution<double>(0, 1)(rng);
  };
  auto irange = [&](int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int sizes[] = {1, 2, 4, 8, 16};
  std::vector<RandomProblem> out;
  for (int i = 0; i < n; ++i) {
    const int e = sizes[i % 5];
    const double bytes = std::exp(uniform(std::log(static_cast<double>(min_bytes)),
                                          std::log(static_cast<double>(max_bytes))));
    const int64_t elems = std::max<int64_t>(1, static_cast<int64_t>(bytes / e));
    const double u = uniform(0, 1);
    RandomProblem r;
    Problem& p = r.problem;
    p.dtype = *DTypeOfSize(e);
    const double aspect = std::exp(uniform(std::log(1.0 / 64), std::log(64.0)));
    auto sides = [&](int64_t count, int64_t* rows, int64_t* cols) {
      *rows = std::max<int64_t>(1, std::llround(std::sqrt(count * aspect)));
      *cols = std::max<int64_t>(1, count / *rows);
    };
    if (u < 0.40) {
      r.kind = "odd";
      sides(elems, &p.rows, &p.cols);
      p.rows |= 1;  // odd sides: rows start at every alignment
      p.cols |= 1;
    } else if (u < 0.55) {
      r.kind = "aligned";
      sides(elems, &p.rows, &p.cols);
      p.rows = std::max<int64_t>(64, p.rows / 64 * 64);
      p.cols = std::max<int64_t>(64, p.cols / 64 * 64);
    } else if (u < 0.70) {
      r.kind = "skinny";
      const int64_t narrow = irange(1, 16);
      const int64_t len = std::max<int64_t>(1, elems / narrow);
      if (irange(0, 1)) {
        p.rows = len;
        p.cols = narrow;
      } else {
        p.rows = narrow;
        p.cols = len;
      }
    } else if (u < 0.85) {
      r.kind = "batched";
      p.batch = irange(2, 512);
      sides(std::max<int64_t>(1, elems / p.batch), &p.rows, &p.cols);
      if (irange(0, 1)) p.cols += irange(1, 15);  // half of them odd
    } else {
      r.kind = "strided";
      sides(elems, &p.rows, &p.cols);
      p.ld_in = p.cols + irange(1, 64);
      p.ld_out = p.rows + irange(1, 64);
    }
    out.push_back(r);
  }
  return out;
}

// A fresh seed (printed by the tools, so that any run can be repeated with --seed).
inline uint64_t FreshSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace transposed::bench
