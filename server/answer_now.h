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
//     unchanged); where the skinny path is offered (a side up to 256 elements), a skinny tile
//     (SkinnyScore) on a grid that is not small when the problem is tall with 16-byte aligned
//     output rows, or wide with elements of at most kSkinnyWideMaxElemBytes, or its narrow side
//     is at most kSkinnyFirstMaxBytes and its 16 KiB tile keeps segments of
//     kSkinnyMinSegmentBytes (1-byte elements: below 256), else a tile as below; otherwise a
//     16 KiB tile (8 KiB with
//     padding for 1-byte elements) of 8 warps with 16-byte accesses where the rows allow them
//     (plain vectors with an XOR swizzle, or the packed realigning tiles of 1- and 2-byte
//     elements on misaligned rows, for 1-byte elements only on kPackedRealignMinTiles of them,
//     else the element-size 64 x 64 tile padded by one element; 8-byte elements below
//     kVectorF64MinBytes take element-size accesses), else with element-size accesses a tile
//     32 columns wide of 16 warps; never async or the shifted-row realigning tile unless nothing else is offered; on a small grid (no
//     16-byte tile has kMinGridTiles tiles) the element-size 32 x 32 tile of 8 warps.
//     Chosen from measured runs of every configuration (bench/data/, the runs' kernels/*_all.csv
//     and first-answer stages; the figures and the command that reproduces them:
//     docs/lookups.md, "How good the first answer is").
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

// The skinny path's geometry for a problem and a skinny member of nominal length `len` (the
// config's l<LEN>), from the family's own functions (kernels::SkinnyIsTall, SkinnyTileLength,
// SkinnyMaxSide): the narrow side in bytes, the tile's bytes as the kernel is instantiated
// (effective length x the instantiated narrow side x element size: the shared memory and the
// per-thread window count follow it), and how many tiles (thread blocks) the grid has.
struct SkinnyShape {
  bool tall = false;
  int64_t narrow_bytes = 0, tile_bytes = 0, tiles = 0;
  int64_t instantiated_side = 0;  // the narrow side the kernel is instantiated for (4..256)
  bool strided_aligned = false;    // the strided side's rows (tall: output, wide: input) are
                                   // 16-byte aligned
};
SkinnyShape SkinnyShapeOf(const Problem& p, int64_t len);

