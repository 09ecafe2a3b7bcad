// CPU checks of kernels/tile_geometry.h for every tile row of the family: aligned bijective
// shared layouts, a bank-conflict-free swizzled gather, and thread mappings that touch every unit
// of a tile once.
#include "kernels/tile_geometry.h"

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

// The shared layout of every tile in the family is a bijection into the buffer that keeps every
// element, shared read and shared store aligned, and the swizzled gather of a warp hits each
// bank at most the minimum number of times where the geometry allows it.
TEST(TileGeometry, LayoutsAreAlignedBijections) {
  for (int e : {1, 2, 4, 8, 16}) {
    for (const TransposeConfig& c : FamilyConfigs(e)) {
      if (c.algorithm != Algorithm::kTile) continue;
      const TileGeometry g = TileGeometry::Make(e, c.tile_rows, c.tile_cols, c.block_rows,
                                                c.vec_bytes, c.pad, c.swizzle,
                                                c.realign && !c.swizzle);
      ASSERT_EQ(g.Invalid(), nullptr) << c.Name();
      std::vector<int> owner(g.smem, -1);
      for (int row = 0; row < g.tr; ++row) {
        for (int byte = 0; byte < g.tcb; ++byte) {
          const int off = g.Offset(row, byte);
          ASSERT_GE(off, 0);
          ASSERT_LT(off, g.smem) << c.Name();
          ASSERT_EQ(owner[off], -1) << c.Name() << " collides at row " << row;
          owner[off] = row * g.tcb + byte;
          if (byte % g.su == 0) {
            ASSERT_EQ(off % g.su, 0) << c.Name();
          }
          if (byte % g.r == 0) {
            ASSERT_EQ(off % g.r, 0) << c.Name();
          }
          if (byte % e == 0) {
            ASSERT_EQ(off % e, 0) << c.Name();
          }
          // Bytes of one unit stay contiguous.
          if (byte % g.u != 0) {
            ASSERT_EQ(off, g.Offset(row, byte - 1) + 1) << c.Name();
          }
        }
      }
      // Both phases cover the tile exactly once.
      EXPECT_EQ(g.load_units * g.u, g.tr * g.tcb) << c.Name();
      EXPECT_EQ(g.write_units * g.w * g.u, g.tr * g.tcb) << c.Name();
    }
  }
}

TEST(TileGeometry, SwizzledGatherIsBankConflictFree) {
  // tile32x32 f32 vec16 swizzled: lanes 0..31 of the first warp read word (ov*4 + j, owg) for
  // fixed j; all 32 banks distinct.
  const TileGeometry g = TileGeometry::Make(4, 32, 32, 8, 16, 0, 1);
  for (int j = 0; j < g.v; ++j) {
    std::vector<int> banks(32, 0);
    for (int lane = 0; lane < 32; ++lane) {
      const int ov = lane % g.g, owg = lane / g.g;
      banks[(g.Offset(ov * g.v + j, owg * 4) / 4) % 32]++;
    }
    for (int b = 0; b < 32; ++b) EXPECT_EQ(banks[b], 1) << "bank " << b;
  }
  // 1-byte tile128x128 vec16 swizzled: word reads, also conflict-free.
  const TileGeometry b = TileGeometry::Make(1, 128, 128, 8, 16, 0, 1);
  std::vector<int> banks(32, 0);
  for (int lane = 0; lane < 32; ++lane) {
    const int ov = lane % b.g, owg = lane / b.g;
    banks[(b.Offset(ov * b.v, owg * 4) / 4) % 32]++;
  }
  for (int x : banks) EXPECT_EQ(x, 1);
}

// The thread-to-unit mapping of both tile phases (the one the agents use) touches every unit of
// the tile exactly once, for every tile policy of the table.
TEST(TileGeometry, ThreadMappingCoversEveryUnitOnce) {
  int policies = 0;
  for (const Policy& row : kFamily) {
    if (row.algorithm != Algorithm::kTile) continue;
    ++policies;
    const TileGeometry g = row.tile.Geometry();
    const std::string name = row.Config().Name() + " e=" + std::to_string(row.elem);
    ASSERT_EQ(g.nt % g.nu, 0) << name;
    std::vector<int> loads(g.load_units, 0), writes(g.write_units, 0);
    for (int tid = 0; tid < g.nt; ++tid) {
      for (int k = 0; k < g.nl(); ++k) {
        if (!g.LoadActive(tid, k)) continue;
        const int row_i = g.LoadRow(tid, k), col = g.LoadCol(tid);
        ASSERT_LT(row_i, g.tr) << name;
        ASSERT_LT(col, g.nu) << name;
        ++loads[row_i * g.nu + col];
      }
      for (int k = 0; k < g.nw(); ++k) {
        if (!g.WriteActive(tid, k)) continue;
        const int lane = g.WriteLane(tid), group = g.WriteGroup(tid, k);
        ASSERT_LT(lane, g.g) << name;
        ASSERT_LT(group, g.tc / g.w) << name;
        ++writes[group * g.g + lane];
      }
    }
    for (int x : loads) ASSERT_EQ(x, 1) << name;
    for (int x : writes) ASSERT_EQ(x, 1) << name;
  }
  EXPECT_GT(policies, 50);
}

}  // namespace
}  // namespace transposed::kernels
