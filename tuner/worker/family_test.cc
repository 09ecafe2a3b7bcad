// The candidate family (family.h): its codec, where it is computed, and the list it gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/version.h"
#include "tuner/worker/codec.h"
#include "tuner/worker/family.h"

namespace transposed::worker {
namespace {

// The family crosses the protocol unchanged; a worker built at another kernel library version is
// not computed here (its candidates are asked from it).
TEST(FamilyTest, CodecRoundTripAndWhereItIsComputed) {
  CandidateFamily f;
  f.kernels_library_version = "0.0.0-other";
  f.vendor_available = {"cublas.geam"};
  f.fixed = {{"fake.c0", {{"c", 0}}}, {"x.nan", {{"canonicalizes_nan", 1}}}};
  pb::CandidateFamily proto;
  ToProto(f, &proto);
  auto back = FromProto("family", proto);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kernels_library_version, f.kernels_library_version);
  EXPECT_EQ(back->vendor_available, f.vendor_available);
  ASSERT_EQ(back->fixed.size(), 2u);
  EXPECT_EQ(back->fixed[1].params.at("canonicalizes_nan"), 1);
  EXPECT_FALSE(CandidatesHere(f));
  f.kernels_library_version = kLibraryVersion;
  EXPECT_TRUE(CandidatesHere(f));
  f.kernels_library_version.clear();
  EXPECT_TRUE(CandidatesHere(f));
  pb::CandidateFamily bad;
  bad.add_fixed();  // a variant without a name
  auto refused = FromProto("family", bad);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("family.fixed[0]"), std::string::npos)
      << refused.status().message();
}

// The kernels family: every member of CandidateConfigs, less the vendor members the worker did
// not report, then the fixed ones; a member that canonicalizes NaNs only for value-exact problems.
TEST(FamilyTest, KernelsFamilyLessUnavailableVendorsThenFixed) {
  CandidateFamily f;
  f.kernels_library_version = kLibraryVersion;
  f.fixed = {{"test.fault.illegal_address", {}}};
  Problem p;
  p.rows = 512;
  p.cols = 384;
  p.dtype = DType::kF32;
  p.exactness = Exactness::kValue;
  const auto without = FamilyCandidates(f, p);
  ASSERT_FALSE(without.empty());
  EXPECT_EQ(without.back().name, "test.fault.illegal_address");
  for (const Candidate& c : without) EXPECT_NE(c.name, "cublas.geam");
  f.vendor_available = {"cublas.geam"};
  const auto with = FamilyCandidates(f, p);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(std::count_if(with.begin(), with.end(),
                          [](const Candidate& c) { return c.name == "cublas.geam"; }),
            1);
  p.exactness = Exactness::kBit;  // geam canonicalizes NaNs: not offered
  EXPECT_EQ(FamilyCandidates(f, p).size(), without.size());
  p.rows = 0;
  EXPECT_TRUE(FamilyCandidates(f, p).empty());
}

}  // namespace
}  // namespace transposed::worker
