// CPU checks of kernels/tile_walk.h: the walk order, the global offsets of core/problem.h's
// layout, and the persistent grid's cursor visiting every tile once.
#include "kernels/tile_walk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace transposed::kernels {
namespace {

// The tile walk goes down first where there are more tile columns than rows, or where the input
// neighbours stay within kDownFirstBytes of traffic; across first otherwise.
TEST(TileWalk, DownFirstWhereNeighboursStayClose) {
  const int64_t f32_tile = 128 * 32 * 4;                       // 16 KiB
  EXPECT_TRUE(TilesDownFirst(40, 3293, f32_tile));              // wide: 5005x105371 f32
  EXPECT_TRUE(TilesDownFirst(213, 98, f32_tile));               // tall, 7 MB apart
  EXPECT_FALSE(TilesDownFirst(493, 59, 2 * f32_tile));          // tall f64, 32 MB apart
  EXPECT_EQ(TilesDownFirst(512, 511, f32_tile), 2 * 512 * f32_tile <= kDownFirstBytes);
}

TEST(GlobalOffsets, MatchTheProblemLayout) {
  // 3 matrices of 5 x 7 with ld_in 9 and ld_out 6, 4-byte elements.
  const int64_t rows = 5, cols = 7, ldi = 9, ldo = 6;
  for (int64_t z = 0; z < 3; ++z)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        EXPECT_EQ(InputOffset(z, r, c, rows, ldi, 4), 4 * (z * rows * ldi + r * ldi + c));
        EXPECT_EQ(OutputOffset(z, r, c, cols, ldo, 4), 4 * (z * cols * ldo + c * ldo + r));
      }
}

// The persistent grid's tile walk: blocks 0..grid-1 together visit every tile exactly once, in
// order within a block, for grids smaller and larger than a batch entry.
TEST(TileCursor, PersistentWalkVisitsEveryTileOnce) {
  for (int64_t ntr : {1, 3, 7}) {
    for (int64_t ntc : {1, 2, 5, 16}) {
      for (int64_t batch : {1, 4}) {
        const int64_t tiles = ntr * ntc * batch;
        for (int64_t grid : {int64_t{1}, int64_t{3}, ntc, ntc + 1, 2 * ntc * ntr + 1, tiles}) {
          if (grid > tiles) continue;
          std::vector<int> seen(tiles, 0);
          const int64_t dty = grid / ntc, dtx = grid - dty * ntc;
          for (int64_t b = 0; b < grid; ++b) {
            int64_t expect = b;
            for (TileCursor c = TileCursor::Start(b, ntr, ntc); c.z < batch;
                 c.Advance(dty, dtx, ntr, ntc), expect += grid) {
              const int64_t t = (c.z * ntr + c.ty) * ntc + c.tx;
              ASSERT_EQ(t, expect) << ntr << "x" << ntc << " grid " << grid;
              ASSERT_LT(c.ty, ntr);
              ASSERT_LT(c.tx, ntc);
              ++seen[t];
            }
          }
          for (int x : seen) ASSERT_EQ(x, 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace transposed::kernels
