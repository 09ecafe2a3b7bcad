// Launch()'s argument checks, which run before any CUDA call, so this runs without a GPU (CI).
// The fake pointers are never dereferenced: every case here must be rejected on the host.
#include "transposed/kernels/launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/vendor.h"

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

// The cuTENSOR loader: a library that is not there, or is not cuTENSOR, is reported with the
// reason and never used. (Neither this machine nor our GPU machines have libcutensor.)
TEST(Cutensor, LoaderReportsAbsenceWithAReason) {
  internal::CutensorProbe none = internal::ProbeCutensor({"libtransposed-no-such-cutensor.so.2"});
  EXPECT_FALSE(none.loaded);
  EXPECT_EQ(none.description,
            "libcutensor not found (libtransposed-no-such-cutensor.so.2)");
  // A library that loads but is not cuTENSOR (the C library is always there).
  internal::CutensorProbe libc = internal::ProbeCutensor({"libtransposed-nope.so", "libc.so.6"});
  EXPECT_FALSE(libc.loaded);
  EXPECT_EQ(libc.description, "libc.so.6 lacks cutensorGetVersion");
}

TEST(Cutensor, OnlyThe2xApiIsAccepted) {
  EXPECT_EQ(internal::CutensorVersionString(20501), "2.5.1");
  EXPECT_EQ(internal::CutensorVersionString(10502), "1.5.2");
  EXPECT_EQ(internal::CutensorVersionRefusal(20000), "");
  EXPECT_EQ(internal::CutensorVersionRefusal(20501), "");
  const std::string old = internal::CutensorVersionRefusal(10502);
  EXPECT_NE(old.find("1.5.2"), std::string::npos) << old;
  EXPECT_NE(old.find("older than 2.0.0"), std::string::npos) << old;
  EXPECT_NE(internal::CutensorVersionRefusal(0), "");
}

TEST(Cutensor, EnumeratedOnlyWhereTheLibraryLoads) {
  const TransposeConfig permute = *TransposeConfig::FromName("cutensor.permute");
  Problem p = Square(256);
  p.exactness = Exactness::kValue;
  const std::vector<TransposeConfig> all = CandidateConfigs(p);
  const std::vector<TransposeConfig> here = AvailableCandidateConfigs(p);
  ASSERT_NE(std::find(all.begin(), all.end(), permute), all.end());
  const bool listed = std::find(here.begin(), here.end(), permute) != here.end();
  EXPECT_EQ(listed, VendorAvailable(permute));
  // Our own kernels are always there, in the same order.
  std::vector<TransposeConfig> ours_all, ours_here;
  for (const auto& c : all)
    if (!c.vendor()) ours_all.push_back(c);
  for (const auto& c : here)
    if (!c.vendor()) ours_here.push_back(c);
  EXPECT_EQ(ours_here, ours_all);
  const std::string why = VendorDescription(permute);
  if (VendorAvailable(permute)) {
    EXPECT_EQ(why.rfind("cuTENSOR 2.", 0), 0u) << why;
  } else {
    EXPECT_NE(why.find("libcutensor"), std::string::npos) << why;
    // Launch refuses it with the same reason, before touching the (fake) pointers.
    Status s = Launch(permute, p, Fake(1 << 20), Fake(1 << 24), nullptr);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace transposed::kernels
