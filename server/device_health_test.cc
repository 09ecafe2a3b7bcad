// DeviceHealth on a LocalCeilingBoard: a device more than 10% below the median of the others of
// its class, 3 tunes in a row, is flagged, and cleared after 3 in a row within; contended tunes,
// small problems and a class of one are no verdict.
#include "server/device_health.h"

#include <gtest/gtest.h>

namespace transposed {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(DeviceHealth, MedianAndBuckets) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3}), 3);
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(SizeBucket(64 * kMiB), 26);
  EXPECT_EQ(SizeBucket(64 * kMiB + 1), 26);
  EXPECT_EQ(SizeBucket(128 * kMiB - 1), 26);
  EXPECT_EQ(SizeBucket(128 * kMiB), 27);
}

TEST(DeviceHealth, FlagsTheSlowDeviceAfterThreeVerdictsOnly) {
  LocalCeilingBoard board;
  DeviceHealth health(4, HealthOptions{}, &board);
  const std::string cls = "class-a";
  // Devices 0..2 at about 4000 GB/s, device 3 at 3400 (15% below), each at 64-128 MiB.
  auto round = [&](double slow_gbps) {
    health.Observe(0, cls, "GPU-0", 64 * kMiB, 4000, false);
    health.Observe(1, cls, "GPU-1", 80 * kMiB, 3950, false);
    health.Observe(2, cls, "GPU-2", 100 * kMiB, 4050, false);
    return health.Observe(3, cls, "GPU-3", 96 * kMiB, slow_gbps, false);
  };
  DeviceHealthStatus s = round(3400);
  EXPECT_FALSE(s.slow);
  EXPECT_EQ(s.below_in_a_row, 1);
  EXPECT_EQ(s.class_devices, 3);
  EXPECT_NEAR(s.ratio, 3400.0 / 4000, 1e-9);
  s = round(3400);
  EXPECT_FALSE(s.slow);
  s = round(3400);
  EXPECT_TRUE(s.slow);
  EXPECT_NE(s.reason.find("15% below the median 4000.0 GB/s of 3 other devices"), std::string::npos)
      << s.reason;
  EXPECT_NE(s.reason.find("3 verdicts in a row below the 10% margin"), std::string::npos)
      << s.reason;
  for (int d = 0; d < 3; ++d) EXPECT_FALSE(health.Get(d).slow) << d;
  // Within the margin (9% below) twice: still flagged; the third time: cleared.
  EXPECT_TRUE(round(3640).slow);
  EXPECT_TRUE(round(3640).slow);
  s = round(3640);
  EXPECT_FALSE(s.slow);
  EXPECT_EQ(s.within_in_a_row, 3);
  // One verdict within between two below restarts the count.
  round(3400);
  round(3400);
  round(3700);
  round(3400);
  EXPECT_FALSE(round(3400).slow);
  EXPECT_TRUE(round(3400).slow);
}

TEST(DeviceHealth, NoVerdictWithoutComparableObservations) {
  LocalCeilingBoard board;
  DeviceHealth health(2, HealthOptions{}, &board);
  for (int i = 0; i < 5; ++i) {
    // Alone in its class and size: no verdict.
    EXPECT_EQ(health.Observe(0, "a", "GPU-0", 64 * kMiB, 1000, false).verdicts, 0);
    // Another class, or another size bucket: no comparison.
    EXPECT_EQ(health.Observe(1, "b", "GPU-1", 64 * kMiB, 100, false).verdicts, 0);
    EXPECT_EQ(health.Observe(1, "a", "GPU-1", 256 * kMiB, 100, false).verdicts, 0);
    // Contended, too small, or without a ceiling: no observation at all.
    EXPECT_EQ(health.Observe(1, "a", "GPU-1", 64 * kMiB, 100, true).verdicts, 0);
    EXPECT_EQ(health.Observe(1, "a", "GPU-1", 1 * kMiB, 100, false).verdicts, 0);
    EXPECT_EQ(health.Observe(1, "a", "GPU-1", 64 * kMiB, 0, false).verdicts, 0);
  }
  EXPECT_FALSE(health.Get(1).slow);
  // Once both have a ceiling in the bucket, each is compared with the other.
  DeviceHealthStatus s = health.Observe(1, "a", "GPU-1", 70 * kMiB, 500, false);
  EXPECT_EQ(s.verdicts, 1);
  EXPECT_EQ(s.class_devices, 1);
  EXPECT_NE(s.reason.find("of 1 other device of"), std::string::npos) << s.reason;
  // Out of range indexes are ignored.
  EXPECT_FALSE(health.Observe(7, "a", "GPU-7", 64 * kMiB, 1, false).slow);
  EXPECT_EQ(health.All().size(), 2u);
}

// Two healthy devices within a few percent of each other never flag (the 2x H200 case).
TEST(DeviceHealth, TwoHealthyDevicesNeverFlag) {
  LocalCeilingBoard board;
  DeviceHealth health(2, HealthOptions{}, &board);
  for (int i = 0; i < 50; ++i) {
    const double wobble = (i % 5) * 0.015;  // up to 6% apart
    health.Observe(0, "h200", "GPU-0", 256 * kMiB, 4300 * (1 - wobble), false);
    health.Observe(1, "h200", "GPU-1", 256 * kMiB, 4300 * (1 + wobble / 2), false);
  }
  EXPECT_FALSE(health.Get(0).slow);
  EXPECT_FALSE(health.Get(1).slow);
  EXPECT_GT(health.Get(0).verdicts, 40);
}

}  // namespace
}  // namespace transposed
