// CPU checks of kernels/register_transpose.h: CUDA's byte permute and funnel shift as the host
// computes them, the 4x4 byte and 2x2 half transposes, the packed write-unit transpose, and the
// realignment of 16-byte windows at every offset.
#include "kernels/register_transpose.h"

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

}  // namespace
}  // namespace transposed::kernels
