// Launch()'s argument checks, which run before any CUDA call, so this runs without a GPU (CI).
// The fake pointers are never dereferenced: every case here must be rejected on the host.
#include "transposed/kernels/launch.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
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
  auto u8_only = TransposeConfig::FromName("skinny.l2048.rows8");  // a row for 1-byte elements
  ASSERT_TRUE(u8_only.ok());
  Status s = Launch(*u8_only, p, Fake(1 << 20), Fake(1 << 24), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not in the family"), std::string::npos) << s.message();

  Problem odd = Square(255);
  auto vec = TransposeConfig::FromName("tile64x64.rows8.vec16.swz");
  ASSERT_TRUE(vec.ok());
  EXPECT_EQ(Launch(*vec, odd, Fake(1 << 20), Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);

  // Skinny configurations take a narrow side of at most 256 elements.
  auto skinny = TransposeConfig::FromName("skinny.l256.rows8");
  ASSERT_TRUE(skinny.ok());
  EXPECT_EQ(Launch(*skinny, Square(300), Fake(1 << 20), Fake(1 << 24), nullptr).code(),
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
  EXPECT_EQ(internal::CutensorVersionRefusal(20200), "");
  EXPECT_EQ(internal::CutensorVersionRefusal(20501), "");
  const std::string early = internal::CutensorVersionRefusal(20100);
  EXPECT_NE(early.find("older than 2.2.0"), std::string::npos) << early;
  EXPECT_NE(internal::CutensorVersionRefusal(20000), "");
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

// The call sequence on a stand-in libcutensor (fake_cutensor.cc: the 2.x symbols, logging each
// call instead of running it), since no machine of ours has cuTENSOR.
class FakeCutensor : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(FAKE_CUTENSOR2_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    log_ = reinterpret_cast<const char* (*)()>(dlsym(lib_, "fake_cutensor_log"));
    reset_ = reinterpret_cast<void (*)()>(dlsym(lib_, "fake_cutensor_reset"));
    fail_ = reinterpret_cast<void (*)(const char*, int)>(dlsym(lib_, "fake_cutensor_fail"));
    live_ = reinterpret_cast<int (*)()>(dlsym(lib_, "fake_cutensor_live"));
    ASSERT_TRUE(log_ && reset_ && fail_ && live_);
    reset_();
  }
  void TearDown() override {
    if (lib_) dlclose(lib_);
  }
  // The log since the last call.
  std::string Take() {
    std::string all = log_();
    std::string fresh = all.substr(seen_);
    seen_ = all.size();
    return fresh;
  }
  static std::string P(uintptr_t a) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", reinterpret_cast<void*>(a));
    return buf;
  }
  void* lib_ = nullptr;
  const char* (*log_)() = nullptr;
  void (*reset_)() = nullptr;
  void (*fail_)(const char*, int) = nullptr;
  int (*live_)() = nullptr;
  size_t seen_ = 0;
};

Problem Strided(DType t) {
  Problem p;
  p.rows = 30;
  p.cols = 20;
  p.batch = 4;
  p.ld_in = 23;
  p.ld_out = 37;
  p.dtype = t;
  return p;
}

TEST_F(FakeCutensor, LoadsA2xLibraryAndRefusesA1xOne) {
  internal::CutensorProbe two =
      internal::ProbeCutensor({"libtransposed-nope.so", FAKE_CUTENSOR2_PATH});
  EXPECT_TRUE(two.loaded) << two.description;
  EXPECT_EQ(two.description, std::string("cuTENSOR 2.5.1 (") + FAKE_CUTENSOR2_PATH + ")");
  internal::CutensorProbe one = internal::ProbeCutensor({FAKE_CUTENSOR1_PATH});
  EXPECT_FALSE(one.loaded);
  EXPECT_EQ(one.description, std::string(FAKE_CUTENSOR1_PATH) + ": " +
                                 internal::CutensorVersionRefusal(10502));
}

TEST_F(FakeCutensor, PermuteMakesOnePlanPerProblemAndAlignmentThenReusesIt) {
  {
    internal::CutensorPermuter t(internal::LoadCutensor({FAKE_CUTENSOR2_PATH}));
    ASSERT_TRUE(t.loaded()) << t.description();
    const Problem f32 = Strided(DType::kF32);
    const uintptr_t in = 0x100000, out = 0x200000;
    ASSERT_TRUE(t.Permute(0, f32, Fake(in), Fake(out), nullptr).ok());
    // A: 'c','r','b' with strides 1, ld_in, rows * ld_in; B: 'r','c','b' with 1, ld_out,
    // cols * ld_out; CUDA_R_32F with CUTENSOR_COMPUTE_DESC_32F, alpha 1.0f, identity, the default
    // algorithm without JIT, no workspace; pointers 256-byte aligned.
    EXPECT_EQ(Take(),
              "create h1\n"
              "tensor t2 h1 modes=3 extent=[20,30,4] stride=[1,23,690] type=0 align=256\n"
              "tensor t3 h1 modes=3 extent=[30,20,4] stride=[1,37,740] type=0 align=256\n"
              "permutation o4 h1 A=t2 crb op=1 B=t3 rcb compute=32F\n"
              "preference p5 h1 algo=-1 jit=0\n"
              "plan P6 h1 o4 p5 workspace=0\n"
              "permute P6 h1 alpha=1 (float) A=" + P(in) + " B=" + P(out) + " stream=" +
                  P(0) + "\n");
    EXPECT_EQ(t.plans(), 1u);
    // The same problem again: the cached plan, nothing made.
    ASSERT_TRUE(t.Permute(0, f32, Fake(in + 0x10000), Fake(out + 0x10000), nullptr).ok());
    EXPECT_EQ(Take(), "permute P6 h1 alpha=1 (float) A=" + P(in + 0x10000) + " B=" +
                          P(out + 0x10000) + " stream=" + P(0) + "\n");
    // Pointers aligned to 16 bytes only: a plan of its own.
    ASSERT_TRUE(t.Permute(0, f32, Fake(in + 16), Fake(out), nullptr).ok());
    std::string l = Take();
    EXPECT_NE(l.find("extent=[20,30,4] stride=[1,23,690] type=0 align=16\n"), std::string::npos)
        << l;
    EXPECT_EQ(l.find("create h"), std::string::npos) << l;  // the device's handle is reused
    EXPECT_EQ(t.plans(), 2u);
    // f64: CUDA_R_64F, CUTENSOR_COMPUTE_DESC_64F, a double alpha.
    ASSERT_TRUE(t.Permute(0, Strided(DType::kF64), Fake(in), Fake(out), nullptr).ok());
    l = Take();
    EXPECT_NE(l.find("type=1 align=256\n"), std::string::npos) << l;
    EXPECT_NE(l.find("compute=64F\n"), std::string::npos) << l;
    EXPECT_NE(l.find("alpha=1 (double)"), std::string::npos) << l;
    // One matrix: two modes.
    Problem one = f32;
    one.batch = 1;
    ASSERT_TRUE(t.Permute(0, one, Fake(in), Fake(out), nullptr).ok());
    l = Take();
    EXPECT_NE(l.find("modes=2 extent=[20,30] stride=[1,23]"), std::string::npos) << l;
    EXPECT_NE(l.find("A=t"), std::string::npos) << l;
    EXPECT_NE(l.find(" cr op=1 "), std::string::npos) << l;
    // Another device: its own handle.
    ASSERT_TRUE(t.Permute(1, f32, Fake(in), Fake(out), nullptr).ok());
    EXPECT_EQ(Take().rfind("create h", 0), 0u);
    EXPECT_EQ(t.plans(), 5u);
    // What cuTENSOR cannot do is refused before any call.
    Problem ints = f32;
    ints.dtype = DType::kI32;
    EXPECT_EQ(t.Permute(0, ints, Fake(in), Fake(out), nullptr).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(Take(), "");
  }
  // Everything made was destroyed with the permuter (plans, descriptors, handles).
  EXPECT_EQ(live_(), 0);
}

TEST_F(FakeCutensor, AFailingCallIsReportedAndWhatItMadeIsDestroyed) {
  {
    internal::CutensorPermuter t(internal::LoadCutensor({FAKE_CUTENSOR2_PATH}));
    ASSERT_TRUE(t.loaded()) << t.description();
    fail_("cutensorCreatePlan", 15);
    Status s = t.Permute(0, Strided(DType::kF32), Fake(0x100000), Fake(0x200000), nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(s.message(), "cutensorCreatePlan returned status 15 (FAKE_STATUS_NOT_SUPPORTED)");
    EXPECT_EQ(t.plans(), 0u);
    const std::string l = Take();
    for (const char* destroyed : {"destroy p5\n", "destroy o4\n", "destroy t3\n", "destroy t2\n"})
      EXPECT_NE(l.find(destroyed), std::string::npos) << destroyed << " in\n" << l;
    EXPECT_EQ(live_(), 1);  // the handle
    // The next call makes the plan; a failing permute is reported the same way.
    fail_("cutensorPermute", 7);
    s = t.Permute(0, Strided(DType::kF32), Fake(0x100000), Fake(0x200000), nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_NE(s.message().find("cutensorPermute returned status 7"), std::string::npos)
        << s.message();
    EXPECT_EQ(t.plans(), 1u);
  }
  EXPECT_EQ(live_(), 0);
}

TEST_F(FakeCutensor, ThePlanCacheIsBounded) {
  {
    internal::CutensorPermuter t(internal::LoadCutensor({FAKE_CUTENSOR2_PATH}));
    ASSERT_TRUE(t.loaded()) << t.description();
    Problem p = Strided(DType::kF32);
    for (size_t i = 0; i < internal::kCutensorMaxPlans + 10; ++i) {
      p.rows = 30 + static_cast<int64_t>(i);
      p.ld_out = p.rows;
      ASSERT_TRUE(t.Permute(0, p, Fake(0x100000), Fake(0x200000), nullptr).ok()) << i;
      EXPECT_LE(t.plans(), internal::kCutensorMaxPlans);
    }
    EXPECT_EQ(t.plans(), 10u);  // emptied once, at the 65th problem
  }
  EXPECT_EQ(live_(), 0);
}

}  // namespace
}  // namespace transposed::kernels
