// CPU checks of kernels/skinny_math.h: the padded shared layout, the unit split, the windows of a
// strided segment, and tile lengths that keep the tile bytes for every narrow side.
#include "kernels/skinny_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/policy.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels {
namespace {

TEST(SkinnyLayout, PaddedOffsetsAreIncreasingAndFit) {
  int prev = -1;
  for (int b = 0; b < 48 * 1024; ++b) {
    const int off = SkinnyOffset(b);
    ASSERT_GT(off, prev);
    prev = off;
    if (b % 4 == 0) {
      ASSERT_EQ(off % 4, 0);
    }
  }
  for (int64_t bytes : {1, 15, 16, 127, 128, 129, 4096, 32768}) {
    EXPECT_GE(SkinnySharedFor(bytes), SkinnyOffset(static_cast<int>(bytes - 1)) + 1);
    EXPECT_EQ(SkinnySharedFor(bytes) % 16, 0);
  }
  // Strided gathers of 8 columns of f32 (lane stride 128 bytes): 32 distinct banks.
  std::vector<int> banks(32, 0);
  for (int lane = 0; lane < 32; ++lane) banks[(SkinnyOffset(lane * 4 * 8 * 4) / 4) % 32]++;
  for (int x : banks) EXPECT_EQ(x, 1);
}

// The skinny unit split: unit q is vector SkinnyVec of narrow index SkinnySide, a bijection.
TEST(SkinnyLayout, UnitsSplitIntoSideAndVector) {
  const int nv = 32;
  for (int q = 0; q < 16 * nv; ++q) {
    EXPECT_EQ(SkinnySide(q, nv) * nv + SkinnyVec(q, nv), q);
    EXPECT_LT(SkinnyVec(q, nv), nv);
  }
}

// The windows of a skinny strided segment: every window is a 16-byte aligned block; together
// their slots [lo, hi) name every segment element exactly once, at the byte the element has in
// memory (window start + slot * e == segment + element * e); whole windows hold 16/e elements,
// at most two windows are partial, and no window is empty except past the segment's end.
TEST(SkinnyLayout, SegmentWindowsCoverEverySegmentElementOnce) {
  for (int e : {1, 2, 4, 8, 16}) {
    const int v = 16 / e;
    for (int p = 0; p < 16; p += e) {
      for (int n = 1; n <= 300; ++n) {
        const int nw = SegmentWindows(p, n, e);
        std::vector<int> seen(n, 0);
        int partial = 0;
        for (int k = 0; k < nw + 2; ++k) {  // two past the end: empty
          const SegmentWindow w = WindowOfSegment(k, p, n, e);
          if (k >= nw) {
            EXPECT_TRUE(w.empty()) << e << " " << p << " " << n << " " << k;
            continue;
          }
          ASSERT_FALSE(w.empty()) << e << " " << p << " " << n << " " << k;
          ASSERT_GE(w.lo, 0);
          ASSERT_LE(w.hi, v);
          if (!w.whole(e)) ++partial;
          for (int j = w.lo; j < w.hi; ++j) {
            const int el = w.first + j;
            ASSERT_GE(el, 0);
            ASSERT_LT(el, n);
            // Window k starts at segment - p + 16k (16-byte aligned when the segment is p past
            // a boundary): slot j is the element's own byte.
            EXPECT_EQ(-p + 16 * k + j * e, el * e);
            ++seen[el];
          }
          // Slots outside [lo, hi) are outside the segment.
          for (int j = 0; j < v; ++j)
            if (j < w.lo || j >= w.hi) EXPECT_TRUE(w.first + j < 0 || w.first + j >= n);
        }
        EXPECT_LE(partial, 2);
        if (p == 0 && n % v == 0) EXPECT_EQ(partial, 0);
        for (int x : seen) ASSERT_EQ(x, 1) << e << " " << p << " " << n;
      }
    }
  }
}

// Tall skinny tiles grow as the narrow side shrinks, wide ones double their length up to n = 4,
// keep it up to n = 16, and both shrink past it; the shared bytes stay within the n = 16 bound,
// so every family row that fits for n = 16 fits for every n, and a tile stays a whole number of
// 16-byte vectors.
TEST(SkinnyLayout, TileLengthKeepsTheTileBytes) {
  for (int len : {64, 128, 256, 512, 1024, 2048}) {
    for (int64_t n = 1; n <= kSkinnyMaxSide; ++n) {
      const int nmax = SkinnyMaxSide(n);
      EXPECT_GE(nmax, n);
      EXPECT_LT(nmax, 2 * n + 4) << n;  // the smallest instantiated kernel that fits
      EXPECT_EQ(SkinnyTileLength(len, n, true) * nmax, int64_t{len} * 16);
      EXPECT_LE(SkinnyTileLength(len, n, true) * n, int64_t{len} * 16);
      if (n <= 4) {
        EXPECT_EQ(SkinnyTileLength(len, n, false), 2 * len);  // the window count of n = 8
      } else if (n <= 16) {
        EXPECT_EQ(SkinnyTileLength(len, n, false), len);
      } else {
        EXPECT_EQ(SkinnyTileLength(len, n, false) * nmax, int64_t{len} * 16);
      }
    }
  }
  EXPECT_EQ(SkinnyMaxSide(4), 4);
  EXPECT_EQ(SkinnyMaxSide(5), 8);
  EXPECT_EQ(SkinnyMaxSide(9), 16);
  EXPECT_EQ(SkinnyMaxSide(17), 32);
  EXPECT_EQ(SkinnyMaxSide(33), 64);
  EXPECT_EQ(SkinnyMaxSide(65), 128);
  EXPECT_EQ(SkinnyMaxSide(129), 256);
  EXPECT_EQ(SkinnyMaxSide(kSkinnyMaxSide), kSkinnyMaxSide);
  // Every skinny row of the family: whole 16-byte vectors for every narrow side.
  for (const Policy& p : kFamily) {
    if (p.algorithm != Algorithm::kSkinny) continue;
    const int v = 16 / p.elem;
    for (int64_t n = 1; n <= kSkinnyMaxSide; ++n)
      for (bool tall : {false, true}) {
        const int64_t tl = SkinnyTileLength(p.skinny.len, n, tall);
        EXPECT_GE(tl, v) << p.Config().Name() << " n=" << n;
        EXPECT_EQ(tl % v, 0) << p.Config().Name() << " n=" << n;
      }
  }
}

}  // namespace
}  // namespace transposed::kernels
