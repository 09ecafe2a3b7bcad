#include "transposed/kernels/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kernels/packed_realign.h"
#include "kernels/skinny_math.h"
#include "kernels/tile_geometry.h"
#include "testing/problems.h"

namespace transposed::kernels {
namespace {

constexpr auto P = [](auto... args) { return MakeTestProblemOfSize(args...); };

const int kSizes[] = {1, 2, 4, 8, 16};

TEST(TransposeConfig, EveryFamilyMemberRoundTripsThroughNameAndParams) {
  for (int e : kSizes) {
    const auto& fam = FamilyConfigs(e);
    ASSERT_FALSE(fam.empty()) << e;
    std::set<std::string> names;
    for (const TransposeConfig& c : fam) {
      const std::string name = c.Name();
      EXPECT_TRUE(names.insert(name).second) << "duplicate " << name << " for size " << e;
      auto by_name = TransposeConfig::FromName(name);
      ASSERT_TRUE(by_name.ok()) << name << ": " << by_name.status().ToString();
      EXPECT_EQ(*by_name, c) << name;
      EXPECT_EQ(by_name->Name(), name);
      auto by_params = TransposeConfig::FromParams(c.Params());
      ASSERT_TRUE(by_params.ok()) << name << ": " << by_params.status().ToString();
      EXPECT_EQ(*by_params, c) << name;
      EXPECT_EQ(c.Params().size(), 10u);
      EXPECT_EQ(name.find("fast"), std::string::npos);
    }
  }
}

TEST(TransposeConfig, NamesAreDerivedFromParameters) {
  EXPECT_EQ(NaiveConfig().Name(), "naive");
  EXPECT_EQ(TextbookTileConfig().Name(), "tile32x32.rows8.pad0");
  EXPECT_EQ(TextbookPaddedTileConfig().Name(), "tile32x32.rows8.pad1");
  TransposeConfig c;
  c.tile_rows = 64;
  c.tile_cols = 128;
  c.block_rows = 4;
  c.vec_bytes = 16;
  c.swizzle = 1;
  EXPECT_EQ(c.Name(), "tile64x128.rows4.vec16.swz");
  EXPECT_EQ(c.threads(), 128);
  auto plain = TransposeConfig::FromName("tile64x128.rows4.vec16.swz");  // a row (2, 4 bytes)
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, c);
  c.realign = 1;
  EXPECT_EQ(c.Name(), "tile64x128.rows4.vec16.realign.swz");
  // Printable, but no row prints it: not a name of the family.
  EXPECT_FALSE(TransposeConfig::FromName(c.Name()).ok());
  c.realign = 2;
  EXPECT_EQ(c.Name(), "tile64x128.rows4.vec16.realign2.swz");
  c.realign = 0;
  c.async = 2;
  EXPECT_EQ(c.Name(), "tile64x128.rows4.vec16.swz.async2");
  // The rows of each kind resolve to their fields.
  auto shifted = TransposeConfig::FromName("tile64x32.rows8.vec16.realign.pad2");
  ASSERT_TRUE(shifted.ok());
  EXPECT_EQ(shifted->realign, 1);
  EXPECT_EQ(shifted->pad, 2);
  EXPECT_EQ(shifted->Params().at("realign"), 1);
  auto packed = TransposeConfig::FromName("tile128x128.rows8.vec16.realign2.swz");
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed->realign, 2);
  EXPECT_EQ(packed->swizzle, 1);
  auto as = TransposeConfig::FromName("tile128x128.rows4.vec16.swz.async2");
  ASSERT_TRUE(as.ok());
  EXPECT_EQ(as->async, 2);
  EXPECT_EQ(as->Params().at("async"), 2);
  auto s = TransposeConfig::FromName("skinny.l512.rows8");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->algorithm, Algorithm::kSkinny);
  EXPECT_EQ(s->tile_rows, 512);
  EXPECT_EQ(s->Params().at("algorithm"), 2);
}

