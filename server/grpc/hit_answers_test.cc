// HitAnswers: an encoding is found only for the very entry and device it was kept for, stays
// the same bytes (a reference, not a copy), and the memo stays within its bound.
#include "server/grpc/hit_answers.h"

#include <gtest/gtest.h>

#include <string>

namespace transposed {
namespace {

std::shared_ptr<const TuneResult> Entry(const std::string& winner) {
  auto r = std::make_shared<TuneResult>();
  r->best.name = winner;
  return r;
}

std::string Text(const grpc::Slice& s) {
  return std::string(reinterpret_cast<const char*>(s.begin()), s.size());
}

TEST(HitAnswersTest, FoundForItsEntryAndDeviceOnly) {
  HitAnswers memo;
  const auto a = Entry("a"), b = Entry("a");  // equal contents, another entry
  // Longer than a slice holds inline (GRPC_SLICE_INLINED_SIZE), as an answer is (~2 KB).
  const std::string bytes(100, 'a');
  EXPECT_FALSE(memo.Find(a, 0).has_value());
  EXPECT_EQ(Text(memo.Keep(a, 0, bytes)), bytes);
  const std::optional<grpc::Slice> found = memo.Find(a, 0);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(Text(*found), bytes);
  // The same bytes each time, not a copy.
  EXPECT_EQ(memo.Find(a, 0)->begin(), found->begin());
  EXPECT_FALSE(memo.Find(a, 1).has_value());  // another device
  EXPECT_FALSE(memo.Find(b, 0).has_value());  // a new entry of the same problem (store changed)
  EXPECT_EQ(memo.size(), 1u);
}

TEST(HitAnswersTest, TheFirstKeptWins) {
  HitAnswers memo;
  const auto a = Entry("a");
  memo.Keep(a, 0, "first");
  EXPECT_EQ(Text(memo.Keep(a, 0, "second")), "first");
  EXPECT_EQ(Text(*memo.Find(a, 0)), "first");
}

// A kept entry holds its stored result: the cache may drop it, and its address is not reused
// for another entry while the encoding is kept.
TEST(HitAnswersTest, AKeptEncodingHoldsItsEntry) {
  HitAnswers memo;
  auto a = Entry("a");
  std::weak_ptr<const TuneResult> weak = a;
  memo.Keep(a, 0, "x");
  a.reset();
  EXPECT_FALSE(weak.expired());
}

TEST(HitAnswersTest, AFullMemoIsEmptiedAndRefilled) {
  HitAnswers memo(3);
  std::vector<std::shared_ptr<const TuneResult>> entries;
  for (int i = 0; i < 3; ++i) {
    entries.push_back(Entry(std::to_string(i)));
    memo.Keep(entries.back(), 0, std::to_string(i));
  }
  EXPECT_EQ(memo.size(), 3u);
  memo.Keep(entries[1], 0, "again");  // already kept: nothing forgotten
  EXPECT_EQ(memo.size(), 3u);
  entries.push_back(Entry("3"));
  memo.Keep(entries.back(), 0, "3");
  EXPECT_EQ(memo.size(), 1u);
  EXPECT_FALSE(memo.Find(entries[0], 0).has_value());
  EXPECT_EQ(Text(*memo.Find(entries[3], 0)), "3");
}

}  // namespace
}  // namespace transposed
