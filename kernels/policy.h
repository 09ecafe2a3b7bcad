// The transpose family as one constexpr table of named policies, CUB style.
//
// Every member of the family is one row of kFamily: an algorithm, its element size and its
// per-algorithm policy (TilePolicy, SkinnyPolicy; naive and the vendor libraries take none).
// Everything else follows from this one table:
//   enumeration and naming  config.cc: FamilyConfigs(e) lists Policy::Config() of the rows of
//                           element size e, in table order; TransposeConfig::Name() and
//                           Params() print them ("tile64x64.rows4.vec16.swz", "skinny.l512.rows8",
//                           "cublas.geam"), FromName/FromParams look the printed forms up
//                           (transposed/kernels/family.h: no grammar of their own);
//   instantiation           dispatch.cuh: family_e<E>.cu instantiates the kernels of the rows of
//                           element size E (each row's policy becomes the agent's template
//                           arguments), so the host list and the kernels cannot disagree;
//   validity                static_assert below: every tile row's geometry (tile_geometry.h,
//                           packed_realign.h) holds.
// Order matters only for determinism (EnumerateConfigs returns this order).
//
// The rows, in groups per element size: the textbook reference points (naive, tile32x32.rows8
// .pad0/.pad1); 16-byte vector tiles (padded or swizzled); element-size tiles of 512 threads for
// odd sizes; shifted-row realigning tiles (4- and 8-byte elements, offered only where a row is
// misaligned); packed realigning tiles (1- and 2-byte elements, misaligned rows; one tile per
// block, or walking a few down a tile column); persistent cp.async tiles (async2); skinny tiles
// (one side <= 256); the copy (same layout); cuBLAS geam and cuTENSOR's permutation (dlopen'd,
// where present). Why each row exists, with the measurements:
// docs/design/kernel-family.md. A row leaving the table moves to kernels/family_retired.h.
//
// Pure constexpr C++ (no CUDA headers): compiled by config.cc on machines without CUDA. Constant
// data; thread-safe.
#pragma once

#include <cstddef>

#include "kernels/packed_realign.h"
#include "kernels/tile_geometry.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels {

// Shared-memory layout of a tile: `pad` elements after every tile row, or an XOR swizzle of the
// 16-byte units of a row (no padding).
enum class Smem : int { kPad = 0, kSwizzle = 1 };
struct SmemLayout {
  Smem kind = Smem::kPad;
  int pad = 0;
};
constexpr SmemLayout Pad(int elems) { return {Smem::kPad, elems}; }
constexpr SmemLayout Swizzle() { return {Smem::kSwizzle, 0}; }

// A tile_rows x tile_cols tile through shared memory by 32 * block_rows threads.
//   vec_bytes  global access width (0: the element size); 1- and 2-byte elements gathered as
//              words and transposed in registers when vec_bytes > elem.
//   realign    16-byte accesses on rows of any alignment. 1: aligned windows stored at each row's
//              misalignment ("shifted rows", pad layout only), windows gathered per output row
//              element by element. 2 ("packed", 1- and 2-byte elements, rows of 128 or 256
//              bytes, swizzled): windows realigned in registers, columns of equal output
//              misalignment interleaved into shared words, windows gathered as words and
//              transposed in registers (PackedRealignGeometry, packed_realign.h).
//   stages     1: one tile per block, loads staged through registers; 2 or 3: a persistent grid,
//              that many shared buffers filled by cp.async one tile ahead.
struct TilePolicy {
  int elem = 0, tile_rows = 0, tile_cols = 0, block_rows = 0, vec_bytes = 0;
  SmemLayout smem;
  int realign = 0;
  int stages = 1;
  int walk = 0;  // realign 2 only: tiles a block walks down a tile column (0: one per step)

