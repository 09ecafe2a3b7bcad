// CPU checks of kernels/packed_realign.h: the column interleave, the packed layout's mapping and
// bank conflicts for every packed row of the family, the output windows' byte ranges, and the
// staged bytes per tile byte of the wider and taller tiles.
#include "kernels/packed_realign.h"

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

template <int E>
void CheckInterleave(std::mt19937& rng) {
  const PackedRealignGeometry g = PackedRealignGeometry::Make(E, 128, 8);
  uint32_t y[16], z[16];
  for (auto& v : y) v = rng();
  InterleaveColumns<E>(y, z);
  unsigned char row[64], packed[64];
  std::memcpy(row, y, sizeof(row));
  std::memcpy(packed, z, sizeof(packed));
  // z is half 0 of a tile row: word q, slot b holds column ColumnOf(q, b).
  for (int q = 0; q < 16; ++q)
    for (int b = 0; b < g.w(); ++b) {
      const int c = g.ColumnOf(q, b);
      ASSERT_LT(c * E, 64);
      ASSERT_EQ(std::memcmp(packed + 4 * q + E * b, row + E * c, E), 0) << "E=" << E << " q=" << q;
    }
}

TEST(PackedRealign, InterleavedWordsHoldColumnsOfEqualMisalignment) {
  std::mt19937 rng(12);
  for (int i = 0; i < 20; ++i) {
    CheckInterleave<1>(rng);
    CheckInterleave<2>(rng);
  }
  for (int e : {1, 2})
  for (int rb : {128, 256}) {
    const PackedRealignGeometry g = PackedRealignGeometry::Make(e, 128, 8, rb);
    std::vector<int> seen(g.tc(), 0);
    for (int q = 0; q < g.words(); ++q)
      for (int b = 0; b < g.w(); ++b) {
        const int c = g.ColumnOf(q, b);
        ASSERT_LT(c, g.tc());
        ++seen[c];
        // Columns of one word start their output rows at the same misalignment, for every
        // output leading dimension.
        for (int ld = 0; ld < 16; ++ld)
          ASSERT_EQ((c * ld * e) % 16, (g.ColumnOf(q, 0) * ld * e) % 16) << e << " " << q;
      }
    for (int x : seen) ASSERT_EQ(x, 1);
  }
}

