// The ANSWER_NOW request policy: a configuration for a problem the cache does not have yet, chosen
// at once (no measurement), while the real tune runs in the background.
//
// NearestEntry picks, among stored results of the same device, the one whose problem is nearest:
// the same element size (only that matters to a kernel), the same shape class (tall-skinny:
// cols <= 16; wide-skinny: rows <= 16; otherwise tiled), and the smallest shape distance
// |log2 rows ratio| + |log2 cols ratio| + |log2 batch ratio| + 1 if one has row strides and the
// other not; its winner is used only if it is a valid candidate for the new problem. Without one,
// HeuristicCandidate gives the documented default, always one of the problem's valid candidates:
//   CUDA family (params "algorithm"): `copy` where it is offered (one row or column, the layout
//     unchanged); a skinny problem takes the first skinny configuration;
//     otherwise the tile configuration nearest to 16-byte accesses, an XOR swizzle, no
//     realign/async, 8 warps and a 16 KiB tile (tile64x64 for 4-byte elements).
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
#include "server/service.h"

namespace transposed {

// "tall-skinny", "wide-skinny" or "tiled".
std::string ShapeClass(const Problem& p);

// Distance as above; infinity for different element sizes or shape classes.
double ShapeDistance(const Problem& a, const Problem& b);

// Index into `stored` of the nearest result whose winner is among `valid` (by name), if any. A
// value-exact entry is never picked for a bit-exact problem.
std::optional<size_t> NearestEntry(const Problem& p, const std::vector<TuneResult>& stored,
                                   const std::vector<Candidate>& valid);

// The default for a problem: one of `valid` (which must not be empty).
Candidate HeuristicCandidate(const Problem& p, const std::vector<Candidate>& valid);

}  // namespace transposed
