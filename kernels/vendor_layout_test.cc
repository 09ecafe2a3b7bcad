// CutensorLayoutFor: the modes, extents and strides cutensor.permute hands to cuTENSOR, checked
// by running the permutation they describe on the CPU (B[modes] = A[modes], as cutensorPermute
// defines it) against the problem's own definition of a transpose (core/problem.h).
#include "kernels/vendor_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "testing/problems.h"

namespace transposed::kernels {
namespace {


// Element offset of the index `idx` (by mode label) in a tensor of the given modes and strides.
int64_t Offset(const int32_t* modes, const int64_t* strides, uint32_t n,
               const std::map<int32_t, int64_t>& idx) {
  int64_t off = 0;
  for (uint32_t i = 0; i < n; ++i) off += idx.at(modes[i]) * strides[i];
  return off;
}

// Runs the permutation the layout describes on element indices: out[offset_B(i)] =
// in_value(offset_A(i)) for every index i of the modes' extents (B's extents, which must equal
// A's per mode). Elements of `out` it never writes keep -1.
std::vector<int64_t> Permute(const CutensorPermuteLayout& l, int64_t out_elements) {
  std::map<int32_t, int64_t> extent;
  for (uint32_t i = 0; i < l.modes; ++i) extent[l.mode_a[i]] = l.extent_a[i];
  for (uint32_t i = 0; i < l.modes; ++i) EXPECT_EQ(extent.at(l.mode_b[i]), l.extent_b[i]);
  std::vector<int64_t> out(out_elements, -1);
  std::map<int32_t, int64_t> idx;
  for (const auto& [m, e] : extent) idx[m] = 0;
  while (true) {
    const int64_t a = Offset(l.mode_a, l.stride_a, l.modes, idx);
    const int64_t b = Offset(l.mode_b, l.stride_b, l.modes, idx);
    EXPECT_GE(b, 0);
    EXPECT_LT(b, out_elements);
    if (b < 0 || b >= out_elements) return out;
    EXPECT_EQ(out[b], -1) << "element " << b << " written twice";
    out[b] = a;  // the value of input element a is its offset
    auto it = idx.begin();
    for (; it != idx.end(); ++it) {
      if (++it->second < extent.at(it->first)) break;
      it->second = 0;
    }
    if (it == idx.end()) return out;
  }
}

// What the problem says the output holds: output element (b, j, i) = input element (b, i, j);
// -1 in the gaps.
std::vector<int64_t> Expected(const Problem& p) {
  const int64_t ld_in = p.in_ld(), ld_out = p.out_ld();
  std::vector<int64_t> out(p.batch * p.cols * ld_out, -1);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.rows; ++i)
      for (int64_t j = 0; j < p.cols; ++j)
        out[b * p.cols * ld_out + j * ld_out + i] = b * p.rows * ld_in + i * ld_in + j;
  return out;
}

TEST(CutensorLayout, DenseMatrixIsTwoModes) {
  auto l = CutensorLayoutFor(MakeTestProblem(300, 200, DType::kF32));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->modes, 2u);
  EXPECT_EQ(l->data_type, kCudaR32F);
  EXPECT_EQ(l->elem_bytes, 4);
  EXPECT_EQ(std::string(l->compute_symbol), "CUTENSOR_COMPUTE_DESC_32F");
  // A: 'c' fastest (stride 1), 'r' by rows; B: 'r' fastest, 'c' by output rows.
  EXPECT_EQ(l->mode_a[0], 'c');
  EXPECT_EQ(l->extent_a[0], 200);
  EXPECT_EQ(l->stride_a[0], 1);
  EXPECT_EQ(l->mode_a[1], 'r');
  EXPECT_EQ(l->extent_a[1], 300);
  EXPECT_EQ(l->stride_a[1], 200);
  EXPECT_EQ(l->mode_b[0], 'r');
  EXPECT_EQ(l->extent_b[0], 300);
  EXPECT_EQ(l->stride_b[0], 1);
  EXPECT_EQ(l->mode_b[1], 'c');
  EXPECT_EQ(l->extent_b[1], 200);
  EXPECT_EQ(l->stride_b[1], 300);
}