// The layout's mapping, the thread mapping and the bank conflicts of one packed geometry.
void CheckLayoutAndBankConflicts(const PackedRealignGeometry& g, const std::string& name) {
  ASSERT_EQ(g.Invalid(), nullptr) << name;
  // The layout is a bijection of the tile's words (guard rows included) onto the bytes of the
  // packed region (after the staging area: offsets from sm_raw + stage_bytes()).
  const int packed = g.smem() - g.stage_bytes();
  ASSERT_EQ(packed, g.tr * g.rb + 2 * g.guard()) << name;
  std::vector<int> owner(packed, 0);
  for (int r = -g.v(); r < g.tr + g.v(); ++r)
    for (int q = 0; q < g.words(); ++q) {
      const int off = g.Offset(r, q) + g.guard();
      ASSERT_GE(off, 0) << name;
      ASSERT_LE(off + 4, packed) << name;
      ASSERT_EQ(off % 4, 0);
      ASSERT_EQ(owner[off]++, 0) << name << " r=" << r << " q=" << q;
    }
  // Staged windows stay below the packed tile and its upper guard rows.
  EXPECT_EQ(g.StageOffset(-g.v(), 0), 0) << name;
  EXPECT_LE(g.StageOffset(g.tr - 1, g.chunks()) + 16, g.stage_bytes()) << name;
  // Every staged window lies in its own 16 bytes.
  std::vector<int> stage_owner(g.stage_bytes() / 16, 0);
  for (int r = -g.v(); r < g.tr; ++r)
    for (int win = 0; win < g.stage_windows(); ++win) {
      ASSERT_EQ(g.StageOffset(r, win) % 16, 0) << name;
      ASSERT_EQ(stage_owner[g.StageOffset(r, win) / 16]++, 0) << name;
    }
  // The buffer: static shared memory up to 48 KiB, dynamic above (opted in at launch).
  EXPECT_EQ(g.dynamic_smem(), g.smem() > 48 * 1024) << name;
  EXPECT_LE(g.smem(), PackedRealignGeometry::kMaxSmem) << name;
  EXPECT_GE(g.smem(), g.tr * (g.rb + 4)) << name;  // the edge tiles' layout fits
  // Every (row, part) is loaded once (the v rows above the tile included) and every
  // (word, window) written once.
  std::vector<int> loads(g.parts() * g.stage_rows(), 0), writes(g.words() * g.lanes(), 0);
  for (int tid = 0; tid < g.nt; ++tid) {
    for (int k = 0; k < g.nl(); ++k) {
      const int u = tid + k * g.nt;
      if (u >= g.load_units()) continue;
      ASSERT_GE(g.LoadRow(u), -g.v()) << name;
      ASSERT_LT(g.LoadRow(u), g.tr) << name;
      ASSERT_LT(g.LoadHalf(u), g.parts()) << name;
      ++loads[g.parts() * (g.LoadRow(u) + g.v()) + g.LoadHalf(u)];
    }
    for (int k = 0; k < g.nw(); ++k) {
      const int u = tid + k * g.nt;
      ASSERT_LT(g.WriteLane(u), g.lanes()) << name;
      ASSERT_LT(g.WriteWord(u), g.words()) << name;
      ++writes[g.words() * g.WriteLane(u) + g.WriteWord(u)];
    }
  }
  for (int x : loads) ASSERT_EQ(x, 1) << name;
  for (int x : writes) ASSERT_EQ(x, 1) << name;
  // Load: each quarter warp's 16-byte stores hit at most 2 of the 8 threads on one chunk of
  // banks, mostly 1; the staged reads (row stride 144 or 272 bytes) are conflict-free.
  int sum = 0, n = 0;
  for (int k = 0; k < g.nl(); ++k)
    for (int chunk = 0; chunk < 5; ++chunk)
      for (int t0 = 0; t0 < g.nt; t0 += 8) {
        std::vector<int> packed(8, 0), staged(8, 0);
        for (int tid = t0; tid < t0 + 8; ++tid) {
          const int u = tid + k * g.nt;
          if (u >= g.load_units()) continue;
          const int r = g.LoadRow(u), h = g.LoadHalf(u);
          if (chunk < 4) ++packed[((g.Offset(r, 16 * h + 4 * chunk) + g.guard()) / 16) % 8];
          ++staged[(g.StageOffset(r, 4 * h + chunk) / 16) % 8];
        }
        const int deg = *std::max_element(packed.begin(), packed.end());
        if (chunk < 4) {
          ASSERT_LE(deg, 2) << name;
          sum += deg, ++n;
        }
        for (int x : staged) ASSERT_LE(x, 1) << name;
      }
  EXPECT_LE(sum, n + n / 4) << name;
  // Write: a warp's word reads hit 32 distinct banks for every output base misalignment and
  // leading dimension, every window and every row of the window.
  for (int base = 0; base < 16; base += g.e)
    for (int ld = 0; ld < 16; ++ld)
      for (int k = 0; k < g.nw(); ++k)
        for (int w0 = 0; w0 < g.nt; w0 += 32)
          for (int j = 0; j < g.v(); ++j) {
            std::vector<int> used(32, 0);
            for (int tid = w0; tid < w0 + 32; ++tid) {
              const int u = tid + k * g.nt;
              const int q = g.WriteWord(u), lane = g.WriteLane(u);
              const int p = (base + g.ColumnOf(q, 0) * ld * g.e) % 16;
              ++used[((g.Offset(lane * g.v() - p / g.e + j, q) + g.guard()) / 4) % 32];
            }
            for (int x : used) ASSERT_EQ(x, 1) << name << " base=" << base << " ld=" << ld;
          }
}

TEST(PackedRealign, LayoutMappingAndBankConflicts) {
  int policies = 0;
  for (const Policy& row : kFamily) {
    if (row.algorithm != Algorithm::kTile || row.tile.realign != 2) continue;
    ++policies;
    const std::string name = row.Config().Name() + " e=" + std::to_string(row.elem);
    ASSERT_EQ(row.tile.tile_cols * row.elem, row.tile.Packed().rb) << name;
    CheckLayoutAndBankConflicts(row.tile.Packed(), name);
  }
  EXPECT_GE(policies, 5);  // 1- and 2-byte elements, 128- and 256-byte rows, 256-row tiles
}

