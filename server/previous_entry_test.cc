// JudgeStored: an entry of this build's library version is current; of another version,
// provisional only while its variant exists with the same name and parameters.
#include "server/previous_entry.h"

#include <gtest/gtest.h>

namespace transposed {
namespace {

TuneResult Stored(const std::string& library_version, const std::string& variant,
                  std::map<std::string, int64_t> params) {
  TuneResult r;
  r.device.library_version = library_version;
  r.best.name = variant;
  r.best.params = std::move(params);
  return r;
}

TEST(PreviousEntry, CurrentProvisionalOrGone) {
  const std::vector<Candidate> family = {
      {"tile32x32.rows8", {{"tile_rows", 32}, {"tile_cols", 32}, {"rows", 8}}},
      {"tile64x64.rows8", {{"tile_rows", 64}, {"tile_cols", 64}, {"rows", 8}}},
  };
  const auto tile32 = family[0].params;
  EXPECT_EQ(JudgeStored(Stored("0.2.0+kb", "tile32x32.rows8", tile32), family, "0.2.0+kb"),
            StoredVerdict::kCurrent);
  // A current entry is current whatever the family says (it was checked when it was stored).
  EXPECT_EQ(JudgeStored(Stored("0.2.0+kb", "gone", {}), family, "0.2.0+kb"),
            StoredVerdict::kCurrent);
  EXPECT_EQ(JudgeStored(Stored("0.1.0+ka", "tile32x32.rows8", tile32), family, "0.2.0+kb"),
            StoredVerdict::kProvisional);
  // Same name, other parameters: the variant changed.
  auto changed = tile32;
  changed["rows"] = 4;
  EXPECT_EQ(JudgeStored(Stored("0.1.0+ka", "tile32x32.rows8", changed), family, "0.2.0+kb"),
            StoredVerdict::kGone);
  // A parameter more or less is a change too.
  auto more = tile32;
  more["pad"] = 1;
  EXPECT_EQ(JudgeStored(Stored("0.1.0+ka", "tile32x32.rows8", more), family, "0.2.0+kb"),
            StoredVerdict::kGone);
  // The name gone.
  EXPECT_EQ(JudgeStored(Stored("0.1.0+ka", "tile16x16.rows8", tile32), family, "0.2.0+kb"),
            StoredVerdict::kGone);
  EXPECT_EQ(JudgeStored(Stored("0.1.0+ka", "tile32x32.rows8", tile32), {}, "0.2.0+kb"),
            StoredVerdict::kGone);
  EXPECT_STREQ(StoredVerdictName(StoredVerdict::kProvisional), "provisional");
}

}  // namespace
}  // namespace transposed
