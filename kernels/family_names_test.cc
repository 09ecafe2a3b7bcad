// The family table as the one owner of a member's identity (transposed/kernels/family.h): every
// name the table prints round-trips through a lookup, every name any earlier version of the
// family printed (so any name a user's database may hold) still resolves, the retired ones are
// refused by CheckConfig with the reason, and parameter maps (a candidate's, an old stored one's
// without the later keys) name their member.
#include "transposed/kernels/family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "kernels/policy.h"
#include "testing/problems.h"

namespace transposed::kernels {
namespace {

// Every name any version of the family printed: the union over the 25 commits that changed
// kernels/policy.h, family.inc, config.cc or config.h (git log on 2026-11-27), each built and its
// FamilyConfigs(1, 2, 4, 8, 16) printed: 113 names; then the rows added since (issue 27: the
// 128-thread u8 packed tiles; issue 36: the walking packed tiles). 20 have since left the family
// (kernels/family_retired.h).
const char* const kEveryNameEverPrinted[] = {
    "copy", "cublas.geam", "cutensor.permute", "naive", "skinny.l1024.rows8", "skinny.l128.rows8",
    "skinny.l2048.rows8", "skinny.l256.rows8", "skinny.l512.rows8", "skinny.l64.rows8",
    "tile128x128.rows16.pad1", "tile128x128.rows16.vec16.realign2.swz",
    "tile128x128.rows16.vec16.swz", "tile128x128.rows4.vec16.pad4", "tile128x128.rows4.vec16.swz",
    "tile128x128.rows4.vec16.swz.async2", "tile128x128.rows8.pad1", "tile128x128.rows8.vec16.pad4",
    "tile128x128.rows8.vec16.realign.pad2", "tile128x128.rows8.vec16.realign.pad4",
    "tile128x128.rows8.vec16.realign2.swz", "tile128x128.rows8.vec16.swz",
    "tile128x128.rows8.vec16.swz.async2", "tile128x128.rows8.vec4.swz",
    "tile128x128.rows8.vec8.swz", "tile128x16.rows16.pad1",
    "tile128x256.rows16.vec16.realign2.swz", "tile128x256.rows16.vec16.swz",
    "tile128x256.rows8.vec16.swz", "tile128x32.rows16.pad1",
    "tile128x32.rows16.vec16.realign.pad2", "tile128x32.rows8.pad1",
    "tile128x32.rows8.vec16.realign.pad1", "tile128x32.rows8.vec16.realign.pad2",
    "tile128x64.rows16.pad1", "tile128x64.rows4.vec16.swz", "tile128x64.rows4.vec16.swz.async2",
    "tile128x64.rows8.pad1", "tile128x64.rows8.vec16.pad2", "tile128x64.rows8.vec16.pad4",
    "tile128x64.rows8.vec16.realign.pad2", "tile128x64.rows8.vec16.realign.pad4",
    "tile128x64.rows8.vec16.realign2.swz", "tile128x64.rows8.vec16.swz",
    "tile128x64.rows8.vec16.swz.async2", "tile16x16.rows2.pad1", "tile16x16.rows4.swz",
    "tile16x32.rows4.pad1", "tile16x32.rows8.vec16.pad1", "tile16x32.rows8.vec16.swz",
    "tile256x128.rows16.vec16.realign2.swz", "tile256x128.rows8.vec16.realign.pad4",
    "tile256x32.rows16.pad1", "tile256x64.rows16.vec16.realign.pad4",
    "tile256x64.rows16.vec16.realign2.swz", "tile256x64.rows8.vec16.realign.pad2",
    "tile256x64.rows8.vec16.realign.pad4", "tile32x128.rows8.vec16.pad2",
    "tile32x128.rows8.vec16.swz", "tile32x16.rows8.vec16.pad1", "tile32x16.rows8.vec16.swz",
    "tile32x32.rows4.swz", "tile32x32.rows4.vec16.swz", "tile32x32.rows8.pad0",
    "tile32x32.rows8.pad1", "tile32x32.rows8.swz", "tile32x32.rows8.vec16.pad1",
    "tile32x32.rows8.vec16.realign.pad2", "tile32x32.rows8.vec16.realign.swz",
    "tile32x32.rows8.vec16.swz", "tile32x64.rows16.vec16.swz", "tile32x64.rows4.vec16.swz",
    "tile32x64.rows8.pad1", "tile32x64.rows8.vec16.pad1", "tile32x64.rows8.vec16.swz",
    "tile64x128.rows16.pad1", "tile64x128.rows16.vec16.swz", "tile64x128.rows4.vec16.swz",
    "tile64x128.rows8.vec16.pad2", "tile64x128.rows8.vec16.pad4",
    "tile64x128.rows8.vec16.realign.pad2", "tile64x128.rows8.vec16.swz",
    "tile64x16.rows8.vec16.realign.pad2", "tile64x256.rows8.vec16.pad4",
    "tile64x256.rows8.vec16.swz", "tile64x32.rows16.pad1", "tile64x32.rows16.vec16.realign.pad2",
    "tile64x32.rows4.vec16.swz", "tile64x32.rows4.vec16.swz.async2", "tile64x32.rows8.pad1",
    "tile64x32.rows8.vec16.pad1", "tile64x32.rows8.vec16.realign.pad1",
    "tile64x32.rows8.vec16.realign.pad2", "tile64x32.rows8.vec16.swz",
    "tile64x32.rows8.vec16.swz.async2", "tile64x64.rows16.pad1", "tile64x64.rows16.vec16.swz",
    "tile64x64.rows4.pad1", "tile64x64.rows4.vec16.pad1", "tile64x64.rows4.vec16.realign.pad2",
    "tile64x64.rows4.vec16.realign2.swz", "tile64x64.rows4.vec16.swz",
    "tile64x64.rows4.vec16.swz.async2", "tile64x64.rows8.pad1", "tile64x64.rows8.pad4",
    "tile64x64.rows8.vec16.pad1", "tile64x64.rows8.vec16.pad2",
    "tile64x64.rows8.vec16.realign.pad2", "tile64x64.rows8.vec16.realign.swz",
    "tile64x64.rows8.vec16.swz", "tile64x64.rows8.vec16.swz.async2", "tile64x64.rows8.vec4.swz",
    "tile64x64.rows8.vec8.swz",
    // issue 27
    "tile128x128.rows4.vec16.realign2.swz", "tile64x128.rows4.vec16.realign2.swz",
};
// Issue 36: the walking packed tiles.
const char* const kNamesSinceIssue36[] = {
    "tile64x128.rows4.vec16.realign2.swz.walk2",
    "tile128x128.rows8.vec16.realign2.swz.walk4",
    "tile64x64.rows4.vec16.realign2.swz.walk2",
};
// Both lists, in order.
std::vector<std::string> EveryNameEverPrinted() {
  std::vector<std::string> names(std::begin(kEveryNameEverPrinted),
                                 std::end(kEveryNameEverPrinted));
  names.insert(names.end(), std::begin(kNamesSinceIssue36), std::end(kNamesSinceIssue36));
  return names;
}

const int kSizes[] = {1, 2, 4, 8, 16};

TEST(FamilyNames, EveryNameTheTablePrintsRoundTrips) {
  for (int e : kSizes) {
    for (const TransposeConfig& c : FamilyConfigs(e)) {
      auto by_name = TransposeConfig::FromName(c.Name());
      ASSERT_TRUE(by_name.ok()) << c.Name() << ": " << by_name.status().ToString();
      EXPECT_EQ(*by_name, c) << c.Name();
      auto by_params = TransposeConfig::FromParams(c.Params());
      ASSERT_TRUE(by_params.ok()) << c.Name() << ": " << by_params.status().ToString();
      EXPECT_EQ(*by_params, c) << c.Name();
      EXPECT_EQ(MemberOfParams(c.Params()), c) << c.Name();
      EXPECT_EQ(FamilyAlgorithm(c.Params()), c.algorithm) << c.Name();
      EXPECT_FALSE(IsRetired(c)) << c.Name();
    }
  }
}

TEST(FamilyNames, EveryNameAnyVersionPrintedStillResolves) {
  int retired = 0;
  std::set<std::string> current;
  for (int e : kSizes)
    for (const TransposeConfig& c : FamilyConfigs(e)) current.insert(c.Name());
  const std::vector<std::string> every = EveryNameEverPrinted();
  for (const std::string& name : every) {
    auto c = TransposeConfig::FromName(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    EXPECT_EQ(c->Name(), name);
    EXPECT_EQ(MemberOfParams(c->Params()), *c) << name;
    EXPECT_EQ(IsRetired(*c), current.count(name) == 0) << name;
    if (!IsRetired(*c)) continue;
    ++retired;
    // Resolvable, never run: a retired row is refused with the reason, for every element size.
    for (int e : kSizes) {
      const Status s = CheckConfig(*c, MakeTestProblemOfSize(4096, 4095, e));
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
      EXPECT_NE(s.message().find("retired"), std::string::npos) << name << ": " << s.message();
    }
  }
  EXPECT_EQ(retired, 20);
  // Every current name is among them: the list is a superset of today's family.
  for (const std::string& name : current)
    EXPECT_NE(std::find(every.begin(), every.end(), name), every.end())
        << name << " is new: add it to kNamesSinceIssue36";
}

TEST(FamilyNames, NamesNoRowPrintsAreRefusedNamingTheName) {
  for (const char* bad : {"tile1024x1024.rows8.pad0", "tile64x128.rows4.vec16.realign.swz",
                          "skinny.l500.rows8", "tile032x32.rows8.pad0", "tile32x32.rows8.pad01"}) {
    auto c = TransposeConfig::FromName(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(bad), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("not in the family"), std::string::npos);
    EXPECT_FALSE(FindMember(bad).has_value()) << bad;
  }
}

TEST(FamilyNames, ParameterMapsNameTheirMember) {
  // A map stored before "realign" and "async" existed: the member whose left-out parameters are
  // 0 (tile128x128.rows8.vec16.swz, not its async2 sibling with the same seven).
  const std::map<std::string, int64_t> old = {{"algorithm", 1}, {"tile_rows", 128},
                                              {"tile_cols", 128}, {"block_rows", 8},
                                              {"vec_bytes", 16}, {"pad", 0},
                                              {"swizzle", 1}};
  auto c = TransposeConfig::FromParams(old);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Name(), "tile128x128.rows8.vec16.swz");
  std::map<std::string, int64_t> async = old;
  async["async"] = 2;
  EXPECT_EQ(TransposeConfig::FromParams(async)->Name(), "tile128x128.rows8.vec16.swz.async2");
  // A packed tile's map stored before "walk" existed names the tile that walks no column, not
  // its walking sibling; with the key, the sibling.
  std::map<std::string, int64_t> packed =
      TransposeConfig::FromName("tile64x128.rows4.vec16.realign2.swz.walk2")->Params();
  EXPECT_EQ(packed.at("walk"), 2);
  EXPECT_EQ(TransposeConfig::FromParams(packed)->Name(),
            "tile64x128.rows4.vec16.realign2.swz.walk2");
  packed.erase("walk");
  EXPECT_EQ(TransposeConfig::FromParams(packed)->Name(), "tile64x128.rows4.vec16.realign2.swz");
  // Not members: a CPU candidate's map, a fake's, a map with an extra key.
  EXPECT_EQ(FamilyAlgorithm({{"isa", 2}, {"threads", 4}, {"block", 4}}), std::nullopt);
  EXPECT_EQ(FamilyAlgorithm({{"tile", 32}, {"threads", 4}}), std::nullopt);
  std::map<std::string, int64_t> faulty = TextbookTileConfig().Params();
  faulty["test_fault"] = 1;
  EXPECT_EQ(FamilyAlgorithm(faulty), std::nullopt);
  EXPECT_EQ(FamilyAlgorithm(TextbookTileConfig().Params()), Algorithm::kTile);
  EXPECT_EQ(FamilyAlgorithm({{"algorithm", 5}}), Algorithm::kCopy);
  EXPECT_EQ(FamilyAlgorithm({{"algorithm", 1}}), std::nullopt);  // several tiles
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
