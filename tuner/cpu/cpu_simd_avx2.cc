// The CPU micro-kernels for AVX2 (compiled with -mavx2; run only where the CPU has it).
#define TR_SIMD_VECTOR_BYTES 32
#include "tuner/cpu/cpu_simd_impl.h"

namespace transposed::cpu_simd {

void RectAvx2(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt) {
  Rect(m, i0, i1, j0, j1, nt);
}

void WalkAvx2(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next) {
  Walk(m, b, nt, next_m, next);
}

int BlockEdgeAvx2(int elem) { return BlockEdgeOf(elem); }

}  // namespace transposed::cpu_simd
