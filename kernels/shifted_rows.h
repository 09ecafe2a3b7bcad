// Shifted rows, the realigning pad-layout tiles (realign 1, 4- and 8-byte elements): how the
// aligned 16-byte windows around a misaligned tile row are stored into shared memory at the
// row's own misalignment (PlaceWindow), and how an output window is gathered back
// (GatherWindow). Checked on the CPU by kernels/shifted_rows_test.cc.
//
// Pure functions over caller-owned memory; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/register_transpose.h"

namespace transposed::kernels {

// ---- Shifted rows (realigning pad-layout tiles). A tile row of `tcb` bytes that starts o bytes
// (0 <= o < 16) past a 16-byte boundary is read as aligned 16-byte windows k = 0 .. tcb / 16
// (the last only when o != 0); window k holds the row's bytes 16k - o .. 16k - o + 15. Each
// window is stored into the row's shared copy at row + 16k - o, keeping the bytes that fall in
// [0, tcb): as 4-byte aligned words (funnel shifts of neighbouring window words when the
// destination is not word aligned) plus, then, a 1-3 byte head and tail. Afterwards element c of
// the row is at row + c * E whatever o was, with no shuffles or selects.
//   row      the row's first byte in shared memory (4-byte aligned)
//   at       16k - o: where window byte 0 goes, relative to row (negative for k = 0, o != 0)
//   w        the window, 4 little-endian words
// check_lo / check_hi: whether bytes may fall before 0 (k = 0) / at or past tcb (the last
// window); the windows in between store everything.
TR_HD void PlaceWindow(unsigned char* row, int tcb, int at, const uint32_t w[4], bool check_lo,
                       bool check_hi) {
  unsigned char* const dst = row + at;
  const int s = static_cast<int>((4 - (reinterpret_cast<uintptr_t>(dst) & 3)) & 3);
  auto keep = [&](int pos, int n) {
    return (!check_lo || pos >= 0) && (!check_hi || pos + n <= tcb);
  };
  if (s == 0) {
    TR_UNROLL
    for (int i = 0; i < 4; ++i)
      if (keep(at + 4 * i, 4)) *reinterpret_cast<uint32_t*>(dst + 4 * i) = w[i];
    return;
  }
  // Head: window bytes 0 .. s-1 end at the word boundary dst + s.
  if (keep(at, s)) {
    if (s & 1) *dst = static_cast<unsigned char>(w[0]);
    if (s & 2) *reinterpret_cast<uint16_t*>(dst + (s & 1)) = static_cast<uint16_t>(w[0] >> (8 * (s & 1)));
  }
  TR_UNROLL
  for (int i = 0; i < 3; ++i)
    if (keep(at + s + 4 * i, 4))
      *reinterpret_cast<uint32_t*>(dst + s + 4 * i) = FunnelBytes(w[i], w[i + 1], s);
  // Tail: window bytes 12 + s .. 15 start at the word boundary dst + 12 + s.
  if (keep(at + 12 + s, 4 - s)) {
    const uint32_t t = w[3] >> (8 * s);
    unsigned char* const p = dst + 12 + s;
    if ((4 - s) & 2) *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(t);
    if ((4 - s) & 1) p[(4 - s) & 2] = static_cast<unsigned char>(t >> (8 * ((4 - s) & 2)));
  }
}

// Gathers one 16-byte output window from a shifted tile: elements j = 0 .. 16/E - 1 at
// col + j * stride (col: the element of the window's first input row), packed little-endian.
// 4- and 8-byte elements only (RealignInvalid; 1 and 2 bytes take the packed tiles).
template <int E>
TR_HD void GatherWindow(const unsigned char* col, int stride, uint32_t w[4]) {
  static_assert(E == 4 || E == 8, "shifted rows hold 4- or 8-byte elements");
  TR_UNROLL
  for (int j = 0; j < 16 / E; ++j)
    TR_UNROLL
    for (int i = 0; i < E / 4; ++i)
      w[j * (E / 4) + i] = reinterpret_cast<const uint32_t*>(col + j * stride)[i];
}
}  // namespace transposed::kernels