  constexpr bool swizzled() const { return smem.kind == Smem::kSwizzle; }
  constexpr TileGeometry Geometry() const {
    return TileGeometry::Make(elem, tile_rows, tile_cols, block_rows, vec_bytes, smem.pad,
                              swizzled() ? 1 : 0, realign == 1 && !swizzled() ? 1 : 0);
  }
  constexpr PackedRealignGeometry Packed() const {
    return PackedRealignGeometry::Make(elem, tile_rows, block_rows, tile_cols * elem);
  }
  // nullptr when the policy is consistent, else why not.
  constexpr const char* Invalid() const {
    const TileGeometry g = Geometry();
    if (const char* why = g.Invalid()) return why;
    if (realign != 0 && stages != 1) return "realign tiles are synchronous";
    if (walk != 0 && (realign != 2 || walk < 2 || walk > 16))
      return "walks of 2 to 16 tiles are for packed realign tiles";
    if (walk != 0 && !Packed().carry_repeats())
      return "walking tiles need a packed layout that repeats every tile (carried rows)";
    if (realign == 2) {
      if (vec_bytes != 16 || !swizzled() || (tile_cols * elem != 128 && tile_cols * elem != 256))
        return "packed realign tiles are 128- or 256-byte swizzled rows of 16-byte windows";
      return Packed().Invalid();
    }
    if (realign == 1) return g.RealignInvalid();
    if (realign != 0) return "realign must be 0, 1 or 2";
    if (stages != 1) return g.AsyncInvalid(stages);
    return nullptr;
  }
};

// A tile of `len` elements along the long side times the whole narrow side (<= 256 elements;
// the tile is shortened past 16, SkinnyTileLength in skinny_math.h).
struct SkinnyPolicy {
  int elem = 0, len = 0, block_rows = 0;
  constexpr const char* Invalid() const {
    if (len < 16 || len % 16 != 0) return "skinny length must be a positive multiple of 16";
    if (len % (16 / elem) != 0) return "skinny length must be a multiple of the vector";
    if (block_rows < 1 || block_rows > 32) return "skinny block_rows out of range";
    return nullptr;
  }
};

// One row of the family.
struct Policy {
  Algorithm algorithm = Algorithm::kNaive;
  int elem = 0;
  TilePolicy tile;      // algorithm == kTile
  SkinnyPolicy skinny;  // algorithm == kSkinny

  // The printable, parseable name of this row (TransposeConfig::Name()).
  constexpr TransposeConfig Config() const {
    TransposeConfig c;
    c.algorithm = algorithm;
    c.tile_rows = c.tile_cols = c.vec_bytes = c.pad = c.swizzle = c.realign = c.async = 0;
    c.walk = 0;
    c.block_rows = 0;
    switch (algorithm) {
      case Algorithm::kNaive:
        c.block_rows = 8;
        break;
      case Algorithm::kTile:
        c.tile_rows = tile.tile_rows;
        c.tile_cols = tile.tile_cols;
        c.block_rows = tile.block_rows;
        c.vec_bytes = tile.vec_bytes;
        c.pad = tile.smem.pad;
        c.swizzle = tile.swizzled() ? 1 : 0;
        c.realign = tile.realign;
        c.async = tile.stages > 1 ? tile.stages : 0;
        c.walk = tile.walk;
        break;
      case Algorithm::kSkinny:
        c.tile_rows = skinny.len;
        c.block_rows = skinny.block_rows;
        c.vec_bytes = 16;
        break;
      case Algorithm::kCublasGeam:
      case Algorithm::kCutensorPermute:
      case Algorithm::kCopy:
        break;
    }
    return c;
  }

  constexpr const char* Invalid() const {
    if (elem != 1 && elem != 2 && elem != 4 && elem != 8 && elem != 16) return "element size";
    switch (algorithm) {
      case Algorithm::kNaive:
      case Algorithm::kCopy:
        return nullptr;
      case Algorithm::kTile:
        return tile.elem != elem ? "tile element size" : tile.Invalid();
      case Algorithm::kSkinny:
        return skinny.elem != elem ? "skinny element size" : skinny.Invalid();
      case Algorithm::kCublasGeam:
        return elem == 4 || elem == 8 ? nullptr : "cuBLAS geam is used for f32 and f64 only";
      case Algorithm::kCutensorPermute:
        return elem == 4 || elem == 8 ? nullptr
                                      : "cuTENSOR permute is used for f32 and f64 only";
    }
    return "algorithm";
  }
};

