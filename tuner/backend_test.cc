#include "tuner/backend.h"

#include <gtest/gtest.h>

#include <cctype>
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
  Measurement m = Measurement::FromSamples({3.0, 1.0, 2.0, 9.0, 4.0}, 2, "{\"timer\":\"x\"}");
  EXPECT_TRUE(m.valid);
  EXPECT_EQ(m.samples, 5);
  EXPECT_EQ(m.warmup, 2);
  EXPECT_DOUBLE_EQ(m.median_s, 3.0);
  EXPECT_DOUBLE_EQ(m.min_s, 1.0);
  EXPECT_DOUBLE_EQ(m.max_s, 9.0);
  EXPECT_EQ(m.method, "{\"timer\":\"x\"}");
  EXPECT_DOUBLE_EQ(m.rel_spread(), 8.0 / 3.0);
}

TEST(MeasurementTest, FromSamplesEvenCountAveragesTheMiddlePair) {
  Measurement m = Measurement::FromSamples({4.0, 1.0, 2.0, 10.0}, 0, "");
  EXPECT_TRUE(m.valid);
  EXPECT_DOUBLE_EQ(m.median_s, 3.0);
  EXPECT_EQ(m.samples, 4);
}

TEST(MeasurementTest, NoSamplesIsInvalid) {
  Measurement m = Measurement::FromSamples({}, 1, "");
  EXPECT_FALSE(m.valid);
  EXPECT_EQ(m.samples, 0);
}

TEST(MeasurementTest, Invalid) {
  Measurement m = Measurement::Invalid("launch failed");
  EXPECT_FALSE(m.valid);
  EXPECT_EQ(m.error, "launch failed");
  EXPECT_EQ(m.samples, 0);
}

}  // namespace
}  // namespace transposed
