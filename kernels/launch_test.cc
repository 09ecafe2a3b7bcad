// Launch()'s argument checks, which run before any CUDA call, so this runs without a GPU (CI).
// The fake pointers are never dereferenced: every case here must be rejected on the host.
#include "transposed/kernels/launch.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace transposed::kernels {
namespace {

void* Fake(uintptr_t addr) { return reinterpret_cast<void*>(addr); }

Problem Square(int64_t n, DType t = DType::kF32) {
  Problem p;
  p.rows = n;
  p.cols = n;
  p.dtype = t;
  return p;
}

TEST(Launch, RejectsConfigsOutsideTheFamilyOrProblem) {
  const Problem p = Square(256);
  auto huge = TransposeConfig::FromName("tile1024x1024.rows8.pad0");
  ASSERT_TRUE(huge.ok());
  Status s = Launch(*huge, p, Fake(1 << 20), Fake(1 << 24), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not in the family"), std::string::npos) << s.message();

  Problem odd = Square(255);
  auto vec = TransposeConfig::FromName("tile64x64.rows8.vec16.swz");
  ASSERT_TRUE(vec.ok());
  EXPECT_EQ(Launch(*vec, odd, Fake(1 << 20), Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);

  auto skinny = TransposeConfig::FromName("skinny.l256.rows8");
  ASSERT_TRUE(skinny.ok());
  EXPECT_EQ(Launch(*skinny, p, Fake(1 << 20), Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);

  Problem bad = p;
  bad.batch = 0;
  EXPECT_EQ(Launch(NaiveConfig(), bad, Fake(1 << 20), Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LaunchReference(bad, Fake(1 << 20), Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(Launch, RejectsBadPointers) {
  const Problem p = Square(256);
  auto vec = TransposeConfig::FromName("tile64x64.rows8.vec16.swz");
  ASSERT_TRUE(vec.ok());
  // Vector configs need 16-byte alignment, element configs element alignment.
  Status s = Launch(*vec, p, Fake((1 << 20) + 4), Fake(1 << 24), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("aligned to 16"), std::string::npos) << s.message();
  EXPECT_EQ(Launch(*vec, p, Fake(1 << 20), Fake((1 << 24) + 8), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch(NaiveConfig(), p, Fake((1 << 20) + 2), Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch(NaiveConfig(), p, nullptr, Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch(NaiveConfig(), p, Fake(1 << 20), nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  // In place and overlapping buffers (256*256*4 bytes = 256 KiB each).
  EXPECT_EQ(Launch(NaiveConfig(), p, Fake(1 << 20), Fake(1 << 20), nullptr).code(),
            StatusCode::kInvalidArgument);
  Status o = Launch(NaiveConfig(), p, Fake(1 << 20), Fake((1 << 20) + 4096), nullptr);
  EXPECT_EQ(o.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.message().find("overlap"), std::string::npos) << o.message();
  EXPECT_EQ(LaunchReference(p, Fake(1 << 20), Fake((1 << 20) + 4096), nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace transposed::kernels
