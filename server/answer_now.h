// The ANSWER_NOW request policy: a configuration for a problem the cache does not have yet, chosen
// at once (no measurement), while the real tune runs in the background.
//
// ChooseFirstAnswer (what the service answers) takes NearestEntry's winner, else
// HeuristicCandidate's default. NearestEntry picks, among stored results of the same device, the
// one whose problem is nearest: the same element size (only that matters to a kernel), the same
// shape class, and the smallest shape distance |log2 rows ratio| + |log2 cols ratio| +
// |log2 batch ratio| + 1 if one has row strides and the other not, at most kNearestMaxDistance;
// its winner is used only if it is a valid candidate for the new problem. The shape classes are
// the CUDA family's own (ShapeClass: what kernels::EnumerateConfigs offers the shape), whatever
// the backend. Without a near entry, HeuristicCandidate gives the documented default, always one
// of the problem's valid candidates:
//   CUDA family (params "algorithm"): `copy` where it is offered (one row or column, the layout
//     unchanged); where the skinny path is offered (a side up to 256 elements), the skinny tile
//     whose row along the long side is nearest 1 KiB; otherwise a 16 KiB tile (8 KiB with
//     padding for 1-byte elements) of 8 warps with 16-byte accesses where the rows allow them
//     (plain vectors with an XOR swizzle, or the packed realigning tiles of 1- and 2-byte
//     elements on misaligned rows), else with element-size accesses a tile 32 columns wide of 16
//     warps; never async or the shifted-row realigning tile unless nothing else is offered.
//     Chosen from measured runs of every configuration (bench/data/; the figures and the command
//     that reproduces them: docs/lookups.md, "How good the first answer is").
//   CPU backend: the SIMD candidate (params "isa", "block" or "wrun"/"rrun", "threads", "nt") of
//     the widest ISA with the most threads, the 1024 x 512-byte column walk (else square blocks
//     of 4 micro-tiles) and streaming stores where offered; without SIMD candidates the
//     32-element cache-blocked tile with the most threads.
//   anything else: the backend's first candidate.
// Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/tune_result.h"

namespace transposed {

// The family's shape class: "copy" (the copy member is offered), "tall-skinny" / "wide-skinny"
// (the skinny path is offered; kernels::SkinnyIsTall says which side it takes as narrow),
// "tiled-misaligned" (the realigning tiles are offered: some row is not 16-byte aligned) or
// "tiled".
std::string ShapeClass(const Problem& p);

// How far a stored problem may be for its winner to answer: beyond it the default is the better
// guess (measured with bench/answer_eval: docs/lookups.md, "How good the first answer is").
inline constexpr double kNearestMaxDistance = 2;

// Distance as above; infinity for different element sizes or shape classes.
double ShapeDistance(const Problem& a, const Problem& b);

// Index into `stored` of the nearest result whose winner is among `valid` (by name), if any. A
// value-exact entry is never picked for a bit-exact problem.
std::optional<size_t> NearestEntry(const Problem& p, const std::vector<TuneResult>& stored,
                                   const std::vector<Candidate>& valid);

// The default for a problem: one of `valid` (which must not be empty).
Candidate HeuristicCandidate(const Problem& p, const std::vector<Candidate>& valid);

// The ANSWER_NOW answer as the daemon gives it: the nearest entry's winner, else the default.
// `valid` must not be empty. The one function the service and the evaluation (bench/answer_eval)
// both call, so that what is measured is what is served.
struct FirstAnswer {
  Candidate candidate;
  AnswerSource source = AnswerSource::kHeuristic;  // kNearest or kHeuristic
  std::optional<size_t> nearest;                   // index into `stored` for kNearest
};
FirstAnswer ChooseFirstAnswer(const Problem& p, const std::vector<TuneResult>& stored,
                              const std::vector<Candidate>& valid);

}  // namespace transposed
