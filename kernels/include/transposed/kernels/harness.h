// The one measurement harness of the project: how a transpose (or a copy) is timed on a GPU.
// The daemon's worker (tuner/cuda/gpu_measurer.cu) and transpose_bench both time through it, so the
// numbers the daemon stores and the numbers in docs/ mean the same thing.
//
// Method. RotatingBuffers holds N input/output pairs of one problem, N chosen so that the pairs
// together exceed HarnessOptions::l2_multiple x the device's L2 (at least 2 pairs; capped by
// max_rotation_bytes and a fraction of free memory), filled with random bytes (never zeros).
// TimeLaunches() runs `warmup` untimed launches, then samples: each sample is k back-to-back
// launches on successive pairs between two CUDA events, k chosen from the warm-up so a sample
// lasts at least min_sample_seconds; the sample's time / k is one per-launch time. Samples are
// taken until min_samples and min_seconds are both reached (or max_samples). With a cutoff
// (TimingOptions::cutoff_s), a launch already slower than it in the warm-up is reported by the
// warm-up alone: the tuner's quick pass screens candidates that are out of the race that way.
// Placements. For a problem beyond a few L2 sizes one set of pairs is one draw of physical memory
// (on an H200 the same kernel at 2 GiB ran 6% apart on two allocations), so a measurement may be
// taken over several sets allocated while the earlier are held (PlacementSets below), by the rule
// of core/placements.h: the median of the sets' medians.
//
// Thread-safety: none; one thread uses a RotatingBuffers / PlacementSets / EventPool at a time.
// Only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"

namespace transposed::kernels {

struct HarnessOptions {
  // The pairs together exceed this many times the L2 size.
  int64_t l2_multiple = 4;
  // Rotation buffers are capped at min(max_rotation_bytes, max_free_fraction * free memory).
  int64_t max_rotation_bytes = int64_t{4} << 30;
  double max_free_fraction = 0.4;
  // false: no reference output nor check counters (a set that is only timed: the extra buffer
  // placements of core/placements.h); the check functions then fail.
  bool reference = true;
};

struct TimingOptions {
  int warmup = 3;            // untimed launches first
  int min_samples = 15;      // timed samples: at least this many...
  double min_seconds = 0.02; // ...and at least this much timed time in total
  int max_samples = 10000;   // hard cap
  // A sample spans back-to-back launches until it lasts at least this long (at most
  // max_launches_per_sample), so that tiny kernels are not dominated by event resolution.
  double min_sample_seconds = 50e-6;
  int max_launches_per_sample = 64;
  // Screening (0: off; MeasureOptions::cutoff_s): when the warm-up's launches took at least this
  // long each, and long enough to be timed alone (min_sample_seconds), no sample follows: the
  // Timing holds their mean as its one sample, warmup 0 and screened true.
  double cutoff_s = 0;
};

struct Timing {
  std::vector<double> samples_s;  // per-launch seconds, in the order taken
  int warmup = 0;
  int launches_per_sample = 1;
  bool screened = false;  // the one sample is the warm-up's (TimingOptions::cutoff_s)
  // Host wall time of the warm-up (launches, then waiting for them) and of the samples, and the
  // device time the samples measured (sum of samples x launches): the rest is the harness's own.
  double warmup_wall_s = 0;
  double samples_wall_s = 0;
  double timed_s = 0;
  double median_s() const;
  double min_s() const;
};

// Rotating input/output pairs of one problem on the current device, plus a reference output.
class RotatingBuffers {
 public:
  ~RotatingBuffers();
  RotatingBuffers(const RotatingBuffers&) = delete;
  RotatingBuffers& operator=(const RotatingBuffers&) = delete;

  // Allocates and fills the pairs on `stream` (synchronised before returning).
  // RESOURCE_EXHAUSTED when one pair plus the reference does not fit in 90% of free memory.
  static StatusOr<std::unique_ptr<RotatingBuffers>> Create(const Problem& p, cudaStream_t stream,
                                                           const HarnessOptions& o = {});