TEST(TransposeConfig, RejectsMalformedNamesAndParams) {
  for (const char* bad : {"",
                          "fast",
                          "tile",
                          "tile32",
                          "tile32x",
                          "tilex32.rows8.pad1",
                          "tile32x32",
                          "tile32x32.rows8",
                          "tile32x32.rows8.pad",
                          "tile32x32.rows8.pad1.swz",
                          "tile32x32.rows8.vec16.pad1.x",
                          "tile32x32.rows8.vec3.pad0",
                          "tile32x32.rows0.pad0",
                          "tile032x32.rows8.pad0",
                          "tile32x32.rows8.swz.pad0",
                          "skinny",
                          "skinny.l500.rows8",
                          "skinny.l512",
                          "naive.x",
                          "tile-1x32.rows8.pad0",
                          "tile99999999999x32.rows8.pad0",
                          "tile32x32.rows8.vec0.pad0",
                          "tile32x32.rows8.realign.pad0",
                          "tile32x32.rows8.vec8.realign.pad0",
                          "tile32x32.rows8.vec16.swz.realign",
                          "tile32x32.rows8.vec16.swz.async1",
                          "tile32x32.rows8.vec16.swz.async4",
                          "tile32x32.rows8.vec16.swz.async0",
                          "tile32x32.rows8.vec16.pad1.async2",
                          "tile32x32.rows8.pad1.async2",
                          "tile32x32.rows8.vec16.realign.swz.async2",
                          "tile32x32.rows8.vec16.async2.swz"}) {
    EXPECT_FALSE(TransposeConfig::FromName(bad).ok()) << bad;
  }
  EXPECT_FALSE(TransposeConfig::FromParams({}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 7}}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 1}, {"bogus", 1}}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 1}, {"vec_bytes", 12}}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 1}, {"pad", 1}, {"swizzle", 1}}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 0}, {"tile_rows", 4}}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 1}, {"tile_rows", -1}}).ok());
  // Parameters no row has, or that several rows share, name no member.
  auto copy = TransposeConfig::FromParams({{"algorithm", 5}, {"block_rows", 8}});
  ASSERT_FALSE(copy.ok());
  EXPECT_NE(copy.status().ToString().find("no member of the family has the parameters"),
            std::string::npos)
      << copy.status().ToString();
  auto skinny = TransposeConfig::FromParams({{"algorithm", 2}, {"tile_rows", 512},
                                             {"vec_bytes", 16}, {"block_rows", 0}});
  ASSERT_FALSE(skinny.ok());
  auto tile = TransposeConfig::FromParams({{"algorithm", 1}});
  ASSERT_FALSE(tile.ok());
  EXPECT_NE(tile.status().ToString().find("several members"), std::string::npos)
      << tile.status().ToString();
  ASSERT_TRUE(TransposeConfig::FromParams({{"algorithm", 5}}).ok());
  auto naive = TransposeConfig::FromParams({{"algorithm", 0}});
  ASSERT_TRUE(naive.ok());
  EXPECT_EQ(*naive, NaiveConfig());
}

TEST(EnumerateConfigs, ValidAndNonEmptyForEveryShapeAndElementSize) {
  struct Shape {
    int64_t rows, cols, batch, ld_in, ld_out;
  };
  const Shape shapes[] = {{1, 1, 1, 0, 0},         {1, 1000, 1, 0, 0},      {1000, 1, 1, 0, 0},
                          {31, 33, 1, 0, 0},       {4097, 3001, 1, 0, 0},   {512, 384, 256, 0, 0},
                          {300, 200, 1, 264, 320}, {300, 200, 3, 203, 301}, {1 << 20, 8, 1, 0, 0},
                          {8, 1 << 20, 1, 0, 0},   {8192, 8192, 1, 0, 0}};
  for (int e : kSizes) {
    for (const Shape& s : shapes) {
      const Problem p = P(s.rows, s.cols, e, s.batch, s.ld_in, s.ld_out);
      ASSERT_TRUE(ValidateProblem(p).ok());
      const auto configs = EnumerateConfigs(p);
      ASSERT_FALSE(configs.empty()) << p.ToString();
      EXPECT_EQ(configs, EnumerateConfigs(p)) << "not deterministic";
      bool has_naive = false;
      for (const TransposeConfig& c : configs) {
        EXPECT_TRUE(CheckConfig(c, p).ok()) << c.Name() << " " << p.ToString();
        has_naive |= c == NaiveConfig();
        if (c.algorithm == Algorithm::kTile && c.vec_bytes > e && !c.realign) {
          EXPECT_EQ(p.in_ld() * e % c.vec_bytes, 0) << c.Name() << " " << p.ToString();
          EXPECT_EQ(p.out_ld() * e % c.vec_bytes, 0) << c.Name() << " " << p.ToString();
        }
        if (c.algorithm == Algorithm::kSkinny) {
          EXPECT_TRUE(std::min(p.rows, p.cols) <= kSkinnyMaxSide) << p.ToString();
          EXPECT_LE(SkinnySharedBytes(c, p), 48 * 1024);
        }
      }
      EXPECT_TRUE(has_naive);
      // Every family member that was left out says why.
      for (const TransposeConfig& c : FamilyConfigs(e)) {
        if (std::find(configs.begin(), configs.end(), c) == configs.end()) {
          Status st = CheckConfig(c, p);
          EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.Name();
          EXPECT_NE(st.message().find(c.Name()), std::string::npos) << st.message();
        }
      }
    }
  }
}

