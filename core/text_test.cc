#include "core/text.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

namespace transposed {
namespace {

TEST(TextTest, QuoteEscapesEverythingThatCouldForgeALogLine) {
  EXPECT_EQ(Quote("f32"), "'f32'");
  EXPECT_EQ(Quote("a\nb"), "'a\\nb'");
  EXPECT_EQ(Quote(std::string("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(Quote("\x1b[31mred"), "'\\x1b[31mred'");
  EXPECT_EQ(Quote("it's"), "'it\\'s'");
  EXPECT_EQ(Quote("back\\slash"), "'back\\\\slash'");
  EXPECT_EQ(Quote("\xff\xfe"), "'\\xff\\xfe'");
  EXPECT_EQ(Quote("\r\t"), "'\\r\\t'");
}

TEST(TextTest, QuoteCutsLongValuesAndSaysHowLong) {
  const std::string big(9000, 'x');
  const std::string q = Quote(big);
  EXPECT_EQ(q, "'" + std::string(kQuoteBytes, 'x') + "...' (9000 bytes)");
  EXPECT_EQ(Quote("abcdef", 3), "'abc...' (6 bytes)");
}

// Property: for any bytes, the quoted form is printable ASCII only, bounded in size, and the
// escaping is injective on untruncated values (distinct inputs never quote the same).
TEST(TextTest, QuoteIsPrintableBoundedAndInjective) {
  std::mt19937 rng(12345);
  std::map<std::string, std::string> seen;
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 80, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    const std::string q = Quote(s);
    for (char c : q) ASSERT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
    ASSERT_LE(q.size(), 4 * kQuoteBytes + 32);
    if (s.size() <= kQuoteBytes) {
      auto [it, inserted] = seen.emplace(q, s);
      if (!inserted) ASSERT_EQ(it->second, s);
    }
  }
}

TEST(TextTest, CheckFieldLengthNamesTheField) {
  EXPECT_TRUE(CheckFieldLength("problem.dtype", "f32").ok());
  EXPECT_TRUE(CheckFieldLength("problem.dtype", std::string(kMaxFieldBytes, 'a')).ok());
  Status s = CheckFieldLength("problem.dtype", std::string(9000, 'a'));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("problem.dtype: too long (9000 bytes, at most 256): 'aaa", 0), 0u)
      << s.message();
  EXPECT_LT(s.message().size(), 200u);
}

}  // namespace
}  // namespace transposed