  int pairs() const { return static_cast<int>(in_.size()); }
  void* in(int i) const { return in_[i]; }
  void* out(int i) const { return out_[i]; }
  void* reference() const { return ref_; }
  const Problem& problem() const { return problem_; }
  // Bytes of all pairs (inputs and outputs, leading-dimension gaps included).
  int64_t working_set_bytes() const;
  int64_t l2_bytes() const { return l2_bytes_; }

  // The set-up of bit-exact checks, in two steps: PrepareReference puts fresh random input in
  // pair 0 and its reference output (LaunchReference; random gap bytes) in reference(), once for
  // any number of checks; PoisonOutput, before each check, sets pair 0's output to ~reference on
  // the elements and to the reference's gap bytes between rows (whatever ran there before).
  // PrepareCheck does both. Each synchronises `stream`.
  Status PrepareReference(uint64_t seed, cudaStream_t stream);
  Status PoisonOutput(cudaStream_t stream);
  Status PrepareCheck(uint64_t seed, cudaStream_t stream);
  // Compares pair 0's output with the reference bit-exactly (matrix bytes equal, gap bytes
  // untouched); FAILED_PRECONDITION naming the first mismatch (batch, row, column). nan_equal:
  // NaNs compare equal whatever their payloads (members with canonicalizes_nan(), f32/f64).
  Status CompareCheck(cudaStream_t stream, bool nan_equal = false);

 private:
  RotatingBuffers() = default;
  Problem problem_;
  std::vector<void*> in_, out_;
  void* ref_ = nullptr;
  unsigned long long* counters_ = nullptr;  // CompareCheck's mismatch count and first byte
  int64_t l2_bytes_ = 0;
};

// The buffer sets of one problem for measurements over several placements (core/placements.h):
// set 0 is the caller's (with the reference of the checks), sets 1.. are allocated on the first
// Ensure that asks for more, each while the earlier ones are held, so that each gets other memory,
// and kept until destroyed. Ensure plans with PlanPlacements and falls back to set 0 alone when
// the extra sets do not fit (the plan's fallback says why) or their allocation fails.
class PlacementSets {
 public:
  explicit PlacementSets(const RotatingBuffers* first) : first_(first) {}
  // The sets a measurement asking for `wanted` placements uses (1, or the planned count, decided
  // once: later asks for more reuse the plan). *fallback (if given) receives the plan's reason
  // when the first ask falls back to one, else is left alone. Errors: CUDA failures other than
  // an allocation that does not fit.
  StatusOr<int> Ensure(int wanted, cudaStream_t stream, std::string* fallback = nullptr);
  const RotatingBuffers& set(int i) const { return i == 0 ? *first_ : *extra_[i - 1]; }
  int sets() const { return 1 + static_cast<int>(extra_.size()); }
  bool planned() const { return planned_; }

 private:
  const RotatingBuffers* first_;
  std::vector<std::unique_ptr<RotatingBuffers>> extra_;
  bool planned_ = false;
};

// Events for TimeLaunches, created once.
class EventPool {
 public:
  ~EventPool();
  static StatusOr<std::unique_ptr<EventPool>> Create(int events = 257);
  cudaEvent_t operator[](int i) const { return events_[i]; }
  int size() const { return static_cast<int>(events_.size()); }

 private:
  EventPool() = default;
  std::vector<cudaEvent_t> events_;
};

// Times launch(pair) on `stream`, the pairs taken round robin from *rotate (advanced), as the
// header comment describes. launch must only enqueue work (no synchronisation).
StatusOr<Timing> TimeLaunches(const std::function<Status(int pair)>& launch, int pairs,
                              uint64_t* rotate, cudaStream_t stream, const EventPool& events,
                              const TimingOptions& o);

// The copy ceilings of the harness: cudaMemcpyAsync device-to-device of the problem's bytes
// (pair i's input to its output), and a 16-byte-per-thread copy kernel of the same bytes.
Status LaunchMemcpy(const RotatingBuffers& b, int pair, cudaStream_t stream);
Status LaunchCopy16(const RotatingBuffers& b, int pair, cudaStream_t stream);

}  // namespace transposed::kernels
