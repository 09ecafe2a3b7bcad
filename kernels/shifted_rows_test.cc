// CPU checks of kernels/shifted_rows.h: PlaceWindow stores each row byte once at every
// misalignment, GatherWindow packs a column, and the shifted write mapping of every shifted row
// of the family covers each window once with few bank conflicts.
#include "kernels/shifted_rows.h"

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

}  // namespace
}  // namespace transposed::kernels