// Tiles of 4 windows per output row (64 rows of 1-byte elements, 32 of 2-byte): a warp gathers
// 8 words x 4 windows, and the swizzle steps by 2 chunks per window so that those reads still
// hit 32 distinct banks.
TEST(PackedRealign, FourWindowTilesGatherWithoutBankConflicts) {
  for (int e : {1, 2})
    for (int rb : {128, 256})
      for (int block_rows : {2, 4}) {
        const PackedRealignGeometry g =
            PackedRealignGeometry::Make(e, 4 * (16 / e), block_rows, rb);
        const std::string name = "e=" + std::to_string(e) + " tr=" + std::to_string(g.tr) +
                                 " rb=" + std::to_string(rb) + " rows" + std::to_string(block_rows);
        if (g.write_units() % g.nt != 0) continue;  // too many threads for one write step
        ASSERT_EQ(g.lanes(), 4) << name;
        EXPECT_EQ(g.warp_lanes(), 4) << name;
        EXPECT_EQ(g.warp_words(), 8) << name;
        CheckLayoutAndBankConflicts(g, name);
      }
  // Fewer than 4 windows per output row: no whole warp of windows.
  EXPECT_NE(PackedRealignGeometry::Make(1, 32, 4).Invalid(), nullptr);
  EXPECT_NE(PackedRealignGeometry::Make(2, 16, 4).Invalid(), nullptr);
}

// Wider rows and taller tiles read fewer staged bytes per byte of the tile: the 9 windows of a
// 128-byte row and the v rows above a 128-row tile cost 12.5% each (the 128x128 u8 tile was
// L2-bound, docs/lab/benchmark.md); 256 bytes or 256 rows halve that.
// The write phase of a packed tile of nr rows (whole or cut by the matrix edge) writes every
// byte of each output row's segment [0, nr * e) exactly once and nothing past it, for every
// misalignment p: its windows, then its tail window where the next tile down does not take the
// packed path; with `above` also the tile above's last p bytes [-p, 0), exactly once, which that
// tile then leaves out of its own tail.
TEST(PackedRealign, WindowsCoverTheSegmentOnce) {
  for (int e : {1, 2})
    for (int tr : {64, 128, 256})
      for (int p = 0; p < 16; p += e)
        for (int nr = 1; nr <= tr; ++nr)
          for (bool above : {false, true})
            for (bool next_writes_tail : {false, true}) {
              // Bytes -16 .. tr * e + 16 of the segment, offset by 16.
              std::vector<int> n(tr * e + 32, 0);
              const int v = 16 / e;
              for (int lane = 0; lane < tr / v; ++lane) {
                const WindowBytes w = PackedWindowBytes(lane, p, above, nr, e);
                ASSERT_GE(w.lo, 0);
                if (w.empty()) continue;
                ASSERT_LE(w.hi, 16);
                for (int b = w.lo; b < w.hi; ++b) ++n[16 + 16 * lane - p + b];
              }
              // The tail is ours unless the next tile down writes it; a next tile exists only
              // below a whole one.
              if (!(next_writes_tail && nr == tr)) {
                const int hi = PackedTailHi(p, tr, nr, e);
                for (int b = 0; b < hi; ++b) ++n[16 + tr * e - p + b];
              }
              const std::string at = "e=" + std::to_string(e) + " tr=" + std::to_string(tr) +
                                     " p=" + std::to_string(p) + " nr=" + std::to_string(nr);
              for (int byte = -16; byte < tr * e + 16; ++byte) {
                int want = byte >= 0 && byte < nr * e ? 1 : 0;
                if (above && byte < 0 && byte >= -p) want = 1;
                if (next_writes_tail && nr == tr && byte >= tr * e - p && byte < tr * e) want = 0;
                ASSERT_EQ(n[16 + byte], want) << at << " byte=" << byte << " above=" << above;
              }
              // The tile below, when it takes the path (above = true), writes these p bytes as
              // its window 0, whatever its own nr.
              const WindowBytes below = PackedWindowBytes(0, p, true, 1, e);
              ASSERT_EQ(below.lo, 0);
              ASSERT_GE(below.hi, p);
            }
}

