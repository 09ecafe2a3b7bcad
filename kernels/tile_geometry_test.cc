#include "kernels/tile_geometry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <random>
#include <vector>

#include "kernels/policy.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels {
namespace {

TEST(BytePerm, MatchesCudaSemantics) {
  const uint32_t x = 0x33221100, y = 0x77665544;
  EXPECT_EQ(BytePerm(x, y, 0x3210), x);
  EXPECT_EQ(BytePerm(x, y, 0x7654), y);
  EXPECT_EQ(BytePerm(x, y, 0x5140), 0x55114400u);
  EXPECT_EQ(BytePerm(x, y, 0x0123), 0x00112233u);
}

TEST(RegisterTransposes, Bytes4x4AndHalves2x2) {
  std::mt19937 rng(42);
  for (int iter = 0; iter < 1000; ++iter) {
    uint32_t w[4], t[4];
    for (auto& x : w) x = rng();
    Transpose4x4Bytes(w, t);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ((t[c] >> (8 * r)) & 0xff, (w[r] >> (8 * c)) & 0xff) << r << "," << c;
    uint32_t h[2], u[2];
    h[0] = rng();
    h[1] = rng();
    Transpose2x2Halves(h, u);
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c)
        ASSERT_EQ((u[c] >> (16 * r)) & 0xffff, (h[r] >> (16 * c)) & 0xffff);
  }
}

// The packed write-unit transpose: output row k, element m == input row m, element k.
template <int E, int V>
void CheckPackedWords(std::mt19937& rng) {
  constexpr int W = 4 / E, UW = V * E / 4;
  uint32_t wv[V];
  for (auto& w : wv) w = rng();
  uint32_t o[W][UW];
  TransposePackedWords<E, V, W, UW>(wv, o);
  const int bits = 8 * E;
  const uint32_t mask = E == 1 ? 0xffu : 0xffffu;
  for (int k = 0; k < W; ++k)      // output row = input column within the word
    for (int m = 0; m < V; ++m) {  // output element = input row
      const uint32_t in = (wv[m] >> (bits * k)) & mask;
      const uint32_t out = (o[k][m * E / 4] >> (bits * (m % (4 / E)))) & mask;
      ASSERT_EQ(out, in) << "E=" << E << " V=" << V << " k=" << k << " m=" << m;
    }
}

TEST(TransposePackedWords, MatchesTheDefinition) {
  std::mt19937 rng(7);
  for (int i = 0; i < 100; ++i) {
    CheckPackedWords<1, 4>(rng);
    CheckPackedWords<1, 16>(rng);
    CheckPackedWords<2, 2>(rng);
    CheckPackedWords<2, 8>(rng);
  }
}

TEST(WordSelect, AndFunnelShift) {
  const uint32_t a[4] = {0x03020100u, 0x07060504u, 0x0b0a0908u, 0x0f0e0d0cu};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(WordAt(a, i), a[i]);
  EXPECT_EQ(FunnelBytes(a[0], a[1], 0), a[0]);
  EXPECT_EQ(FunnelBytes(a[0], a[1], 1), 0x04030201u);
  EXPECT_EQ(FunnelBytes(a[0], a[1], 3), 0x06050403u);
}

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

// Shifted rows: the windows of a tile row at every misalignment o, stored by PlaceWindow into a
// shared row at every 16-byte phase, leave exactly the row's bytes in [0, tcb) and touch
// nothing outside (shared rows are 4-byte aligned).
TEST(ShiftedRows, PlaceWindowStoresEachRowByteOnce) {
  for (int e : {1, 2, 4, 8}) {
    for (int tcb : {64, 128, 256}) {
      for (int o = 0; o < 16; o += e) {
        // The global bytes: the row starts o bytes past an aligned window boundary.
        std::vector<unsigned char> src(tcb + 32);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
        for (int base = 0; base < 16; base += 4) {
          alignas(16) unsigned char buf[512 + 64];
          std::memset(buf, 0xEE, sizeof(buf));
          unsigned char* row = buf + 16 + base;
          const int nk = tcb / 16 + (o != 0 ? 1 : 0);
          for (int k = 0; k < nk; ++k) {
            uint32_t w[4];
            std::memcpy(w, src.data() + 16 * k, 16);
            PlaceWindow(row, tcb, 16 * k - o, w, k == 0, k == tcb / 16);
          }
          for (int i = -16 - base; i < tcb + 32; ++i) {
            const unsigned char want = (i >= 0 && i < tcb) ? src[o + i] : 0xEE;
            ASSERT_EQ(row[i], want) << "e=" << e << " tcb=" << tcb << " o=" << o
                                    << " base=" << base << " byte " << i;
          }
        }
      }
    }
  }
}

