#include "core/device.h"
#include "core/hash.h"
#include "core/measurement.h"
#include "core/time_breakdown.h"
#include "core/tune_result.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string_view>
#include <set>

namespace transposed {
namespace {

DeviceInfo SampleDevice() {
  DeviceInfo d;
  d.backend = "cuda";
  d.index = 0;
  d.uuid = "GPU-1234";
  d.name = "NVIDIA H100 80GB HBM3";
  d.memory_bytes = 85899345920ULL;
  d.attributes = {{"cc", "9.0"}, {"sms", "132"}, {"l2_bytes", "52428800"}};
  d.library_version = "0.1.0+kabcdef0123";
  return d;
}

TEST(FingerprintTest, SixteenHexDigitsAndStable) {
  const std::string f = SampleDevice().Fingerprint();
  ASSERT_EQ(f.size(), 16u);
  for (char c : f) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(c));
  EXPECT_EQ(f, SampleDevice().Fingerprint());
}

TEST(FingerprintTest, IndexIsNotPartOfTheIdentity) {
  DeviceInfo a = SampleDevice(), b = SampleDevice();
  b.index = 3;
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
}

TEST(FingerprintTest, EveryIdentityFieldChangesIt) {
  std::set<std::string> seen = {SampleDevice().Fingerprint()};
  auto expect_new = [&](const DeviceInfo& d) { EXPECT_TRUE(seen.insert(d.Fingerprint()).second); };
  DeviceInfo d = SampleDevice();
  d.backend = "cpu";
  expect_new(d);
  d = SampleDevice();
  d.uuid = "GPU-1235";
  expect_new(d);
  d = SampleDevice();
  d.name = "NVIDIA H200";
  expect_new(d);
  d = SampleDevice();
  d.memory_bytes += 1;
  expect_new(d);
  d = SampleDevice();
  d.attributes["sms"] = "114";
  expect_new(d);
  d = SampleDevice();
  d.attributes["driver"] = "550.54";
  expect_new(d);
  d = SampleDevice();
  d.library_version = "0.1.0+k0000000000";
  expect_new(d);
  // Field boundaries matter: moving a character from one field to the next is a new identity.
  d = SampleDevice();
  d.uuid = "GPU-123";
  d.name = "4NVIDIA H100 80GB HBM3";
  expect_new(d);
}

TEST(MeasurementTest, FromSamplesOddCount) {
  MeasureMethod how;
  how.timer = "x";
  how.buffers = 3;
  Measurement m = Measurement::FromSamples({3.0, 1.0, 2.0, 9.0, 4.0}, 2, how);
  EXPECT_TRUE(m.valid);
  EXPECT_EQ(m.samples, 5);
  EXPECT_EQ(m.warmup, 2);
  EXPECT_DOUBLE_EQ(m.median_s, 3.0);
  EXPECT_DOUBLE_EQ(m.min_s, 1.0);
  EXPECT_DOUBLE_EQ(m.max_s, 9.0);
  EXPECT_EQ(m.method, how);
  how.buffers = 4;
  EXPECT_NE(m.method, how);
  EXPECT_DOUBLE_EQ(m.rel_spread(), 8.0 / 3.0);
}

TEST(MeasurementTest, FromSamplesEvenCountAveragesTheMiddlePair) {
  Measurement m = Measurement::FromSamples({4.0, 1.0, 2.0, 10.0}, 0, {});
  EXPECT_TRUE(m.valid);
  EXPECT_DOUBLE_EQ(m.median_s, 3.0);
  EXPECT_EQ(m.samples, 4);
}

TEST(MeasurementTest, NoSamplesIsInvalid) {
  Measurement m = Measurement::FromSamples({}, 1, {});
  EXPECT_FALSE(m.valid);
  EXPECT_EQ(m.samples, 0);
}

TEST(MeasurementTest, Invalid) {
  Measurement m = Measurement::Invalid("launch failed");
  EXPECT_FALSE(m.valid);
  EXPECT_EQ(m.error, "launch failed");
  EXPECT_EQ(m.samples, 0);
}

TEST(HashTest, KnownFnv1aValues) {
  // FNV-1a 64 of "a" followed by the 0xff field separator, computed by hand from the definition.
  uint64_t want = 0xcbf29ce484222325ULL;
  for (unsigned char c : std::string_view("a\xff")) {
    want ^= c;
    want *= 0x100000001b3ULL;
  }
  Fnv1a64 h;
  h.Add(std::string_view("a"));
  EXPECT_EQ(h.value(), want);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(want));
  EXPECT_EQ(h.Hex(), hex);
  // Fields are separated: ("ab","c") differs from ("a","bc").
  Fnv1a64 x, y;
  x.Add(std::string_view("ab"));
  x.Add(std::string_view("c"));
  y.Add(std::string_view("a"));
  y.Add(std::string_view("bc"));
  EXPECT_NE(x.value(), y.value());
}

TEST(FingerprintTest, StoredValueNeverChanges) {
  // Fingerprints are stored in databases: this value must never change.
  EXPECT_EQ(SampleDevice().Fingerprint(), "95cac4f8b388dff0");
}

TEST(PhaseTest, NamesRoundTrip) {
  for (Phase p : {Phase::kCheck, Phase::kQuick, Phase::kFinal, Phase::kSkipped}) {
    auto back = ParsePhase(PhaseName(p));
    ASSERT_TRUE(back.has_value()) << PhaseName(p);
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(PhaseName(Phase::kCheck), "check");
  EXPECT_EQ(PhaseName(Phase::kSkipped), "skipped");
  EXPECT_FALSE(ParsePhase("Quick").has_value());
  EXPECT_FALSE(ParsePhase("").has_value());
}

TEST(AnswerSourceTest, Names) {
  EXPECT_STREQ(AnswerSourceName(AnswerSource::kCache), "cache");
  EXPECT_STREQ(AnswerSourceName(AnswerSource::kTuned), "tuned");
}

TEST(TimeBreakdownTest, SumsPhasesByNameInInsertionOrder) {
  TimeBreakdown a;
  a.Add("tune.check", 0.5);
  a.Add("tune.quick", 0.25, 2);
  a.Add("tune.check", 0.25);
  TimeBreakdown b;
  b.Add("worker.check.compare", 0.125);
  b.Add("tune.quick", 0.5);
  a.Merge(b);
  ASSERT_EQ(a.phases().size(), 3u);
  EXPECT_EQ(a.phases()[0].phase, "tune.check");
  EXPECT_DOUBLE_EQ(a.seconds("tune.check"), 0.75);
  EXPECT_EQ(a.count("tune.check"), 2);
  EXPECT_DOUBLE_EQ(a.seconds("tune.quick"), 0.75);
  EXPECT_EQ(a.count("tune.quick"), 3);
  EXPECT_EQ(a.phases()[2].phase, "worker.check.compare");
  EXPECT_DOUBLE_EQ(a.seconds("absent"), 0);
  EXPECT_EQ(a.ToString(),
            "tune.check=0.7500s/2 tune.quick=0.7500s/3 worker.check.compare=0.1250s/1");
}

}  // namespace
}  // namespace transposed