TEST(EnumerateConfigs, OffersVectorAndSkinnyPathsWhereTheyApply) {
  for (int e : {1, 2, 4, 8}) {
    const auto dense = EnumerateConfigs(P(8192, 8192, e));
    EXPECT_TRUE(std::any_of(dense.begin(), dense.end(), [&](const TransposeConfig& c) {
      return c.vec_bytes == 16;
    })) << e;
    // Realigning tiles only where a row is misaligned.
    EXPECT_TRUE(std::none_of(dense.begin(), dense.end(),
                             [](const TransposeConfig& c) { return c.realign != 0; }))
        << e;
    // Odd leading dimensions rule out vector accesses except the realigning ones, which every
    // element size below 16 bytes has.
    const auto odd = EnumerateConfigs(P(4097, 3001, e));
    for (const TransposeConfig& c : odd)
      EXPECT_TRUE(c.vec_bytes == 0 || c.realign || c.algorithm == Algorithm::kSkinny) << c.Name();
    // 1- and 2-byte elements: the packed realigning tiles; 4 and 8: the shifted ones.
    EXPECT_TRUE(std::any_of(odd.begin(), odd.end(), [&](const TransposeConfig& c) {
      return c.realign == (e <= 2 ? 2 : 1) && c.vec_bytes == 16;
    })) << e;
  }
  for (int e : kSizes) {
    for (const Problem& p : {P(1 << 20, 8, e), P(8, 1 << 20, e)}) {
      const auto cs = EnumerateConfigs(p);
      EXPECT_TRUE(std::any_of(cs.begin(), cs.end(), [](const TransposeConfig& c) {
        return c.algorithm == Algorithm::kSkinny;
      })) << p.ToString();
    }
    // A strided skinny input with strided output has no skinny path.
    for (const TransposeConfig& c : EnumerateConfigs(P(100, 8, e, 1, 9, 101)))
      EXPECT_NE(c.algorithm, Algorithm::kSkinny);
    // Short sides up to kSkinnyMaxSide (batched small matrices), none past it.
    for (const Problem& p : {P(27, 540, e, 438), P(540, 27, e, 438), P(64, 5000, e),
                             P(5000, 64, e), P(145, 2284, e, 250), P(5000, 256, e)}) {
      const auto cs = EnumerateConfigs(p);
      EXPECT_TRUE(std::any_of(cs.begin(), cs.end(), [](const TransposeConfig& c) {
        return c.algorithm == Algorithm::kSkinny;
      })) << p.ToString();
    }
    for (const Problem& p : {P(kSkinnyMaxSide + 1, 5000, e), P(5000, kSkinnyMaxSide + 1, e)})
      for (const TransposeConfig& c : EnumerateConfigs(p))
        EXPECT_NE(c.algorithm, Algorithm::kSkinny) << p.ToString();
  }
}

