// Placements: over how many separate allocations of a problem's buffers one measurement is taken,
// and how the per-allocation figures combine. One rule for the daemon's worker
// (tuner/cuda/gpu_measurer.cu) and the harness's benchmark (bench/transpose_bench.cu), so that the
// figure the daemon stores and the one in docs/ mean the same thing; the CUDA code only allocates
// and times.
//
// Why: on an H200 the same kernel on 2 GiB buffers ran at 3925-4168 GB/s depending on which
// physical memory its buffers got, while a copy of the same bytes did not care
// (docs/design/kernel-family.md, "Buffers"). One allocation's figure is one draw of that: the
// stored figure was a lucky one, and a variant that is fast on some placements only could win on
// one. For a problem whose input/output pair exceeds a few L2 sizes, a measurement asked for
// several placements is timed on that many buffer sets, each allocated while the earlier ones are
// held (so that it gets other memory), its samples split between them, and its figure is the
// MEDIAN of the per-set medians: the typical placement, and a winner chosen by it. Smaller problems
// rotate over several pairs already (harness.h) and keep one set, as does every measurement when
// the extra sets do not fit in the memory left free (the plan then says why, for a log line).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/measurement.h"

namespace transposed {

// The most placements a measurement may ask for (MeasureOptions::placements).
inline constexpr int kMaxPlacements = 8;

struct PlacementRule {
  // Several placements only for a problem whose one input/output pair exceeds this many L2 sizes
  // (the harness's rotation target: smaller problems rotate over several pairs anyway).
  int64_t l2_multiple = 4;
  // The extra sets together may take at most this share of the device memory left free once the
  // first set is allocated (the rest stays for whatever else runs on the device).
  double free_fraction = 0.5;
};

struct PlacementPlan {
  int placements = 1;
  // Non-empty when several placements were asked for a problem big enough for them but they do
  // not fit: why the measurement stays on one (said once per problem in the measurer's log).
  std::string fallback;
};

// How many buffer sets a measurement asking for `wanted` placements gets. pair_bytes: one input
// plus output allocation; set_bytes: one set (all its rotating pairs); l2_bytes: the device's L2;
// free_bytes: device memory free with the first set allocated. All or nothing: either `wanted`
// (clamped to 1..kMaxPlacements) or 1.
PlacementPlan PlanPlacements(int wanted, int64_t pair_bytes, int64_t set_bytes, int64_t l2_bytes,
                             int64_t free_bytes, const PlacementRule& rule = {});

// One set's share of a measurement's options over `placements` sets: warm-up, samples and seconds
// divided between them (rounded up; at least one warm-up launch and one sample per set, since
// every set's buffers are new to the kernel), so that several placements cost about the time of
// one.
MeasureOptions PlacementShare(const MeasureOptions& o, int placements);

// The measurement over several sets: its median is the median of the sets' medians (of two, their
// mean); min and max are the extremes of all samples, samples and warm-ups add up, the method is
// the first set's with `placements` = the number of sets. Invalid (with the first set's error) if
// any set is invalid, or if there is none.
Measurement CombinePlacements(const std::vector<Measurement>& per_set);

// The median of `v` (of an even count, the mean of the middle two); 0 when empty.
double MedianOf(std::vector<double> v);

}  // namespace transposed