TEST(ShiftedRows, GatherWindowPacksElementsOfAColumn) {
  std::vector<unsigned char> col(16 * 40);
  for (size_t i = 0; i < col.size(); ++i) col[i] = static_cast<unsigned char>(i * 13 + 1);
  auto check = [&](auto tag) {
    constexpr int E = decltype(tag)::value;
    const int stride = 40;
    uint32_t w[4];
    GatherWindow<E>(col.data(), stride, w);
    unsigned char got[16];
    std::memcpy(got, w, 16);
    for (int j = 0; j < 16 / E; ++j)
      for (int b = 0; b < E; ++b) ASSERT_EQ(got[j * E + b], col[j * stride + b]) << "E=" << E;
  };
  check(std::integral_constant<int, 4>());
  check(std::integral_constant<int, 8>());
}

// The shifted write mapping of every shifted tile of the table covers each (output row, window)
// once, and a warp's element reads (step k, element j) hit each shared bank at most twice on
// average over every misalignment pattern of the output rows (4-byte elements: never twice).
TEST(ShiftedRows, WriteMappingCoversEveryWindowOnceWithFewBankConflicts) {
  int policies = 0;
  for (const Policy& row : kFamily) {
    if (row.algorithm != Algorithm::kTile || !row.tile.realign || row.tile.swizzled()) continue;
    ++policies;
    const TileGeometry g = row.tile.Geometry();
    const std::string name = row.Config().Name() + " e=" + std::to_string(row.elem);
    ASSERT_EQ(g.w, 1) << name;
    ASSERT_GT(g.cw, 0) << name;
    std::vector<int> seen(g.tc * g.g, 0);
    for (int tid = 0; tid < g.nt; ++tid)
      for (int k = 0; k < g.shift_steps(); ++k) {
        const int c = g.ShiftCol(tid, k), ov = g.ShiftLane(tid, k);
        ASSERT_LT(c, g.tc) << name;
        ASSERT_LT(ov, g.g) << name;
        ++seen[c * g.g + ov];
      }
    for (int x : seen) ASSERT_EQ(x, 1) << name;
    // Bank conflicts of the first warp's gathers, for every output leading dimension class.
    int sum = 0, n = 0, worst = 0;
    for (int ldo = 0; ldo < 16; ++ldo)
      for (int b = 0; b < 16; b += g.e)
        for (int k = 0; k < g.shift_steps(); ++k)
          for (int j = 0; j < g.v; ++j) {
            std::vector<std::vector<int>> words(32);
            for (int lane = 0; lane < 32; ++lane) {
              const int c = g.ShiftCol(lane, k), ov = g.ShiftLane(lane, k);
              const int p = (b + c * ldo * g.e) % 16;
              const int word = (g.Offset(ov * g.v - p / g.e + j + g.v, c * g.e)) / 4;
              std::vector<int>& w = words[word % 32];
              if (std::find(w.begin(), w.end(), word) == w.end()) w.push_back(word);
            }
            int deg = 0;
            for (const auto& w : words) deg = std::max(deg, static_cast<int>(w.size()));
            sum += deg, ++n, worst = std::max(worst, deg);
          }
    EXPECT_LE(sum, 2 * n) << name;
    if (g.e == 4) EXPECT_EQ(worst, 1) << name << " (pad 2: conflict-free)";
  }
  EXPECT_GE(policies, 2);  // 4- and 8-byte elements (1 and 2 bytes: the packed tiles)
  // The 1- and 2-byte shifted tiles the packed ones replaced are no longer consistent.
  EXPECT_NE(TileGeometry::Make(1, 256, 64, 16, 16, 4, 0, 1).RealignInvalid(), nullptr);
  EXPECT_NE(TileGeometry::Make(2, 256, 64, 8, 16, 2, 0, 1).RealignInvalid(), nullptr);
  EXPECT_EQ(TileGeometry::Make(4, 64, 32, 8, 16, 2, 0, 1).RealignInvalid(), nullptr);
}