// ---- Row builders (the table below reads as the family's list).
constexpr Policy Naive(int e) {
  Policy p;
  p.algorithm = Algorithm::kNaive;
  p.elem = e;
  return p;
}
constexpr Policy TileRow(const TilePolicy& t) {
  Policy p;
  p.algorithm = Algorithm::kTile;
  p.elem = t.elem;
  p.tile = t;
  return p;
}
// Synchronous tile.
constexpr Policy Tile(int e, int rows, int cols, int block_rows, int vec_bytes, SmemLayout s) {
  return TileRow(TilePolicy{e, rows, cols, block_rows, vec_bytes, s, 0, 1});
}
// Realigning 16-byte tile (rows of any alignment).
constexpr Policy Realign(int e, int rows, int cols, int block_rows, SmemLayout s) {
  return TileRow(TilePolicy{e, rows, cols, block_rows, 16, s, 1, 1});
}
// Packed realigning tile: `rows` x `row_bytes` (128 or 256) bytes, 1- and 2-byte elements (rows
// of any alignment).
constexpr Policy PackedRealign(int e, int rows, int block_rows, int row_bytes = 128) {
  return TileRow(TilePolicy{e, rows, row_bytes / e, block_rows, 16, Swizzle(), 2, 1});
}
// Packed realigning tile walking `walk` tiles down a tile column per block (the rows above carried
// from tile to tile, the next tile staged while the current one is written).
constexpr Policy PackedRealignWalk(int e, int rows, int block_rows, int walk, int row_bytes = 128) {
  return TileRow(TilePolicy{e, rows, row_bytes / e, block_rows, 16, Swizzle(), 2, 1, walk});
}
// Persistent swizzled 16-byte tile with `stages` cp.async buffers.
constexpr Policy Async(int e, int rows, int cols, int block_rows, int stages) {
  return TileRow(TilePolicy{e, rows, cols, block_rows, 16, Swizzle(), 0, stages});
}
constexpr Policy Skinny(int e, int len, int block_rows) {
  Policy p;
  p.algorithm = Algorithm::kSkinny;
  p.elem = e;
  p.skinny = SkinnyPolicy{e, len, block_rows};
  return p;
}
// A device-to-device copy, for problems whose input and output have the same layout
// (SameLayoutTransposed, config.h).
constexpr Policy Copy(int e) {
  Policy p;
  p.algorithm = Algorithm::kCopy;
  p.elem = e;
  return p;
}
// cuBLAS geam with op(A) = A^T, alpha 1, beta 0 (Sgeam for f32, Dgeam for f64; CheckConfig
// limits it to those dtypes), loaded at run time; a candidate only where the library is present
// (VendorAvailable in launch.h).
constexpr Policy CublasGeam(int e) {
  Policy p;
  p.algorithm = Algorithm::kCublasGeam;
  p.elem = e;
  return p;
}
// cuTENSOR's permutation B = 1 * A (CUDA_R_32F / CUDA_R_64F; kernels/vendor_layout.h), loaded at
// run time; a candidate only where libcutensor (2.x) is present.
constexpr Policy CutensorPermute(int e) {
  Policy p;
  p.algorithm = Algorithm::kCutensorPermute;
  p.elem = e;
  return p;
}

