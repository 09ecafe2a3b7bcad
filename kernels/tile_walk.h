// Where a tile is and which tile comes next: the order of the one-tile-per-block walk
// (TilesDownFirst), the byte offsets of an element in core/problem.h's input and output layouts,
// and the persistent grid's tile cursor. Checked on the CPU by kernels/tile_walk_test.cc.
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace transposed::kernels {

// ---- Order of the one-tile-per-block walk. Tiles (ty, tx) and (ty + 1, tx) share the partly
// written 32-byte sectors at both ends of their output row segments when rows are odd, and
// (ty, tx) and (ty, tx + 1) the partly read sectors of their input rows; the walk should bring
// neighbours close enough together that the shared sectors are still in L2. Down first (grid x
// along the tile rows): output rows are written front to back, input neighbours are ntr tiles
// apart; across first: output neighbours are ntc tiles apart. Down first wherever it keeps the
// input neighbours within kDownFirstBytes of traffic (in + out), or where ntc > ntr anyway
// (measurements: docs/design/kernel-family.md, "The tile walk").
inline constexpr int64_t kDownFirstBytes = int64_t{16} << 20;
TR_HD constexpr bool TilesDownFirst(int64_t ntr, int64_t ntc, int64_t tile_bytes) {
  return ntc > ntr || 2 * ntr * tile_bytes <= kDownFirstBytes;
}

// ---- Global offsets (bytes, 64-bit) of core/problem.h's layout.
// Input element (r, c) of batch entry z (rows x cols, leading dimension ldi elements).
TR_HD constexpr int64_t InputOffset(int64_t z, int64_t r, int64_t c, int64_t rows, int64_t ldi,
                                    int e) {
  return ((z * rows + r) * ldi + c) * e;
}
// Where input element (r, c) of batch entry z lands: output row c, column r (cols x rows,
// leading dimension ldo elements).
TR_HD constexpr int64_t OutputOffset(int64_t z, int64_t r, int64_t c, int64_t cols, int64_t ldo,
                                     int e) {
  return ((z * cols + c) * ldo + r) * e;
}

// The tile walk of a persistent grid: tiles in order (tile columns fastest, then tile rows, then
// batch entries); block b starts at tile b and advances by `step` (the grid size) tiles without a
// division per tile (64-bit divisions per tile made a first version issue-bound).
struct TileCursor {
  int64_t z = 0, ty = 0, tx = 0;

  TR_HD static constexpr TileCursor Start(int64_t tile, int64_t ntr, int64_t ntc) {
    TileCursor c;
    const int64_t per_batch = ntr * ntc;
    c.z = tile / per_batch;
    const int64_t rem = tile - c.z * per_batch;
    c.ty = rem / ntc;
    c.tx = rem - c.ty * ntc;
    return c;
  }
  // Advances by dty tile rows and dtx tile columns (step = dty * ntc + dtx, dtx < ntc).
  TR_HD constexpr void Advance(int64_t dty, int64_t dtx, int64_t ntr, int64_t ntc) {
    tx += dtx;
    ty += dty;
    if (tx >= ntc) tx -= ntc, ++ty;
    if (ty >= ntr) {
      const int64_t q = ty / ntr;  // only when the walk crosses into another batch entry
      z += q;
      ty -= q * ntr;
    }
  }
};

// Skinny tiles: L elements along the long side times the n (<= kSkinnyMaxSide) elements of the
}  // namespace transposed::kernels