// The narrow side of a skinny problem: the columns up to 16 as before the wider kernels, past
// 16 the narrower of two dense sides.
TEST(SkinnyIsTall, TakesTheNarrowerDenseSide) {
  EXPECT_TRUE(SkinnyIsTall(P(1000, 8, 4)));
  EXPECT_TRUE(SkinnyIsTall(P(10, 16, 4)));    // cols <= 16: tall even where rows are fewer
  EXPECT_FALSE(SkinnyIsTall(P(8, 1000, 4)));
  EXPECT_TRUE(SkinnyIsTall(P(540, 27, 4, 438)));
  EXPECT_FALSE(SkinnyIsTall(P(27, 540, 4, 438)));
  EXPECT_FALSE(SkinnyIsTall(P(20, 60, 4, 3)));   // both dense and <= 256: the 20 rows
  EXPECT_TRUE(SkinnyIsTall(P(60, 20, 4, 3)));
  EXPECT_TRUE(SkinnyIsTall(P(20, 60, 4, 3, 0, 21)));  // output rows strided: only tall applies
  EXPECT_FALSE(SkinnyIsTall(P(1000, 27, 4, 1, 29)));  // input rows strided: not tall
}

TEST(CheckConfig, NamesTheReason) {
  const Problem odd = P(4097, 3001, 4);
  auto c = TransposeConfig::FromName("tile64x64.rows8.vec16.swz");
  ASSERT_TRUE(c.ok());
  Status s = CheckConfig(*c, odd);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("leading dimension"), std::string::npos) << s.message();
  // A row of the family for 1-byte elements only.
  auto u8_only = TransposeConfig::FromName("skinny.l2048.rows8");
  ASSERT_TRUE(u8_only.ok());
  EXPECT_NE(CheckConfig(*u8_only, odd).message().find("not in the family for 4-byte elements"),
            std::string::npos);
  // Invalid problem.
  Problem bad = odd;
  bad.rows = 0;
  EXPECT_FALSE(CheckConfig(NaiveConfig(), bad).ok());
  EXPECT_TRUE(EnumerateConfigs(bad).empty());
}

TEST(Family, EveryTileGeometryIsConsistent) {
  for (int e : kSizes) {
    for (const TransposeConfig& c : FamilyConfigs(e)) {
      if (c.algorithm != Algorithm::kTile) continue;
      const TileGeometry g = TileGeometry::Make(e, c.tile_rows, c.tile_cols, c.block_rows,
                                                c.vec_bytes, c.pad, c.swizzle,
                                                c.realign && !c.swizzle);
      EXPECT_EQ(g.Invalid(), nullptr) << c.Name() << " e=" << e << ": " << g.Invalid();
      if (c.realign == 1)
        EXPECT_EQ(g.RealignInvalid(), nullptr)
            << c.Name() << " e=" << e << ": " << g.RealignInvalid();
      if (c.realign == 2) {
        const PackedRealignGeometry pg =
            PackedRealignGeometry::Make(e, c.tile_rows, c.block_rows, c.tile_cols * e);
        EXPECT_EQ(pg.Invalid(), nullptr) << c.Name() << " e=" << e << ": " << pg.Invalid();
        EXPECT_TRUE(c.tile_cols * e == 128 || c.tile_cols * e == 256) << c.Name();
      }
      if (c.async)
        EXPECT_EQ(g.AsyncInvalid(c.async), nullptr)
            << c.Name() << " e=" << e << ": " << g.AsyncInvalid(c.async);
    }
  }
}

