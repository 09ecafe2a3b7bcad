// Index math of the skinny tiles (one side of 1..256 elements): the unit split of a tile, the
// effective tile length for a narrow side, the aligned windows around a strided segment, and the
// padded shared-memory layout. Checked on the CPU by kernels/skinny_math_test.cc.
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace transposed::kernels {

// Skinny tiles: L elements along the long side times the n (<= kSkinnyMaxSide) elements of the
// narrow side. The strided side moves as 16-byte vectors of V = 16 / e elements; unit q of a tile
// is vector SkinnyVec(q) of narrow index SkinnySide(q) (NV = L / V vectors per narrow index).
TR_HD constexpr int SkinnySide(int q, int nv) { return q / nv; }
TR_HD constexpr int SkinnyVec(int q, int nv) { return q % nv; }

// The widest narrow side of the skinny path: batched matrices with a short side of 17..256 ran
// 20-35 points faster skinny than in tiles (docs/design/kernel-family.md, "Skinny tiles").
inline constexpr int kSkinnyMaxSide = 256;

// Effective tile length of a skinny tile of nominal length `len` (the config's l<LEN>) for a
// narrow side of n elements: the kernel is instantiated for n <= SkinnyMaxSide(n) (4, 8, 16, 32,
// 64, 128 or 256). In the tall direction the tile is made longer as the narrow side shrinks, so
// that a tile always holds about len x 16 elements; shared memory stays within the n = 16 bound
// (SkinnySharedFor(len * 16 * e)). The wide direction keeps `len` for n = 5 to 16 (its
// per-thread window count, held in registers, would grow and spill with longer tiles), doubles
// it for n <= 4 (to the window count of n = 8), and shortens it like the tall one past 16, so
// that the tile bytes and the per-thread counts stay those of n = 16. Why:
// docs/design/kernel-family.md, "Skinny tiles".
TR_HD constexpr int SkinnyMaxSide(int64_t n) {
  return n <= 4    ? 4
         : n <= 8  ? 8
         : n <= 16 ? 16
         : n <= 32 ? 32
         : n <= 64 ? 64
         : n <= 128 ? 128
                    : 256;
}
TR_HD constexpr int64_t SkinnyTileLength(int len, int64_t n, bool tall) {
  if (tall || SkinnyMaxSide(n) > 16) return int64_t{len} * 16 / SkinnyMaxSide(n);
  return SkinnyMaxSide(n) == 4 ? int64_t{len} * 2 : int64_t{len};
}

// ---- Skinny strided side on rows of any alignment (the tall direction's output rows). For each
// narrow index a skinny tile moves a segment of n (<= tile length) elements of one long row,
// which starts p bytes past a 16-byte boundary (p a multiple of e: pointers are element aligned). The segment is moved as the
// aligned 16-byte windows k = 0 .. SegmentWindows(p, n, e) - 1 around it: window k is the 16
// bytes at segment - p + 16 k; its element slot j (0 .. 16/e - 1) holds segment element
// first + j for lo <= j < hi; the other slots belong to the neighbouring segments (the head of
// window 0, the tail of the last) and are neither read as the segment's nor written. Windows
// with lo == 0 and hi == 16/e are whole (one 16-byte access); the at most two others partial.
struct SegmentWindow {
  int first = 0;      // segment element in slot 0 (negative in a head window)
  int lo = 0, hi = 0; // slots of the segment: [lo, hi), empty when lo >= hi
  TR_HD constexpr bool whole(int e) const { return lo == 0 && hi == 16 / e; }
  TR_HD constexpr bool empty() const { return lo >= hi; }
};
TR_HD constexpr int SegmentWindows(int p, int n, int e) { return (p + n * e + 15) / 16; }
TR_HD constexpr SegmentWindow WindowOfSegment(int k, int p, int n, int e) {
  const int v = 16 / e;
  SegmentWindow w;
  w.first = k * v - p / e;
  w.lo = w.first < 0 ? -w.first : 0;
  w.hi = n - w.first < v ? n - w.first : v;
  return w;
}

// Shared-memory layout of the skinny kernels: the tile is a contiguous byte string (the
// contiguous side of the problem) with 4 bytes of padding after every 128 bytes, so that the
// strided gathers of the other side spread over the banks.
TR_HD constexpr int SkinnyOffset(int byte) { return byte + (byte >> 7) * 4; }
// Shared bytes for `bytes` bytes of tile, rounded up to 16.
TR_HD constexpr int64_t SkinnySharedFor(int64_t bytes) {
  return ((bytes + ((bytes + 127) >> 7) * 4) + 15) / 16 * 16;
}

}  // namespace transposed::kernels