// Measured boundaries of the default (H100 and H200, driver 580.159.04, 2026-11-27; the runs'
// kernels/*_all.csv and first_answer/ logs, bench/data/):
//  - skinny before the tiles on a tall problem whose output rows (the long side, moved as
//    16-byte windows) are 16-byte aligned, and on a wide one of elements of at most
//    kSkinnyWideMaxElemBytes, whatever the side (issue 26 item 5: 63 problems of narrow side
//    67-256 on an H200, 12 of them on an H100, 2026-11-27; docs/lookups.md): tall aligned u8 to
//    f64 sides of 67-250 and wide 1- to 4-byte sides of 96-255 ran their best skinny tile at
//    0.95-1.00 of the winner (the answered one 0.86-1.00) where the tile answered 0.34-0.94;
//    1-byte elements only below 256 (300000x256 and
//    256x300000 u8 ran skinny 0.91 / 0.86 of the 8 KiB vector tile). Otherwise (tall with
//    misaligned output rows, wide 8- and 16-byte elements: 100x100000 f64 skinny 0.90,
//    8x160x10000 f64 0.78 of the tile):
//  - skinny before the tiles only while the narrow side is at most 512 bytes: f32 sides of 27-124
//    elements (108-496 B) ran skinny 1.00 with the best tile at 0.50-0.96; at 136 f32 (544 B)
//    and f64 sides of 104-233 (832-1864 B), batched, the tile won and skinny reached 0.54-0.96;
inline constexpr int64_t kSkinnyFirstMaxBytes = 512;
//  - and only while a 16 KiB tile as instantiated keeps segments of at least 128 bytes along
//    the long side (a narrow side of at most 128 elements): 6333x151 i16 batch 4 (302 bytes,
//    64-byte segments) ran skinny at 0.76 of tile64x64.rows4.vec16.realign2 through the daemon
//    (H100, seed 610426143), as the 64-byte segments of f64 sides of 151-233 (0.54-0.69) did;
inline constexpr int64_t kSkinnyMinSegmentBytes = 128;
// The widest element (bytes) of the wide direction's skinny answer whatever the side (above).
inline constexpr int64_t kSkinnyWideMaxElemBytes = 4;
//  - and not on a small grid: where no 16-byte tile reaches 256 tiles (4730x75 f16: 148 at
//    most, skinny ones 148 at most too) the element-size 32 x 32 tile answers (1.00 through the
//    daemon on the H100, where the skinny l512 tile of 74 tiles ran 0.73). A skinny grid smaller
//    than that beside a larger tile grid is no reason: 7889x12 bf16 batch 8 ran skinny.l256 (248
//    tiles) as the winner, and the packed realigning tile answered there at 0.58;
inline constexpr int64_t kMinGridTiles = 256;
//  - below 512 tiles a skinny tile counts as further from its ideal size: 1048576x8 i8 ran the
//    32 KiB tile (256 tiles) at 0.88-0.94 of the 16 KiB one (512 tiles), 201x2349 u8 batch 4 the
//    16 KiB one (148 tiles) at 0.81 of the 8 KiB one (296), 8388x36 f64 262 tiles at 0.90-0.95
//    of 525;
inline constexpr int64_t kSkinnyFullTiles = 512;
//  - 8-byte elements with aligned rows below 64 MiB: the element-size 16-warp tile
//    (536x5152 f64, 22 MB: the 16-byte vector tile reached 0.90-0.94 of tile64x32.rows16.pad1 /
//    tile16x16.rows2.pad1; at 153 MB-1.2 GB they are within 0-3%).
inline constexpr int64_t kVectorF64MinBytes = int64_t{64} << 20;

//  - 1-byte elements on misaligned rows: the packed realigning tile of 16 KiB only where its grid
//    has at least 1600 tiles, else the element-size 64 x 64 tile padded by one element
//    (tile64x64.rows8.pad1): at 792-1440 tiles of the packed tile (4097x3001 i8 on every run,
//    2781x6589, 1115x16533 and 969x23035 u8) it ran 0.96-1.00 of the winner (usually the same
//    tile padded by 4 bytes: 0.86-1.00), the packed tile 0.87-0.98; at 1780 (89x543x510 u8) 0.98
//    and 0.99; from 1794 (9891x2837, 34x1668x464, 19373x1545, 5589x6923 u8) the packed tile won
//    and the padded one ran 0.84-0.92. 10312x181 u8 batch 2 (324 packed tiles) ran the packed
//    tile at 0.69 of tile64x32.rows8.pad1 through the daemon (H200, seed 2564063369).
inline constexpr int64_t kPackedRealignMinTiles = 1600;

// The default's order among the skinny members (lower first): a tile of 16 KiB as instantiated,
// 32 KiB in the tall direction with a narrow side of at most 16 elements (the tall tile keeps
// its shared memory whatever the side: tall sides of 5-12 ran the 32 KiB tile 1.00 and the
// 16 KiB one 0.84-0.95; wide sides of 9-16 ran the 32 KiB one 0.44-0.75 on 2- and 8-byte
// elements), 0.1 per octave away; 0.2 per octave of tiles below kSkinnyFullTiles; after every
// tile (score 50 and more) unless the boundaries above hold. `small_grid`: no 16-byte tile of
// the problem reaches kMinGridTiles tiles.
double SkinnyScore(const Problem& p, int64_t len, bool small_grid);

// Tiles (thread blocks) of a tile_rows x tile_cols tile's grid on `p`.
int64_t TileGrid(const Problem& p, int64_t tile_rows, int64_t tile_cols);

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
