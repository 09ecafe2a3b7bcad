// The CPU micro-kernels for AVX-512 F/BW/DQ/VL (compiled with those flags; run only where the CPU has them).
#define TR_SIMD_VECTOR_BYTES 64
#include "tuner/cpu/cpu_simd_impl.h"

namespace transposed::cpu_simd {

void RectAvx512(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt) {
  Rect(m, i0, i1, j0, j1, nt);
}

void WalkAvx512(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next) {
  Walk(m, b, nt, next_m, next);
}

int BlockEdgeAvx512(int elem) { return BlockEdgeOf(elem); }

}  // namespace transposed::cpu_simd