TEST(PackedRealign, WiderAndTallerTilesStageFewerBytesPerTileByte) {
  const auto overhead = [](const PackedRealignGeometry& g) {
    return static_cast<double>(g.stage_bytes()) / (g.tr * g.rb) - 1.0;
  };
  for (int e : {1, 2}) {
    const PackedRealignGeometry base = PackedRealignGeometry::Make(e, 128, 8);
    const PackedRealignGeometry wide = PackedRealignGeometry::Make(e, 128, 8, 256);
    const PackedRealignGeometry tall = PackedRealignGeometry::Make(e, 256, 8);
    ASSERT_EQ(base.Invalid(), nullptr);
    ASSERT_EQ(wide.Invalid(), nullptr);
    ASSERT_EQ(tall.Invalid(), nullptr);
    EXPECT_EQ(wide.stage_windows(), 17);
    EXPECT_EQ(wide.tc(), 256 / e);
    EXPECT_EQ(tall.lanes(), 256 / base.v());
    // (1 + 1/8)(1 + v/128) - 1 for the base tile; one factor halves in each of the others.
    const double win = 16.0 / 128, above = static_cast<double>(base.v()) / 128;
    EXPECT_NEAR(overhead(base), (1 + win) * (1 + above) - 1, 1e-12) << e;
    EXPECT_NEAR(overhead(wide), (1 + win / 2) * (1 + above) - 1, 1e-12) << e;
    EXPECT_NEAR(overhead(tall), (1 + win) * (1 + above / 2) - 1, 1e-12) << e;
    EXPECT_LT(overhead(wide), overhead(base));
    EXPECT_LT(overhead(tall), overhead(base));
    // Over the static 48 KiB: these take dynamic shared memory; the 128-row, 128-byte tile not.
    EXPECT_FALSE(base.dynamic_smem());
    EXPECT_TRUE(wide.dynamic_smem());
    EXPECT_TRUE(tall.dynamic_smem());
  }
  // Rows of other widths, too few threads for one per word, or more than the opt-in limit.
  EXPECT_NE(PackedRealignGeometry::Make(1, 128, 8, 192).Invalid(), nullptr);
  EXPECT_NE(PackedRealignGeometry::Make(1, 128, 1, 256).Invalid(), nullptr);
  EXPECT_NE(PackedRealignGeometry::Make(1, 1024, 8, 256).Invalid(), nullptr);
}

}  // namespace
// Walking tiles (TransposeConfig::walk): every walking row's layout repeats every tile, so that
// the packed rows tr - v .. tr - 1 copied as one block of v * rb bytes land where the next tile's
// rows above -v .. -1 are (word by word, swizzle included); and the walk groups take every tile
// row of a tile column once, in order.
TEST(PackedRealign, WalkingTilesCarryTheRowsAboveAndTakeEveryTileRowOnce) {
  int walking = 0;
  for (const Policy& row : kFamily) {
    if (row.algorithm != Algorithm::kTile || row.tile.walk == 0) continue;
    ++walking;
    const PackedRealignGeometry g = row.tile.Packed();
    const std::string name = row.Config().Name() + " e=" + std::to_string(row.elem);
    ASSERT_EQ(row.tile.realign, 2) << name;
    ASSERT_TRUE(g.carry_repeats()) << name;
    ASSERT_EQ(g.carry_to() + g.carry_bytes(), 0) << name;
    ASSERT_EQ(g.carry_from() + g.carry_bytes(), g.tr * g.rb) << name;
    ASSERT_EQ(g.carry_bytes() % 16, 0) << name;
    for (int r = g.tr - g.v(); r < g.tr; ++r)
      for (int q = 0; q < g.words(); ++q)
        ASSERT_EQ(g.Offset(r - g.tr, q) - g.carry_to(), g.Offset(r, q) - g.carry_from())
            << name << " r=" << r << " q=" << q;
  }
  EXPECT_GE(walking, 2);
  // A layout whose swizzle does not repeat every tile (a tile of 3 window rows) cannot carry.
  PackedRealignGeometry odd = PackedRealignGeometry::Make(1, 48, 4);
  EXPECT_FALSE(odd.carry_repeats());
  TilePolicy bad{1, 128, 128, 4, 16, Swizzle(), 0, 1, 4};  // a walk without realign 2
  EXPECT_NE(bad.Invalid(), nullptr);
  bad = TilePolicy{1, 128, 128, 4, 16, Swizzle(), 2, 1, 1};  // a walk of one tile
  EXPECT_NE(bad.Invalid(), nullptr);
  bad = TilePolicy{1, 128, 128, 4, 16, Swizzle(), 2, 1, 4};
  EXPECT_EQ(bad.Invalid(), nullptr);

  for (int k : {2, 4, 8})
    for (int64_t ntr = 1; ntr <= 40; ++ntr) {
      std::vector<int> seen(ntr, 0);
      int64_t next = 0;
      const int64_t groups = PackedWalkGroups(ntr, k);
      for (int64_t gi = 0; gi < groups; ++gi) {
        const PackedWalk w = PackedWalkGroup(gi, k, ntr);
        ASSERT_EQ(w.first, next) << k << " " << ntr;
        ASSERT_GE(w.count, 1);
        ASSERT_LE(w.count, k);
        for (int64_t t = w.first; t < w.first + w.count; ++t) ++seen[t];
        next = w.first + w.count;
      }
      ASSERT_EQ(next, ntr);
      for (int x : seen) ASSERT_EQ(x, 1);
      EXPECT_EQ(PackedWalkGroup(groups, k, ntr).count, 0);
    }
}

}  // namespace transposed::kernels
