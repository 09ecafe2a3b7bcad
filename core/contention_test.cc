// ContentionOf (core/device_load.h): which of a tune's own figures count as evidence of contention.
#include <gtest/gtest.h>

#include <vector>

#include "core/device_load.h"
#include "core/tune_result.h"
#include "testing/problems.h"

namespace transposed {
namespace {

// A valid measurement with the given median and a spread of (max - min) / median = spread.
Measurement Timed(double median_s, double spread) {
  const std::vector<double> samples = {median_s * (1 - spread / 2), median_s,
                                       median_s * (1 + spread / 2)};
  return Measurement::FromSamples(samples, /*warmup=*/1, MeasureMethod{});
}

TuneResult Result(double winner_s, double winner_spread, double ceiling_s, double ceiling_spread) {
  TuneResult r;
  r.problem = MakeTestProblem(4096, 4096, DType::kF32);
  r.best_measurement = Timed(winner_s, winner_spread);
  r.ceiling = Timed(ceiling_s, ceiling_spread);
  return r;
}

TEST(ContentionOf, AWideSpreadOfMemoryBoundSamplesIsEvidence) {
  EXPECT_EQ(ContentionOf(Result(200e-6, 1.5, 180e-6, 0.1)), "winner rel_spread 1.50");
  EXPECT_EQ(ContentionOf(Result(200e-6, 0.1, 180e-6, 1.2)), "ceiling rel_spread 1.20");
  EXPECT_EQ(ContentionOf(Result(200e-6, 0.3, 180e-6, 0.3)), "");
}

// 256x256 f32 on an idle H100: 4 us samples spread 1.9 (winner) and 1.5 (ceiling); launch jitter.
TEST(ContentionOf, TheSpreadOfLaunchBoundSamplesIsNot) {
  EXPECT_EQ(ContentionOf(Result(4e-6, 1.91, 4e-6, 1.51)), "");
  EXPECT_EQ(ContentionOf(Result(kContentionMinSampleSeconds / 2, 5, 8e-6, 61)), "");
  EXPECT_EQ(ContentionOf(Result(kContentionMinSampleSeconds, 1.5, 8e-6, 61)),
            "winner rel_spread 1.50");
}

// The other evidence does not depend on the sample length: a ceiling far below the idle one.
TEST(ContentionOf, ACeilingDropCountsAtAnyLength) {
  const TuneResult r = Result(4e-6, 0, 4e-6, 0);
  const double ceiling = r.ceiling_gbps();
  EXPECT_NE(ContentionOf(r, kContentionRelSpread, 3 * ceiling, 0.5), "");
  EXPECT_EQ(ContentionOf(r, kContentionRelSpread, 1.1 * ceiling, 0.5), "");
}

}  // namespace
}  // namespace transposed
