// Register-level word operations of the tile and skinny kernels: CUDA's byte permute and funnel
// shift (with their host equivalents), the 4x4 byte and 2x2 half transposes that move packed 1-
// and 2-byte elements between rows and columns, and the realignment of bytes read as aligned
// 16-byte windows (ShiftWords). constexpr and free of CUDA headers, so
// kernels/register_transpose_test.cc checks on the CPU exactly what the kernels run.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace transposed::kernels {

// Byte permute with the semantics of CUDA's __byte_perm(x, y, s): result byte i is byte
// (s >> 4i) & 7 of the 8-byte value {y:x} (bytes 0-3 from x, 4-7 from y).
TR_HD constexpr uint32_t BytePerm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t sel = (s >> (4 * i)) & 7u;
    r |= static_cast<uint32_t>((v >> (8 * sel)) & 0xffu) << (8 * i);
  }
  return r;
#endif
}

// 4x4 transpose of bytes: w[j] holds row j (byte k = column k); afterwards t[k] holds column k
// (byte j = row j). 8 byte permutes.
TR_HD constexpr void Transpose4x4Bytes(const uint32_t w[4], uint32_t t[4]) {
  const uint32_t x0 = BytePerm(w[0], w[1], 0x5140);  // w0b0 w1b0 w0b1 w1b1
  const uint32_t x1 = BytePerm(w[0], w[1], 0x7362);  // w0b2 w1b2 w0b3 w1b3
  const uint32_t y0 = BytePerm(w[2], w[3], 0x5140);
  const uint32_t y1 = BytePerm(w[2], w[3], 0x7362);
  t[0] = BytePerm(x0, y0, 0x5410);
  t[1] = BytePerm(x0, y0, 0x7632);
  t[2] = BytePerm(x1, y1, 0x5410);
  t[3] = BytePerm(x1, y1, 0x7632);
}

// 2x2 transpose of 16-bit halves: w[j] holds row j; afterwards t[k] holds column k.
TR_HD constexpr void Transpose2x2Halves(const uint32_t w[2], uint32_t t[2]) {
  t[0] = BytePerm(w[0], w[1], 0x5410);
  t[1] = BytePerm(w[0], w[1], 0x7632);
}

// Packed register transpose of a write unit for 1- and 2-byte elements: wv[j] is the 4-byte word
// of input row j (V rows) at one column group; afterwards o[k] holds output row k of the group
// (W = 4 / E rows), packed as UW = V * E / 4 words. 1-byte elements: 4x4 byte transposes; 2-byte:
// 2x2 half transposes. Used by the tile kernels' write phase (TileKernel and TileAsyncKernel).
template <int E, int V, int W, int UW>
TR_HD constexpr void TransposePackedWords(const uint32_t (&wv)[V], uint32_t (&o)[W][UW]) {
  static_assert(E == 1 || E == 2, "packed words hold 1- or 2-byte elements");
  static_assert(W == 4 / E && UW == V * E / 4, "W output rows of UW words");
  if constexpr (E == 1) {
    TR_UNROLL
    for (int mm = 0; mm < V / 4; ++mm) {
      uint32_t t[4] = {};
      Transpose4x4Bytes(wv + 4 * mm, t);
      TR_UNROLL
      for (int kk = 0; kk < 4; ++kk) o[kk][mm] = t[kk];
    }
  } else {
    TR_UNROLL
    for (int mm = 0; mm < V / 2; ++mm) {
      uint32_t t[2] = {};
      Transpose2x2Halves(wv + 2 * mm, t);
      o[0][mm] = t[0];
      o[1][mm] = t[1];
    }
  }
}

// Word i (0..3) of a 4-word vector, i a run-time value (selects, so the vector stays in
// registers).
TR_HD constexpr uint32_t WordAt(const uint32_t w[4], int i) {
  return i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
}

// Funnel shift right: the low 32 bits of {hi:lo} >> (8 * bytes), 0 <= bytes < 4.
TR_HD constexpr uint32_t FunnelBytes(uint32_t lo, uint32_t hi, int bytes) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, 8 * bytes);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (8 * bytes));
#endif
}

// Realigns 4N bytes: x holds N + 4 words read from an aligned address A (x[N..N+3] may be
// anything when o == 0); afterwards y[i] holds bytes o + 4i .. o + 4i + 3 of x (0 <= o < 16).
// Selects and funnel shifts only, so everything stays in registers.
template <int N>
TR_HD constexpr void ShiftWords(const uint32_t (&x)[N + 4], int o, uint32_t (&y)[N]) {
  uint32_t a[N + 3] = {}, b[N + 1] = {};
  const bool s1 = (o & 4) != 0, s2 = (o & 8) != 0;
  TR_UNROLL
  for (int i = 0; i < N + 3; ++i) a[i] = s1 ? x[i + 1] : x[i];
  TR_UNROLL
  for (int i = 0; i < N + 1; ++i) b[i] = s2 ? a[i + 2] : a[i];
  TR_UNROLL
  for (int i = 0; i < N; ++i) y[i] = FunnelBytes(b[i], b[i + 1], o & 3);
}
// 64 bytes from the five aligned windows around them (the packed tiles' load unit).
TR_HD constexpr void ShiftWindows(const uint32_t (&x)[20], int o, uint32_t (&y)[16]) {
  ShiftWords<16>(x, o, y);
}

}  // namespace transposed::kernels
