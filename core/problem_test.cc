#include "core/problem.h"

#include <gtest/gtest.h>

#include <limits>

namespace transposed {
namespace {

Problem P(int64_t r, int64_t c, DType t = DType::kF32) {
  Problem p;
  p.rows = r;
  p.cols = c;
  p.dtype = t;
  return p;
}

TEST(DType, NamesRoundTripAndSizes) {
  for (DType t : AllDTypes()) {
    auto parsed = ParseDType(DTypeName(t));
    ASSERT_TRUE(parsed.has_value()) << DTypeName(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(AllDTypes().size(), 11u);
  EXPECT_EQ(DTypeSize(DType::kI8), 1);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kC64), 8);
  EXPECT_EQ(DTypeSize(DType::kC128), 16);
  EXPECT_EQ(ParseDType("FLOAT32"), DType::kF32);
  EXPECT_FALSE(ParseDType("f24").has_value());
  EXPECT_FALSE(ParseDType("").has_value());
}

TEST(Exactness, NamesRoundTrip) {
  for (Exactness e : {Exactness::kBit, Exactness::kValue})
    EXPECT_EQ(ParseExactness(ExactnessName(e)), e);
  EXPECT_FALSE(ParseExactness("VALUE").has_value());
  EXPECT_FALSE(ParseExactness("").has_value());
}

TEST(Exactness, ValueExactIsItsOwnKeyOnlyWhereItMatters) {
  for (DType t : AllDTypes()) {
    Problem bit = P(4097, 3001, t);
    Problem value = bit;
    value.exactness = Exactness::kValue;
    const bool matters = t == DType::kF32 || t == DType::kF64;
    EXPECT_EQ(ValueExactMatters(t), matters) << DTypeName(t);
    EXPECT_EQ(bit.Key() != value.Key(), matters) << DTypeName(t);
    EXPECT_EQ(bit == value, !matters) << DTypeName(t);
    EXPECT_EQ(value.Normalized().exactness, matters ? Exactness::kValue : Exactness::kBit);
    EXPECT_EQ(value.ToString(), bit.ToString() + (matters ? " value-exact" : ""));
  }
  Problem v = P(4096, 4096);
  v.exactness = Exactness::kValue;
  // Bit-exact keys are those of before the field existed (stored databases keep their keys).
  EXPECT_EQ(P(4096, 4096).Key(), "4096x4096.b1.f32.ldi0.ldo0");
  EXPECT_EQ(v.Key(), "4096x4096.b1.f32.ldi0.ldo0.value");
}

TEST(Exactness, UnknownValueIsRefusedNamingTheField) {
  Problem p = P(8, 8);
  p.exactness = static_cast<Exactness>(7);
  Status s = ValidateProblem(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("exactness"), std::string::npos) << s.message();
}

TEST(DType, OneDTypePerElementSize) {
  // Every size some dtype has maps to a dtype of that size, the documented one.
  for (DType t : AllDTypes()) {
    auto of = DTypeOfSize(DTypeSize(t));
    ASSERT_TRUE(of.has_value()) << DTypeName(t);
    EXPECT_EQ(DTypeSize(*of), DTypeSize(t)) << DTypeName(t);
  }
  EXPECT_EQ(DTypeOfSize(1), DType::kU8);
  EXPECT_EQ(DTypeOfSize(2), DType::kBF16);
  EXPECT_EQ(DTypeOfSize(4), DType::kF32);
  EXPECT_EQ(DTypeOfSize(8), DType::kF64);
  EXPECT_EQ(DTypeOfSize(16), DType::kC128);
  for (int bad : {0, -1, 3, 5, 12, 32}) EXPECT_FALSE(DTypeOfSize(bad).has_value()) << bad;
}

TEST(Problem, KeyNormalizesDenseLeadingDimensions) {
  Problem a = P(31, 33);
  Problem b = a;
  b.ld_in = 33;
  b.ld_out = 31;
  EXPECT_EQ(a.Key(), b.Key());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.Key(), "31x33.b1.f32.ldi0.ldo0");
  b.ld_in = 40;
  EXPECT_NE(a.Key(), b.Key());
  EXPECT_EQ(b.ToString(), "31x33 f32 ld_in=40");
}

TEST(Problem, AllocBytesIncludeStrideGaps) {
  Problem p = P(3, 5, DType::kF16);
  EXPECT_EQ(p.bytes(), 3 * 5 * 2);
  EXPECT_EQ(p.in_alloc_bytes(), 3 * 5 * 2);
  p.ld_in = 8;
  p.ld_out = 4;
  EXPECT_EQ(p.in_alloc_bytes(), (2 * 8 + 5) * 2);
  EXPECT_EQ(p.out_alloc_bytes(), (4 * 4 + 3) * 2);
  p.batch = 2;
  EXPECT_EQ(p.in_alloc_bytes(), (5 * 8 + 5) * 2);
}

TEST(Validate, NamesTheField) {
  auto expect_bad = [](const Problem& p, const std::string& field, StatusCode code) {
    Status s = ValidateProblem(p, 1ull << 30);
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_EQ(s.message().rfind(field, 0), 0u) << s.ToString();
  };
  EXPECT_TRUE(ValidateProblem(P(1, 1)).ok());
  expect_bad(P(0, 5), "rows", StatusCode::kInvalidArgument);
  expect_bad(P(5, -1), "cols", StatusCode::kInvalidArgument);
  Problem p = P(4, 4);
  p.batch = 0;
  expect_bad(p, "batch", StatusCode::kInvalidArgument);
  p = P(4, 4);
  p.ld_in = 3;
  expect_bad(p, "ld_in", StatusCode::kInvalidArgument);
  p = P(4, 4);
  p.ld_out = 2;
  expect_bad(p, "ld_out", StatusCode::kInvalidArgument);
  expect_bad(P(std::numeric_limits<int64_t>::max() / 2, 4), "rows", StatusCode::kInvalidArgument);
  expect_bad(P(1 << 20, 1 << 20), "rows", StatusCode::kResourceExhausted);
}

TEST(Bandwidth, CountsReadPlusWrite) {
  EXPECT_DOUBLE_EQ(EffectiveGBps(1'000'000'000, 1.0), 2.0);
  EXPECT_EQ(EffectiveGBps(100, 0), 0);
}

TEST(Problem, LocateOutputByte) {
  // 3 matrices of 4x5 f32 input; output 5 rows of ld_out 6 (one gap element per row).
  Problem p{4, 5, 3, DType::kF32, 0, 6};
  const int64_t per_matrix = 5 * 6 * 4;  // bytes
  OutputByte a = LocateOutputByte(p, 0);
  EXPECT_EQ(a.batch, 0);
  EXPECT_EQ(a.out_row, 0);
  EXPECT_EQ(a.out_col, 0);
  EXPECT_FALSE(a.in_gap);
  // Batch 2, output row 3, output column 2, third byte of the element.
  OutputByte b = LocateOutputByte(p, 2 * per_matrix + (3 * 6 + 2) * 4 + 3);
  EXPECT_EQ(b.batch, 2);
  EXPECT_EQ(b.out_row, 3);
  EXPECT_EQ(b.out_col, 2);
  EXPECT_EQ(b.element, 2 * 30 + 3 * 6 + 2);
  EXPECT_FALSE(b.in_gap);
  // Output column 4 is the gap (rows = 4).
  OutputByte g = LocateOutputByte(p, per_matrix + (1 * 6 + 4) * 4);
  EXPECT_EQ(g.batch, 1);
  EXPECT_EQ(g.out_row, 1);
  EXPECT_EQ(g.out_col, 4);
  EXPECT_TRUE(g.in_gap);
  EXPECT_TRUE(LocateOutputByte(p, p.out_alloc_bytes()).in_gap);
}

}  // namespace
}  // namespace transposed