// ShiftWords<N> realigns 4N bytes from the N + 4 words around them, for every offset.
template <int N>
void CheckShiftWords(unsigned seed) {
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 50; ++iter) {
    uint32_t x[N + 4];
    for (auto& v : x) v = rng();
    unsigned char bytes[4 * (N + 4)];
    std::memcpy(bytes, x, sizeof(bytes));
    for (int o = 0; o < 16; ++o) {
      uint32_t y[N];
      ShiftWords<N>(x, o, y);
      unsigned char got[4 * N];
      std::memcpy(got, y, sizeof(got));
      for (int i = 0; i < 4 * N; ++i) ASSERT_EQ(got[i], bytes[o + i]) << "o=" << o << " i=" << i;
    }
  }
}

// 64 bytes from five windows (the packed tiles' load unit, ShiftWindows).
TEST(PackedRealign, ShiftWindowsRealignsEveryOffset) {
  CheckShiftWords<16>(11);
  std::mt19937 rng(12);
  uint32_t x[20], y[16], z[16];
  for (auto& v : x) v = rng();
  for (int o = 0; o < 16; ++o) {
    ShiftWindows(x, o, y);
    ShiftWords<16>(x, o, z);
    ASSERT_EQ(std::memcmp(y, z, sizeof(y)), 0) << o;
  }
}

// One 16-byte vector from the two aligned windows around it (the skinny wide loads).
TEST(PackedRealign, ShiftWordsRealignsOneVector) { CheckShiftWords<4>(13); }

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

TEST(PackedRealign, LayoutMappingAndBankConflicts) {
  int policies = 0;
  for (const Policy& row : kFamily) {
    if (row.algorithm != Algorithm::kTile || row.tile.realign != 2) continue;
    ++policies;
    const PackedRealignGeometry g = row.tile.Packed();
    const std::string name = row.Config().Name() + " e=" + std::to_string(row.elem);
    ASSERT_EQ(g.Invalid(), nullptr) << name;
    // The layout is a bijection of the tile's words (guard rows included) onto the bytes of the
    // packed region (after the staging area: offsets from sm_raw + stage_bytes()).
    const int packed = g.smem() - g.stage_bytes();
    ASSERT_EQ(row.tile.tile_cols * row.elem, g.rb) << name;
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
  EXPECT_GE(policies, 5);  // 1- and 2-byte elements, 128- and 256-byte rows, 256-row tiles
}

// Wider rows and taller tiles read fewer staged bytes per byte of the tile: the 9 windows of a
// 128-byte row and the v rows above a 128-row tile cost 12.5% each (the 128x128 u8 tile was
// L2-bound, docs/benchmark.md); 256 bytes or 256 rows halve that.
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

// The table is the family: FamilyConfigs lists exactly kFamily's rows per element size, in order.
TEST(PolicyTable, IsTheFamily) {
  size_t i = 0;
  for (int e : {1, 2, 4, 8, 16}) {
    for (const TransposeConfig& c : FamilyConfigs(e)) {
      while (i < kFamilySize && kFamily[i].elem != e) ++i;
      ASSERT_LT(i, kFamilySize);
      EXPECT_EQ(kFamily[i].Config(), c) << c.Name();
      ++i;
    }
  }
  size_t total = 0;
  for (int e : {1, 2, 4, 8, 16}) total += FamilyConfigs(e).size();
  EXPECT_EQ(total, kFamilySize);
  EXPECT_EQ(FirstInvalidRow(), nullptr);
  // Rows print as the variant names the store and the docs use.
  EXPECT_EQ(Async(4, 64, 64, 4, 2).Config().Name(), "tile64x64.rows4.vec16.swz.async2");
  EXPECT_EQ(Realign(4, 128, 32, 8, Pad(1)).Config().Name(), "tile128x32.rows8.vec16.realign.pad1");
  EXPECT_EQ(Skinny(4, 512, 8).Config().Name(), "skinny.l512.rows8");
  EXPECT_EQ(CublasGeam(8).Config().Name(), "cublas.geam");
  EXPECT_EQ(CutensorPermute(4).Config().Name(), "cutensor.permute");
  EXPECT_NE(CutensorPermute(2).Invalid(), nullptr);  // f32 and f64 only
  // A policy that breaks its geometry is caught by the table's compile-time check.
  EXPECT_NE(Tile(1, 128, 128, 8, 16, Pad(1)).Invalid(), nullptr);  // word gathers need 4-byte rows
}

}  // namespace
}  // namespace transposed::kernels