TEST(TransposeConfig, CublasGeamIsAVendorMember) {
  auto g = TransposeConfig::FromName("cublas.geam");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->algorithm, Algorithm::kCublasGeam);
  EXPECT_TRUE(g->vendor());
  EXPECT_EQ(g->Params().at("algorithm"), 3);
  auto by_params = TransposeConfig::FromParams(g->Params());
  ASSERT_TRUE(by_params.ok());
  EXPECT_EQ(*by_params, *g);
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 3}, {"tile_rows", 4}}).ok());
  EXPECT_FALSE(TransposeConfig::FromName("cublas.geam.rows8").ok());
  // Offered for f32 and f64 only (value-exact there), one matrix per call.
  for (int e : kSizes) {
    const auto cs = EnumerateConfigs(P(1000, 999, e));
    const bool has = std::find(cs.begin(), cs.end(), *g) != cs.end();
    EXPECT_EQ(has, e == 4 || e == 8) << e;
  }
  EXPECT_TRUE(g->canonicalizes_nan());
  EXPECT_FALSE(TextbookTileConfig().canonicalizes_nan());
  Problem ints = P(1000, 999, 4);
  ints.dtype = DType::kI32;
  Status on_ints = CheckConfig(*g, ints);
  EXPECT_EQ(on_ints.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_ints.message().find("i32"), std::string::npos) << on_ints.message();
  Status batched = CheckConfig(*g, P(64, 64, 4, 3));
  EXPECT_EQ(batched.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(batched.message().find("batch"), std::string::npos) << batched.message();
  EXPECT_TRUE(CheckConfig(*g, P(300, 200, 8, 1, 203, 301)).ok());
}

// The copy member: our own (bit-exact, no vendor library), in every size's family, offered exactly
// where the output has the input's layout (one row or one column, both sides dense).
TEST(TransposeConfig, CopyIsOfferedWhereTheLayoutDoesNotChange) {
  auto c = TransposeConfig::FromName("copy");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->algorithm, Algorithm::kCopy);
  EXPECT_EQ(AlgorithmName(c->algorithm), "copy");
  EXPECT_FALSE(c->vendor());
  EXPECT_TRUE(c->meets(Exactness::kBit));
  EXPECT_EQ(c->Params().at("algorithm"), 5);
  auto by_params = TransposeConfig::FromParams(c->Params());
  ASSERT_TRUE(by_params.ok()) << by_params.status().ToString();
  EXPECT_EQ(*by_params, *c);
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 5}, {"block_rows", 8}}).ok());
  for (const char* bad : {"copy.rows8", "Copy", "copy ", "memcpy"})
    EXPECT_FALSE(TransposeConfig::FromName(bad).ok()) << bad;
  for (int e : kSizes) {
    const auto& fam = FamilyConfigs(e);
    EXPECT_EQ(std::count(fam.begin(), fam.end(), *c), 1) << e;
    for (const Problem& p : {P(1, 5000, e), P(5000, 1, e), P(1, 5000, e, 7), P(5000, 1, e, 3),
                             P(1, 1, e, 9)}) {
      EXPECT_TRUE(SameLayoutTransposed(p)) << p.ToString();
      const auto cs = EnumerateConfigs(p);
      EXPECT_EQ(std::count(cs.begin(), cs.end(), *c), 1) << p.ToString();
    }
    // A gap after the one row (ld_in) or between the output's one-element rows (ld_out), a
    // second row or column: the layouts differ.
    for (const Problem& p : {P(1, 5000, e, 2, 5003, 0), P(5000, 1, e, 1, 0, 5001),
                             P(5000, 1, e, 1, 2, 0), P(2, 5000, e), P(5000, 2, e)}) {
      EXPECT_FALSE(SameLayoutTransposed(p)) << p.ToString();
      const Status st = CheckConfig(*c, p);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << p.ToString();
      EXPECT_NE(st.message().find("same layout"), std::string::npos) << st.message();
    }
  }
}

