#include "core/placements.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace transposed {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kL2 = 50 * kMiB;  // an H100's

Measurement Timed(double median_s, double min_s, double max_s, int samples) {
  Measurement m;
  m.valid = true;
  m.median_s = median_s;
  m.min_s = min_s;
  m.max_s = max_s;
  m.samples = samples;
  m.warmup = 1;
  m.method.timer = "cuda_event";
  m.method.buffers = 1;
  return m;
}

// 16384x16384 f64 (2 x 2 GiB), at GB/s: its time per transpose.
double SecondsAt(double gbps) { return 2.0 * 2 * kGiB / (gbps * 1e9); }

TEST(PlanPlacements, OnlyProblemsBeyondAFewL2SizesGetSeveral) {
  // 4096x4096 f32: a 128 MiB pair, the harness rotates several pairs already.
  PlacementPlan small = PlanPlacements(3, 128 * kMiB, 512 * kMiB, kL2, 70 * kGiB);
  EXPECT_EQ(small.placements, 1);
  EXPECT_EQ(small.fallback, "");
  // Exactly 4 L2 sizes is not beyond them; one byte more is.
  EXPECT_EQ(PlanPlacements(3, 4 * kL2, 8 * kL2, kL2, 70 * kGiB).placements, 1);
  EXPECT_EQ(PlanPlacements(3, 4 * kL2 + 1, 8 * kL2 + 2, kL2, 70 * kGiB).placements, 3);
  // 16384x16384 f64: one 4 GiB pair.
  PlacementPlan big = PlanPlacements(3, 4 * kGiB, 4 * kGiB, kL2, 70 * kGiB);
  EXPECT_EQ(big.placements, 3);
  EXPECT_EQ(big.fallback, "");
  // The rule is the caller's: a larger multiple keeps that problem on one set.
  PlacementRule strict;
  strict.l2_multiple = 100;
  EXPECT_EQ(PlanPlacements(3, 4 * kGiB, 4 * kGiB, kL2, 70 * kGiB, strict).placements, 1);
}

TEST(PlanPlacements, OneWhenOneIsAskedOrTheL2IsUnknown) {
  EXPECT_EQ(PlanPlacements(1, 4 * kGiB, 4 * kGiB, kL2, 70 * kGiB).placements, 1);
  EXPECT_EQ(PlanPlacements(0, 4 * kGiB, 4 * kGiB, kL2, 70 * kGiB).placements, 1);
  EXPECT_EQ(PlanPlacements(3, 4 * kGiB, 4 * kGiB, 0, 70 * kGiB).placements, 1);
  EXPECT_EQ(PlanPlacements(3, 4 * kGiB, 4 * kGiB, 0, 70 * kGiB).fallback, "");
  // Asking for more than kMaxPlacements gets kMaxPlacements.
  EXPECT_EQ(PlanPlacements(100, 4 * kGiB, 4 * kGiB, kL2, 1000 * kGiB).placements, kMaxPlacements);
}

TEST(PlanPlacements, FallsBackToOneWithAReasonWhenTheyDoNotFit) {
  // Two more 4 GiB sets need 8 GiB; half of 15 GiB free is 7.5 GiB.
  PlacementPlan p = PlanPlacements(3, 4 * kGiB, 4 * kGiB, kL2, 15 * kGiB);
  EXPECT_EQ(p.placements, 1);
  EXPECT_NE(p.fallback.find("one buffer placement instead of 3"), std::string::npos) << p.fallback;
  EXPECT_NE(p.fallback.find(std::to_string(4 * kGiB) + " bytes"), std::string::npos) << p.fallback;
  EXPECT_NE(p.fallback.find(std::to_string(15 * kGiB) + " bytes free"), std::string::npos)
      << p.fallback;
  // 16 GiB free: 8 GiB is exactly half, which fits.
  EXPECT_EQ(PlanPlacements(3, 4 * kGiB, 4 * kGiB, kL2, 16 * kGiB).placements, 3);
  // Nothing free (or a negative report) never divides or overflows.
  EXPECT_EQ(PlanPlacements(3, 4 * kGiB, 4 * kGiB, kL2, 0).placements, 1);
  EXPECT_EQ(PlanPlacements(3, 4 * kGiB, 4 * kGiB, kL2, -1).placements, 1);
}

