#include "server/answer_now.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/skinny_math.h"
#include "transposed/kernels/family.h"

namespace transposed {
namespace {

double Log2Ratio(double a, double b) { return std::fabs(std::log2(a / b)); }

int64_t Param(const Candidate& c, const char* key, int64_t otherwise) {
  auto it = c.params.find(key);
  return it == c.params.end() ? otherwise : it->second;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

SkinnyShape SkinnyShapeOf(const Problem& p, int64_t nominal_length) {
  // The family's own geometry (kernels/skinny_math.h): which side the kernel takes as narrow,
  // the effective tile length for that side, and the narrow side the kernel is instantiated for.
  const bool tall = kernels::SkinnyIsTall(p);
  const int64_t n = tall ? p.cols : p.rows, long_side = tall ? p.rows : p.cols;
  const int64_t length = kernels::SkinnyTileLength(static_cast<int>(nominal_length), n, tall);
  SkinnyShape s;
  s.tall = tall;
  s.narrow_bytes = n * p.elem_size();
  s.instantiated_side = kernels::SkinnyMaxSide(n);
  s.tile_bytes = length * s.instantiated_side * p.elem_size();
  s.tiles = CeilDiv(long_side, length) * p.batch;
  // The strided side: the output's long rows in the tall direction (moved as 16-byte windows
  // around each segment: kernels::SegmentWindows), the input's in the wide one.
  s.strided_aligned = (tall ? p.out_ld() : p.in_ld()) * p.elem_size() % 16 == 0;
  return s;
}

double SkinnyScore(const Problem& p, int64_t nominal_length, bool small_grid) {
  const SkinnyShape s = SkinnyShapeOf(p, nominal_length);
  // Before every tile on a grid that is not small while:
  //  - tall, with the output's long rows 16-byte aligned (whole 16-byte windows), whatever the
  //    element size and side;
  //  - wide, with elements of at most kSkinnyWideMaxElemBytes, whatever the side;
  //  - otherwise while the narrow side is narrow (in bytes, and in elements: a 16 KiB tile as
  //    instantiated keeps its long-side segments at least kSkinnyMinSegmentBytes);
  //  and for 1-byte elements below the family's widest side (256 aligned bytes: the 8 KiB
  //  vector tile's). Else after every tile (still the answer where no tile is offered).
  const bool narrow = s.narrow_bytes <= kSkinnyFirstMaxBytes &&
                      16384 / s.instantiated_side >= kSkinnyMinSegmentBytes;
  const bool wide_small = !s.tall && p.elem_size() <= kSkinnyWideMaxElemBytes;
  const bool full_u8 = p.elem_size() == 1 && s.narrow_bytes >= kernels::kSkinnyMaxSide;
  const bool first =
      !small_grid && !full_u8 && ((s.tall && s.strided_aligned) || wide_small || narrow);
  const bool long_tile = s.tall && s.narrow_bytes <= 16 * p.elem_size();
  const double target = long_tile ? 32768 : 16384;
  double score = (first ? -1 : 50) + 0.1 * Log2Ratio(static_cast<double>(s.tile_bytes), target);
  if (s.tiles < kSkinnyFullTiles)
    score += 0.2 * std::log2(static_cast<double>(kSkinnyFullTiles) / static_cast<double>(s.tiles));
  return score;
}

std::string ShapeClass(const Problem& p) {
  // What the family offers this shape decides its class (kernels::CheckConfig: the one place
  // that says which algorithms a shape takes), so the classes follow the family. Only the
  // members that decide a class are checked: this runs for each near stored entry.
  bool copy = false, skinny = false, realign = false;
  for (const kernels::TransposeConfig& c : kernels::FamilyConfigs(p.elem_size())) {
    bool* offered = c.algorithm == kernels::Algorithm::kCopy     ? &copy
                    : c.algorithm == kernels::Algorithm::kSkinny ? &skinny
                    : c.realign != 0                             ? &realign
                                                                 : nullptr;
    if (offered != nullptr && !*offered) *offered = kernels::CheckConfig(c, p).ok();
  }
  if (copy) return "copy";
  if (skinny) return kernels::SkinnyIsTall(p) ? "tall-skinny" : "wide-skinny";
  return realign ? "tiled-misaligned" : "tiled";
}

namespace {

// ShapeDistance less the element size and class checks.
double ShapeOnlyDistance(const Problem& a, const Problem& b) {
  double d = Log2Ratio(static_cast<double>(a.rows), static_cast<double>(b.rows)) +
             Log2Ratio(static_cast<double>(a.cols), static_cast<double>(b.cols)) +
             Log2Ratio(static_cast<double>(a.batch), static_cast<double>(b.batch));
  if (a.dense() != b.dense()) d += 1;
  return d;
}

}  // namespace

double ShapeDistance(const Problem& a, const Problem& b) {
  if (a.elem_size() != b.elem_size() || ShapeClass(a) != ShapeClass(b))
    return std::numeric_limits<double>::infinity();
  return ShapeOnlyDistance(a, b);
}

std::optional<size_t> NearestEntry(const Problem& p, const std::vector<TuneResult>& stored,
                                   const std::vector<Candidate>& valid) {
  std::optional<size_t> best;
  double best_d = std::numeric_limits<double>::infinity();
  const bool bit_exact = p.Normalized().exactness == Exactness::kBit;
  const std::string shape_class = ShapeClass(p);
  for (size_t i = 0; i < stored.size(); ++i) {
    const Problem& q = stored[i].problem;
    // A value-exact entry's winner is never an answer to a bit-exact problem (a bit-exact one is
    // an answer to either).
    if (bit_exact && q.Normalized().exactness != Exactness::kBit) continue;
    if (q.elem_size() != p.elem_size()) continue;
    const double d = ShapeOnlyDistance(p, q);
    if (!(d < best_d) || d > kNearestMaxDistance) continue;
    const std::string& name = stored[i].best.name;
    if (std::none_of(valid.begin(), valid.end(),
                     [&](const Candidate& c) { return c.name == name; }))
      continue;
    if (ShapeClass(q) != shape_class) continue;  // last: it enumerates the family
    best_d = d;
    best = i;
  }
  return best;
}

int64_t TileGrid(const Problem& p, int64_t tile_rows, int64_t tile_cols) {
  return CeilDiv(p.rows, tile_rows) * CeilDiv(p.cols, tile_cols) * p.batch;
}

Candidate HeuristicCandidate(const Problem& p, const std::vector<Candidate>& valid) {
  // A small grid: no synchronous tile of 16-byte accesses (vectors, or 16-byte elements)
  // reaches kMinGridTiles tiles.
  bool small_grid = true;
  for (const Candidate& c : valid) {
    if (kernels::FamilyAlgorithm(c.params) == kernels::Algorithm::kTile &&
        std::max<int64_t>(Param(c, "vec_bytes", 0), p.elem_size()) >= 16 &&
        Param(c, "async", 0) == 0 &&
        TileGrid(p, Param(c, "tile_rows", 32), Param(c, "tile_cols", 32)) >= kMinGridTiles) {
      small_grid = false;
      break;
    }
  }
  // 1-byte elements on misaligned rows: the packed realigning tile of 16 KiB only on a grid of
  // at least kPackedRealignMinTiles of its tiles, else the element-size 64 x 64 tile padded
  // by one element (a small_packed grid).
  int64_t packed_tiles = 0;
  if (p.elem_size() == 1) {
    for (const Candidate& c : valid) {
      const int64_t rows = Param(c, "tile_rows", 32), cols = Param(c, "tile_cols", 32);
      if (kernels::FamilyAlgorithm(c.params) == kernels::Algorithm::kTile &&
          Param(c, "realign", 0) == 2 && rows * cols == 16384)
        packed_tiles = std::max(packed_tiles, TileGrid(p, rows, cols));
    }
  }
  const bool small_packed = packed_tiles > 0 && packed_tiles < kPackedRealignMinTiles;
  const Candidate* pick = nullptr;
  double best = std::numeric_limits<double>::infinity();
  auto consider = [&](const Candidate& c, double score) {
    if (score < best) best = score, pick = &c;
  };
  for (const Candidate& c : valid) {
    if (Param(c, "test_fault", 0) != 0) continue;
    // The CUDA family's member this candidate runs, if it is one (kernels' host lookup).
    const std::optional<kernels::Algorithm> cuda = kernels::FamilyAlgorithm(c.params);
    if (cuda == kernels::Algorithm::kCopy) {
      consider(c, -2);  // CUDA copy: offered only where the layout does not change, a copy's speed
    } else if (cuda == kernels::Algorithm::kSkinny) {
      // CUDA skinny (offered only where the family's skinny path takes the shape): SkinnyScore.
      consider(c, SkinnyScore(p, Param(c, "tile_rows", 256), small_grid));
    } else if (cuda == kernels::Algorithm::kTile) {
      // CUDA tile, in this order: 16-byte global accesses (plain or packed-realigning vectors;
      // element-size accesses of 16-byte elements), element-size accesses of 4- and 8-byte
      // elements, narrower vectors, the shifted-row realigning tile, 1- and 2-byte element
      // accesses; then an XOR swizzle (padding for 1-byte elements), one tile per block, 8
      // warps and a 16 KiB tile (8 KiB for 1-byte elements, except the packed realigning
      // tiles: their 8 KiB u8 tile beat the 16 KiB one on some shapes only, measured on the
      // H200 only; docs/design/kernel-family.md), or with element-size accesses 16 warps and
      // 32 columns.
      const int64_t e = p.elem_size();
      const int64_t vec = Param(c, "vec_bytes", 0), realign = Param(c, "realign", 0);
      const bool element_access = vec == 0 || vec <= e;
      double access = 0;
      if (realign == 1)
        access = 3;
      else if (element_access)
        access = e >= 16 ? 0 : e >= 4 ? 1 : 4;
      else if (vec != 16)
        access = 2;
      else if (e == 8 && p.bytes() < kVectorF64MinBytes)
        access = 2;  // below kVectorF64MinBytes 8-byte elements: element-size accesses first
      const double tile_bytes =
          static_cast<double>(Param(c, "tile_rows", 32) * Param(c, "tile_cols", 32) * e);
      const bool swizzled = Param(c, "swizzle", 0) == 1;
      const bool async_or_shift = Param(c, "async", 0) != 0 || realign == 1;
      // Walking packed tiles after their one-tile siblings, whatever the problem: they won on
      // 3 of 26 odd 1- and 2-byte problems of 1-16 MiB and lost 9-35 points on every larger one
      // (H200, docs/design/kernel-family.md), a pattern no rule here follows yet.
      const double walk = Param(c, "walk", 0) != 0 ? 1.5 : 0;
      const double score = access + walk + (swizzled == (e != 1) ? 0 : 0.5) +
                           (Param(c, "async", 0) != 0 ? 2 : 0) +
                           0.25 * Log2Ratio(static_cast<double>(Param(c, "block_rows", 8)),
                                            element_access && e < 16 ? 16 : 8) +
                           Log2Ratio(tile_bytes, e == 1 && realign != 2 ? 8192 : 16384) +
                           (element_access && e < 16 && Param(c, "tile_cols", 32) != 32 ? 0.5 : 0);
      if (small_packed && !small_grid) {
        // The element-size 64 x 64 tile of 8 warps padded by one element; vectors after it.
        consider(c, (element_access ? 0 : 4) + (async_or_shift ? 2 : 0) + walk +
                        Log2Ratio(static_cast<double>(Param(c, "tile_rows", 32)), 64) +
                        Log2Ratio(static_cast<double>(Param(c, "tile_cols", 32)), 64) +
                        0.25 * Log2Ratio(static_cast<double>(Param(c, "block_rows", 8)), 8) +
                        (!swizzled && Param(c, "pad", 0) == 1 ? 0 : 0.5));
        continue;
      }
      if (small_grid) {
        // A small grid: the element-size 32 x 32 tile of 8 warps (swizzled but for 1-byte
        // elements), whatever the element size; 16-byte accesses after it.
        consider(c, (element_access ? 0 : 4) + walk + (swizzled == (e != 1) ? 0 : 0.5) +
                        Log2Ratio(static_cast<double>(Param(c, "tile_rows", 32) *
                                                      Param(c, "tile_cols", 32)),
                                  32 * 32) +
                        0.25 * Log2Ratio(static_cast<double>(Param(c, "block_rows", 8)), 8) +
                        (Param(c, "async", 0) != 0 ? 2 : 0) + (realign != 0 ? 1 : 0));
        continue;
      }
      consider(c, score);
    } else if (!cuda && c.params.count("isa") != 0) {
      // CPU SIMD: the widest ISA, all threads, the 1024 x 512-byte column walk (else 4
      // micro-tiles a side), streaming stores where offered (docs/design/cpu-backend.md: the
      // usual winners).
      const double threads = static_cast<double>(std::max<int64_t>(1, Param(c, "threads", 1)));
      const double layout =
          c.params.count("wrun") != 0
              ? -0.1 + 0.25 * Log2Ratio(static_cast<double>(std::max<int64_t>(64, Param(c, "wrun", 1024))), 1024) +
                    0.25 * Log2Ratio(static_cast<double>(std::max<int64_t>(64, Param(c, "rrun", 512))), 512)
              : 0.25 * Log2Ratio(static_cast<double>(std::max<int64_t>(1, Param(c, "block", 4))), 4);
      consider(c, 5 - static_cast<double>(Param(c, "isa", 0)) - 0.01 * std::log2(threads) +
                      layout - 0.05 * static_cast<double>(Param(c, "nt", 0)));
    } else if (!cuda && Param(c, "tile", 0) > 0) {
      // CPU: tile 32, then the most threads.
      const double threads = static_cast<double>(std::max<int64_t>(1, Param(c, "threads", 1)));
      consider(c, 10 + Log2Ratio(static_cast<double>(Param(c, "tile", 32)), 32) -
                      0.01 * std::log2(threads));
    }
  }
  if (pick == nullptr) {
    for (const Candidate& c : valid)
      if (Param(c, "test_fault", 0) == 0) return c;
    return valid.front();
  }
  return *pick;
}

FirstAnswer ChooseFirstAnswer(const Problem& p, const std::vector<TuneResult>& stored,
                              const std::vector<Candidate>& valid) {
  FirstAnswer a;
  a.nearest = NearestEntry(p, stored, valid);
  if (a.nearest.has_value()) {
    a.source = AnswerSource::kNearest;
    a.candidate = stored[*a.nearest].best;
  } else {
    a.source = AnswerSource::kHeuristic;
    a.candidate = HeuristicCandidate(p, valid);
  }
  return a;
}

}  // namespace transposed