// clang-format off
inline constexpr Policy kFamily[] = {
    // ---- 1-byte elements: 16 per vector, 4x4 byte transposes in registers.
    Naive(1),
    Copy(1),
    Tile(1, 32, 32, 8, 0, Pad(0)),
    Tile(1, 32, 32, 8, 0, Pad(1)),
    Tile(1, 32, 32, 8, 0, Swizzle()),
    Tile(1, 16, 16, 2, 0, Pad(1)),
    Tile(1, 32, 64, 8, 0, Pad(1)),
    Tile(1, 64, 32, 8, 0, Pad(1)),
    Tile(1, 64, 64, 8, 0, Pad(1)),
    Tile(1, 128, 128, 8, 0, Pad(1)),
    Tile(1, 128, 128, 16, 0, Pad(1)),
    Tile(1, 128, 32, 8, 0, Pad(1)),
    Tile(1, 64, 64, 8, 0, Pad(4)),
    Tile(1, 256, 32, 16, 0, Pad(1)),
    Tile(1, 64, 128, 8, 16, Pad(4)),
    Tile(1, 64, 128, 8, 16, Swizzle()),
    Tile(1, 128, 64, 8, 16, Pad(4)),
    Tile(1, 128, 64, 8, 16, Swizzle()),
    Tile(1, 128, 128, 8, 16, Pad(4)),
    Tile(1, 128, 128, 8, 16, Swizzle()),
    Tile(1, 64, 256, 8, 16, Pad(4)),
    Tile(1, 64, 256, 8, 16, Swizzle()),
    Tile(1, 128, 128, 4, 16, Swizzle()),
    Tile(1, 128, 128, 16, 16, Swizzle()),
    Tile(1, 128, 256, 8, 16, Swizzle()),
    Tile(1, 128, 128, 8, 8, Swizzle()),
    Tile(1, 128, 128, 8, 4, Swizzle()),
    Tile(1, 128, 128, 4, 16, Pad(4)),
    Tile(1, 128, 256, 16, 16, Swizzle()),
    PackedRealign(1, 128, 8),
    PackedRealign(1, 128, 16, 256),
    PackedRealign(1, 256, 16),
    PackedRealign(1, 128, 4),
    PackedRealign(1, 64, 4),
    PackedRealignWalk(1, 64, 4, 2),
    PackedRealignWalk(1, 128, 8, 4),
    Async(1, 128, 128, 4, 2),
    Async(1, 128, 128, 8, 2),
    Skinny(1, 512, 8),
    Skinny(1, 1024, 8),
    Skinny(1, 2048, 8),
    // ---- 2-byte elements: 8 per vector, 2x2 half transposes in registers.
    Naive(2),
    Copy(2),
    Tile(2, 32, 32, 8, 0, Pad(0)),
    Tile(2, 32, 32, 8, 0, Pad(1)),
    Tile(2, 32, 32, 8, 0, Swizzle()),
    Tile(2, 16, 16, 2, 0, Pad(1)),
    Tile(2, 32, 64, 8, 0, Pad(1)),
    Tile(2, 64, 32, 8, 0, Pad(1)),
    Tile(2, 64, 64, 8, 0, Pad(1)),
    Tile(2, 128, 64, 8, 0, Pad(1)),
    Tile(2, 64, 128, 16, 0, Pad(1)),
    Tile(2, 128, 64, 16, 0, Pad(1)),
    Tile(2, 128, 32, 16, 0, Pad(1)),
    Tile(2, 64, 64, 8, 16, Pad(2)),
    Tile(2, 64, 64, 8, 16, Swizzle()),
    Tile(2, 64, 128, 8, 16, Pad(2)),
    Tile(2, 64, 128, 8, 16, Swizzle()),
    Tile(2, 128, 64, 8, 16, Pad(2)),
    Tile(2, 128, 64, 8, 16, Swizzle()),
    Tile(2, 32, 128, 8, 16, Pad(2)),
    Tile(2, 32, 128, 8, 16, Swizzle()),
    Tile(2, 64, 128, 4, 16, Swizzle()),
    Tile(2, 64, 128, 16, 16, Swizzle()),
    Tile(2, 128, 128, 8, 16, Swizzle()),
    Tile(2, 64, 64, 8, 8, Swizzle()),
    Tile(2, 64, 64, 8, 4, Swizzle()),
    Tile(2, 128, 128, 16, 16, Swizzle()),
    Tile(2, 128, 64, 4, 16, Swizzle()),
    Tile(2, 256, 32, 16, 0, Pad(1)),
    PackedRealign(2, 128, 8),
    PackedRealign(2, 64, 4),
    PackedRealign(2, 128, 16, 256),
    PackedRealign(2, 256, 16),
    PackedRealignWalk(2, 64, 4, 2),
    Async(2, 128, 64, 4, 2),
    Async(2, 128, 64, 8, 2),
    Skinny(2, 256, 8),
    Skinny(2, 512, 8),
    Skinny(2, 1024, 8),
    // ---- 4-byte elements: 4 per vector.
    Naive(4),
    Copy(4),
    Tile(4, 32, 32, 8, 0, Pad(0)),
    Tile(4, 32, 32, 8, 0, Pad(1)),
    Tile(4, 32, 32, 8, 0, Swizzle()),
    Tile(4, 16, 16, 2, 0, Pad(1)),
    Tile(4, 32, 64, 8, 0, Pad(1)),
    Tile(4, 64, 32, 8, 0, Pad(1)),
    Tile(4, 64, 64, 8, 0, Pad(1)),
    Tile(4, 64, 64, 4, 0, Pad(1)),
    Tile(4, 64, 64, 16, 0, Pad(1)),
    Tile(4, 32, 32, 8, 16, Pad(1)),
    Tile(4, 32, 32, 8, 16, Swizzle()),
    Tile(4, 64, 64, 8, 16, Pad(1)),
    Tile(4, 64, 64, 8, 16, Swizzle()),
    Tile(4, 32, 64, 8, 16, Pad(1)),
    Tile(4, 32, 64, 8, 16, Swizzle()),
    Tile(4, 64, 32, 8, 16, Pad(1)),
    Tile(4, 64, 32, 8, 16, Swizzle()),
    Tile(4, 64, 64, 4, 16, Swizzle()),
    Tile(4, 64, 64, 16, 16, Swizzle()),
    Tile(4, 64, 128, 8, 16, Swizzle()),
    Tile(4, 64, 64, 8, 8, Swizzle()),
    Tile(4, 64, 64, 4, 16, Pad(1)),
    Tile(4, 128, 64, 8, 16, Swizzle()),
    Tile(4, 64, 128, 4, 16, Swizzle()),
    Tile(4, 32, 32, 4, 16, Swizzle()),
    Tile(4, 128, 32, 16, 0, Pad(1)),
    Tile(4, 128, 16, 16, 0, Pad(1)),
    Tile(4, 64, 32, 16, 0, Pad(1)),
    Realign(4, 64, 32, 8, Pad(2)),
    Async(4, 64, 64, 4, 2),
    Async(4, 64, 64, 8, 2),
    Skinny(4, 128, 8),
    Skinny(4, 256, 8),
    Skinny(4, 512, 8),
    CublasGeam(4),
    CutensorPermute(4),
    // ---- 8-byte elements: 2 per vector.
    Naive(8),
    Copy(8),
    Tile(8, 32, 32, 8, 0, Pad(0)),
    Tile(8, 32, 32, 8, 0, Pad(1)),
    Tile(8, 32, 32, 8, 0, Swizzle()),
    Tile(8, 16, 16, 2, 0, Pad(1)),
    Tile(8, 32, 64, 8, 0, Pad(1)),
    Tile(8, 64, 32, 8, 0, Pad(1)),
    Tile(8, 64, 64, 8, 0, Pad(1)),
    Tile(8, 64, 64, 16, 0, Pad(1)),
    Tile(8, 32, 32, 8, 16, Pad(1)),
    Tile(8, 32, 32, 8, 16, Swizzle()),
    Tile(8, 16, 32, 8, 16, Pad(1)),
    Tile(8, 16, 32, 8, 16, Swizzle()),
    Tile(8, 32, 16, 8, 16, Pad(1)),
    Tile(8, 32, 16, 8, 16, Swizzle()),
    Tile(8, 64, 32, 8, 16, Pad(1)),
    Tile(8, 64, 32, 8, 16, Swizzle()),
    Tile(8, 32, 32, 4, 16, Swizzle()),
    Tile(8, 64, 64, 8, 16, Swizzle()),
    Tile(8, 32, 64, 16, 16, Swizzle()),
    Tile(8, 32, 64, 4, 16, Swizzle()),
    Tile(8, 64, 32, 4, 16, Swizzle()),
    Tile(8, 128, 32, 16, 0, Pad(1)),
    Tile(8, 128, 16, 16, 0, Pad(1)),
    Tile(8, 64, 32, 16, 0, Pad(1)),
    Realign(8, 64, 32, 8, Pad(2)),
    Async(8, 64, 32, 4, 2),
    Async(8, 64, 32, 8, 2),
    Skinny(8, 64, 8),
    Skinny(8, 128, 8),
    Skinny(8, 256, 8),
    CublasGeam(8),
    CutensorPermute(8),
    // ---- 16-byte elements: every access is already 16 bytes.
    Naive(16),
    Copy(16),
    Tile(16, 32, 32, 8, 0, Pad(0)),
    Tile(16, 32, 32, 8, 0, Pad(1)),
    Tile(16, 32, 32, 8, 0, Swizzle()),
    Tile(16, 16, 16, 2, 0, Pad(1)),
    Tile(16, 32, 64, 8, 0, Pad(1)),
    Tile(16, 64, 32, 8, 0, Pad(1)),
    Tile(16, 16, 32, 4, 0, Pad(1)),
    Tile(16, 32, 32, 4, 0, Swizzle()),
    Tile(16, 16, 16, 4, 0, Swizzle()),
    Skinny(16, 64, 8),
    Skinny(16, 128, 8),
};
// clang-format on
inline constexpr size_t kFamilySize = sizeof(kFamily) / sizeof(kFamily[0]);

// Every row is consistent (checked by the compiler, on the host, for every build).
constexpr const char* FirstInvalidRow() {
  for (size_t i = 0; i < kFamilySize; ++i)
    if (kFamily[i].Invalid() != nullptr) return kFamily[i].Invalid();
  return nullptr;
}
static_assert(FirstInvalidRow() == nullptr, "kFamily has an inconsistent row");

}  // namespace transposed::kernels
