// The CPU micro-kernels for the build's default target (SSE2 on x86-64; the portable fallback elsewhere).
#define TR_SIMD_VECTOR_BYTES 16
#include "tuner/cpu/cpu_simd_impl.h"

namespace transposed::cpu_simd {

void RectBase(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt) {
  Rect(m, i0, i1, j0, j1, nt);
}

void WalkBase(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next) {
  Walk(m, b, nt, next_m, next);
}

int BlockEdgeBase(int elem) { return BlockEdgeOf(elem); }

}  // namespace transposed::cpu_simd
