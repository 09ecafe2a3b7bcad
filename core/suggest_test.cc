#include "core/suggest.h"

#include <gtest/gtest.h>

namespace transposed {
namespace {

TEST(SuggestTest, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("get", "gett"), 1u);
  EXPECT_EQ(EditDistance("tune_budget", "tune-budget"), 1u);
  EXPECT_EQ(EditDistance("abc", "xyz"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(SuggestTest, NearestWithinTwoEdits) {
  const std::vector<std::string> names = {"--rows", "--cols", "--dtype", "--batch"};
  EXPECT_EQ(ClosestName("--row", names), "--rows");
  EXPECT_EQ(ClosestName("--dtpye", names), "--dtype");
  EXPECT_EQ(ClosestName("--colums", names), "--cols");
  EXPECT_EQ(ClosestName("--bat", names), "--batch");  // a prefix, 2 edits
  EXPECT_EQ(ClosestName("--zzzzzz", names), "");
  EXPECT_EQ(ClosestName("--rows", names), "");  // not a typo
  EXPECT_EQ(ClosestName("", names), "");
}

}  // namespace
}  // namespace transposed