TEST(PlacementShare, SplitsTheOptionsSoThatSeveralCostAboutOne) {
  MeasureOptions o{3, 15, 0.03, 2000, 3};
  MeasureOptions s = PlacementShare(o, 3);
  EXPECT_EQ(s.warmup, 1);
  EXPECT_EQ(s.min_samples, 5);
  EXPECT_DOUBLE_EQ(s.min_seconds, 0.01);
  EXPECT_EQ(s.max_samples, 667);
  EXPECT_EQ(s.placements, 1);
  // Every set warms up and samples at least once.
  MeasureOptions tiny = PlacementShare(MeasureOptions{0, 1, 0, 1, 3}, 3);
  EXPECT_EQ(tiny.warmup, 1);
  EXPECT_EQ(tiny.min_samples, 1);
  EXPECT_EQ(tiny.max_samples, 1);
  // One placement: the options as they are.
  MeasureOptions one = PlacementShare(o, 1);
  EXPECT_EQ(one.warmup, 3);
  EXPECT_EQ(one.min_samples, 15);
  EXPECT_EQ(one.max_samples, 2000);
}

TEST(CombinePlacements, MedianOfTheSetsMediansExtremesOfAll) {
  Measurement c = CombinePlacements(
      {Timed(1.0e-3, 0.9e-3, 1.1e-3, 5), Timed(1.5e-3, 1.4e-3, 1.6e-3, 4),
       Timed(1.2e-3, 1.15e-3, 1.3e-3, 6)});
  ASSERT_TRUE(c.valid);
  EXPECT_DOUBLE_EQ(c.median_s, 1.2e-3);
  EXPECT_DOUBLE_EQ(c.min_s, 0.9e-3);
  EXPECT_DOUBLE_EQ(c.max_s, 1.6e-3);
  EXPECT_EQ(c.samples, 15);
  EXPECT_EQ(c.warmup, 3);
  EXPECT_EQ(c.method.placements, 3);
  EXPECT_EQ(c.method.timer, "cuda_event");
  // Two sets: their mean.
  Measurement two = CombinePlacements({Timed(1.0e-3, 1e-3, 1e-3, 1), Timed(2.0e-3, 2e-3, 2e-3, 1)});
  EXPECT_DOUBLE_EQ(two.median_s, 1.5e-3);
  EXPECT_EQ(two.method.placements, 2);
}

TEST(CombinePlacements, AnInvalidSetOrNoneIsInvalid) {
  Measurement bad = Measurement::Invalid("launch failed");
  Measurement c = CombinePlacements({Timed(1e-3, 1e-3, 1e-3, 3), bad});
  EXPECT_FALSE(c.valid);
  EXPECT_EQ(c.error, "launch failed");
  EXPECT_FALSE(CombinePlacements({}).valid);
}

// The H200's 16384x16384 f64 (docs/design/kernel-family.md, "Buffers": GB/s on a fresh torch
// tensor, after churn, on cuMemAlloc buffers): the 16-byte tile wins on the lucky first
// placement, the element-size tile by the median over the three, where they tie.
TEST(CombinePlacements, TheWinnerByTheMedianIsThePlacementInsensitiveVariant) {
  const std::vector<double> vec16_gbps = {4167, 3925, 3933};  // tile64x32.rows8.vec16.pad1
  const std::vector<double> elem_gbps = {3963, 3934, 3926};   // tile32x32.rows8.pad1
  std::vector<Measurement> vec16, elem;
  for (double g : vec16_gbps) vec16.push_back(Timed(SecondsAt(g), SecondsAt(g), SecondsAt(g), 3));
  for (double g : elem_gbps) elem.push_back(Timed(SecondsAt(g), SecondsAt(g), SecondsAt(g), 3));
  // One placement (the first): the 16-byte tile is 5% faster.
  EXPECT_LT(vec16[0].median_s, elem[0].median_s);
  // Over the three: the element-size tile.
  const Measurement v = CombinePlacements(vec16), e = CombinePlacements(elem);
  EXPECT_LT(e.median_s, v.median_s);
  EXPECT_NEAR(2.0 * 2 * kGiB / v.median_s / 1e9, 3933, 0.5);
  EXPECT_NEAR(2.0 * 2 * kGiB / e.median_s / 1e9, 3934, 0.5);
}

TEST(MedianOf, OddEvenEmpty) {
  EXPECT_DOUBLE_EQ(MedianOf({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(MedianOf({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(MedianOf({}), 0);
}

}  // namespace
}  // namespace transposed
