#include "kernels/tile_math.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

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

TEST(Realign16, PicksBytesOfTwoWindows) {
  uint32_t a[4], b[4];
  uint8_t bytes[32];
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(7 * i + 3);
  std::memcpy(a, bytes, 16);
  std::memcpy(b, bytes + 16, 16);
  for (int o = 0; o < 16; ++o) {
    uint32_t out[4];
    uint8_t got[16];
    Realign16<1>(a, b, o, out);
    std::memcpy(got, out, 16);
    for (int i = 0; i < 16; ++i) ASSERT_EQ(got[i], bytes[o + i]) << "o=" << o << " i=" << i;
    if (o % 2 == 0) {
      Realign16<2>(a, b, o, out);
      std::memcpy(got, out, 16);
      for (int i = 0; i < 16; ++i) ASSERT_EQ(got[i], bytes[o + i]) << "e2 o=" << o;
    }
    if (o % 4 == 0) {
      Realign16<4>(a, b, o, out);
      std::memcpy(got, out, 16);
      for (int i = 0; i < 16; ++i) ASSERT_EQ(got[i], bytes[o + i]) << "e4 o=" << o;
    }
    if (o % 8 == 0) {
      Realign16<8>(a, b, o, out);
      std::memcpy(got, out, 16);
      for (int i = 0; i < 16; ++i) ASSERT_EQ(got[i], bytes[o + i]) << "e8 o=" << o;
    }
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(WordAt(a, i), a[i]);
}

// The shared layout of every tile in the family is a bijection into the buffer that keeps every
// element, shared read and shared store aligned, and the swizzled gather of a warp hits each
// bank at most the minimum number of times where the geometry allows it.
TEST(TileGeometry, LayoutsAreAlignedBijections) {
  for (int e : {1, 2, 4, 8, 16}) {
    for (const TransposeConfig& c : FamilyConfigs(e)) {
      if (c.algorithm != Algorithm::kTile) continue;
      const TileGeometry g = TileGeometry::Make(e, c.tile_rows, c.tile_cols, c.block_rows,
                                                c.vec_bytes, c.pad, c.swizzle);
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

}  // namespace
}  // namespace transposed::kernels