TEST(CutensorLayout, BatchIsAThirdModeAndLeadingDimensionsAreStrides) {
  auto l = CutensorLayoutFor(MakeTestProblem(30, 20, DType::kF64, 4, 23, 37));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->modes, 3u);
  EXPECT_EQ(l->data_type, kCudaR64F);
  EXPECT_EQ(l->elem_bytes, 8);
  EXPECT_EQ(std::string(l->compute_symbol), "CUTENSOR_COMPUTE_DESC_64F");
  EXPECT_EQ(l->stride_a[1], 23);
  EXPECT_EQ(l->mode_a[2], 'b');
  EXPECT_EQ(l->extent_a[2], 4);
  EXPECT_EQ(l->stride_a[2], 30 * 23);
  EXPECT_EQ(l->stride_b[1], 37);
  EXPECT_EQ(l->mode_b[2], 'b');
  EXPECT_EQ(l->stride_b[2], 20 * 37);
}

TEST(CutensorLayout, ThePermutationItDescribesIsTheTranspose) {
  const Problem problems[] = {
      MakeTestProblem(7, 5, DType::kF32),
      MakeTestProblem(5, 7, DType::kF64),
      MakeTestProblem(1, 9, DType::kF32),
      MakeTestProblem(9, 1, DType::kF64),
      MakeTestProblem(1, 1, DType::kF32),
      MakeTestProblem(6, 4, DType::kF32, 3),
      MakeTestProblem(6, 4, DType::kF64, 2, 9, 6),
      MakeTestProblem(13, 11, DType::kF32, 1, 11, 20),
      MakeTestProblem(13, 11, DType::kF32, 3, 17, 13),
      MakeTestProblem(4, 6, DType::kF64, 5, 7, 8),
  };
  for (const Problem& p : problems) {
    auto l = CutensorLayoutFor(p);
    ASSERT_TRUE(l.ok()) << p.ToString() << ": " << l.status().ToString();
    EXPECT_EQ(l->modes, p.batch > 1 ? 3u : 2u) << p.ToString();
    // Every matrix element once, at the transposed place; the gaps never written.
    EXPECT_EQ(Permute(*l, p.batch * p.cols * p.out_ld()), Expected(p)) << p.ToString();
    // cuTENSOR requires non-overlapping strides: each mode's stride >= the span below it.
    for (const auto& [extent, stride] :
         {std::pair{l->extent_a, l->stride_a}, std::pair{l->extent_b, l->stride_b}})
      for (uint32_t i = 1; i < l->modes; ++i)
        EXPECT_GE(stride[i], stride[i - 1] * extent[i - 1]) << p.ToString() << " mode " << i;
  }
}

TEST(CutensorLayout, RefusesWhatItCannotDoBitForValue) {
  for (DType d : {DType::kI8, DType::kU8, DType::kI16, DType::kI32, DType::kI64}) {
    auto l = CutensorLayoutFor(MakeTestProblem(16, 16, d));
    ASSERT_FALSE(l.ok()) << DTypeName(d);
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(l.status().message().find("floating types only"), std::string::npos)
        << l.status().message();
  }
  for (DType d : {DType::kF16, DType::kBF16}) {
    auto l = CutensorLayoutFor(MakeTestProblem(16, 16, d));
    ASSERT_FALSE(l.ok()) << DTypeName(d);
    EXPECT_NE(l.status().message().find("NaN payloads"), std::string::npos) << l.status().message();
  }
  for (DType d : {DType::kC64, DType::kC128}) {
    auto l = CutensorLayoutFor(MakeTestProblem(16, 16, d));
    ASSERT_FALSE(l.ok()) << DTypeName(d);
    EXPECT_NE(l.status().message().find("imaginary"), std::string::npos) << l.status().message();
  }
  // An invalid problem is refused as such, naming the field.
  auto bad = CutensorLayoutFor(MakeTestProblem(16, 16, DType::kF32, 1, 8));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ld_in"), std::string::npos) << bad.status().message();
}

TEST(CutensorLayout, AlignmentIsTheLargestCommonPowerOfTwoUpTo256) {
  EXPECT_EQ(CutensorAlignment(0x10000, 0x20000), 256u);
  EXPECT_EQ(CutensorAlignment(0x10000, 0x20000 + 128), 128u);
  EXPECT_EQ(CutensorAlignment(0x10000 + 4, 0x20000), 4u);
  EXPECT_EQ(CutensorAlignment(0x10000 + 8, 0x20000 + 24), 8u);
  EXPECT_EQ(CutensorAlignment(0x10001, 0x20000), 1u);
}

}  // namespace
}  // namespace transposed::kernels