TEST(TransposeConfig, CutensorPermuteIsAVendorMember) {
  auto t = TransposeConfig::FromName("cutensor.permute");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->algorithm, Algorithm::kCutensorPermute);
  EXPECT_EQ(t->Name(), "cutensor.permute");
  EXPECT_EQ(AlgorithmName(t->algorithm), "cutensor.permute");
  EXPECT_TRUE(t->vendor());
  EXPECT_TRUE(t->canonicalizes_nan());
  EXPECT_FALSE(t->meets(Exactness::kBit));
  EXPECT_TRUE(t->meets(Exactness::kValue));
  EXPECT_EQ(t->Params().at("algorithm"), 4);
  auto by_params = TransposeConfig::FromParams(t->Params());
  ASSERT_TRUE(by_params.ok()) << by_params.status().ToString();
  EXPECT_EQ(*by_params, *t);
  EXPECT_NE(*t, *TransposeConfig::FromName("cublas.geam"));
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 4}, {"block_rows", 8}}).ok());
  EXPECT_FALSE(TransposeConfig::FromParams({{"algorithm", 6}}).ok());
  for (const char* bad : {"cutensor", "cutensor.permute.rows8", "cutensor.Permute", "cutensor.geam",
                          "cutensor.permute ", "cublas.permute"})
    EXPECT_FALSE(TransposeConfig::FromName(bad).ok()) << bad;
  // In the family for 4- and 8-byte elements; valid for f32 and f64 with any batch and leading
  // dimensions (strides), refused with the reason for every other dtype.
  for (int e : kSizes) {
    const auto& fam = FamilyConfigs(e);
    EXPECT_EQ(std::count(fam.begin(), fam.end(), *t), (e == 4 || e == 8) ? 1 : 0) << e;
    const auto cs = EnumerateConfigs(P(1000, 999, e));
    EXPECT_EQ(std::find(cs.begin(), cs.end(), *t) != cs.end(), e == 4 || e == 8) << e;
  }
  EXPECT_TRUE(CheckConfig(*t, P(64, 64, 4, 3)).ok());
  EXPECT_TRUE(CheckConfig(*t, P(300, 200, 8, 5, 203, 301)).ok());
  EXPECT_TRUE(CheckConfig(*t, P(1, 7, 4)).ok());
  for (DType d : {DType::kI32, DType::kI64, DType::kC64}) {
    Problem q = P(100, 99, DTypeSize(d));
    q.dtype = d;
    Status s = CheckConfig(*t, q);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << DTypeName(d);
    EXPECT_NE(s.message().find(std::string(DTypeName(d))), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("cutensor.permute"), std::string::npos) << s.message();
  }  Problem c128 = P(100, 99, 16);
  EXPECT_EQ(CheckConfig(*t, c128).code(), StatusCode::kInvalidArgument);  // no 16-byte row
}

TEST(CandidateConfigs, VendorMembersThatCanonicalizeNaNsOnlyForValueExactProblems) {
  const TransposeConfig geam = *TransposeConfig::FromName("cublas.geam");
  const TransposeConfig permute = *TransposeConfig::FromName("cutensor.permute");
  EXPECT_FALSE(geam.meets(Exactness::kBit));
  EXPECT_TRUE(geam.meets(Exactness::kValue));
  EXPECT_TRUE(TextbookTileConfig().meets(Exactness::kBit));
  for (int e : kSizes) {
    Problem bit = P(1000, 999, e);
    Problem value = bit;
    value.exactness = Exactness::kValue;
    const auto b = CandidateConfigs(bit);
    const auto v = CandidateConfigs(value);
    for (const TransposeConfig& c : b) EXPECT_FALSE(c.canonicalizes_nan()) << c.Name();
    const bool has_geam = std::find(v.begin(), v.end(), geam) != v.end();
    EXPECT_EQ(has_geam, e == 4 || e == 8) << e;
    const bool has_permute = std::find(v.begin(), v.end(), permute) != v.end();
    EXPECT_EQ(has_permute, e == 4 || e == 8) << e;
    // Value-exact adds exactly the canonicalizing members, in the family's order.
    std::vector<TransposeConfig> v_less_vendor;
    for (const TransposeConfig& c : v)
      if (!c.canonicalizes_nan()) v_less_vendor.push_back(c);
    EXPECT_EQ(v_less_vendor, b) << e;
    EXPECT_EQ(v.size(), b.size() + (has_geam ? 1 : 0) + (has_permute ? 1 : 0)) << e;
  }
  // An integer dtype of 4 bytes: nothing to add (its value-exact problem is the bit-exact one).
  Problem i32 = P(1000, 999, 4);
  i32.dtype = DType::kI32;
  Problem i32_value = i32;
  i32_value.exactness = Exactness::kValue;
  EXPECT_EQ(CandidateConfigs(i32_value), CandidateConfigs(i32));
}

}  // namespace
}  // namespace transposed::kernels
