// Packed realigning tiles (realign 2, 1- and 2-byte elements on rows of any alignment): the
// shared layout, staging and thread mapping of PackedRealignGeometry, the column interleave into
// shared words, and the byte ranges of the output windows a tile writes. Checked on the CPU by
// kernels/packed_realign_test.cc (bijective layout, every unit once, bank conflicts bounded,
// every output byte written once).
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/register_transpose.h"

namespace transposed::kernels {

// ---- Packed realigning tiles (realign 2, 1- and 2-byte elements): rows of any alignment on both
// sides with 16-byte global accesses and 4-byte shared-memory gathers. A tile is tr input rows x
// rb = 128 or 256 bytes (rb / e columns; 256-byte rows halve the staged window overhead, 16 of
// 144 bytes per row -> 16 of 272, and taller tiles the v rows above every tile). Output rows c
// and c + 16 / e start at the same misalignment p whatever the output leading dimension (16 / e
// columns are 16 bytes apart in every output row offset), so each 4-byte shared word holds
// w = 4 / e columns of equal p: word q (0 .. rb / 4 - 1) of a tile row holds columns
// ColumnOf(q, b) = (q / P) * P * w + q % P + P * b (P = 16 / e, b < w).
// One output window (16 bytes, v = 16 / e input rows) of those w output rows is then v word reads
// and a register transpose, whatever p is (the window's rows are shifted by p / e, the same for
// the w rows).
//   stage  the aligned 16-byte windows around every tile row and the v rows above the tile
//          (rb / 16 + 1 per row, the last only where the row is misaligned) are copied global ->
//          shared as they lie (cp.async; neighbouring threads read neighbouring windows:
//          coalesced);
//   load   thread (row, part) takes the 5 staged windows around bytes [64 part, 64 part + 64)
//          of its row, realigns them in registers (ShiftWindows), interleaves the columns into
//          words (InterleaveColumns) and stores 4 16-byte chunks of the packed tile (the rows
//          above it included);
//   write  thread (q, lane) gathers word q of input rows lane * v - p / e + j (j < v) and stores
//          output window `lane` of the w output rows ColumnOf(q, b); a warp covers 4 words x 8
//          neighbouring windows, i.e. 128 contiguous bytes of each output row it writes (tiles of
//          4 windows, the 64-row u8 tiles: 8 words x 4 windows, 64 bytes). Window
//          0 starts p bytes before the tile's segment; its head bytes belong to the tile above,
//          whose rows were staged too, so it is stored whole (the tile above leaves it out) and
//          the tile's own last p bytes are the next tile's window 0. Only the first tile row of
//          a matrix (nothing above: window 0 stored from byte p) and a tile whose next tile does
//          not take this path (an extra partial window, warp 0) store partial windows.
// Packed layout: rows of rb bytes, 16-byte chunk k of row r at chunk k ^ f(r), f(r) =
// (r + s * (r / v)) mod 8 (within each 128 bytes; s = 8 / warp_lanes(): 1, or 2 where a warp
// gathers 4 windows of 2 chunks), so that the gather's word reads (4 words x 8 windows, or 8
// words x 4 windows, of rows v apart) are bank-conflict-free and the load's 16-byte stores
// (128-byte rows: 4 neighbouring rows x 2 halves per quarter warp; 256-byte rows: 8 rows x 1
// part) at most 2-way (packed_realign_test checks both for every p and output leading
// dimension); v guard rows below the tile for the extra partial window. Tiles over 48 KiB of
// shared memory (staging included) take it as dynamic shared memory.
struct PackedRealignGeometry {
  int e = 0, tr = 0, nt = 0;
  int rb = 128;  // tile row bytes: 128 or 256
  static constexpr int kMaxSmem = 227 * 1024;  // sm_90's per-block opt-in limit (dynamic)
  constexpr int chunks() const { return rb / 16; }  // 16-byte chunks per tile row
  constexpr int words() const { return rb / 4; }    // shared words per tile row
  constexpr int parts() const { return rb / 64; }   // 64-byte load units per tile row
  constexpr int stage_windows() const { return chunks() + 1; }  // aligned windows around a row
  constexpr int stage_row() const { return 16 * stage_windows(); }
  constexpr int v() const { return 16 / e; }      // input rows per output window
  constexpr int w() const { return 4 / e; }       // columns (output rows) per shared word
  constexpr int period() const { return 16 / e; } // columns of equal misalignment repeat
  constexpr int tc() const { return rb / e; }
  constexpr int lanes() const { return e > 0 ? tr / v() : 0; }  // windows per output row
  // Windows of one output row a warp writes (8, or 4 where the tile has only 4) and the shared
  // words it gathers them from (32 / that).
  constexpr int warp_lanes() const { return lanes() >= 8 ? 8 : 4; }
  constexpr int warp_words() const { return 32 / warp_lanes(); }
  constexpr int stage_rows() const { return tr + v(); }  // the v rows above, then the tile
  constexpr int stage_units() const { return stage_windows() * stage_rows(); }
  constexpr int load_units() const { return parts() * stage_rows(); }
  constexpr int write_units() const { return words() * lanes(); }
  constexpr int ns() const { return nt > 0 ? (stage_units() + nt - 1) / nt : 0; }
  constexpr int nl() const { return nt > 0 ? (load_units() + nt - 1) / nt : 0; }
  constexpr int nw() const { return nt > 0 ? write_units() / nt : 0; }
  constexpr int guard() const { return v() * rb; }  // packed rows above / below the tile
  constexpr int stage_bytes() const { return stage_rows() * stage_row(); }
  // Byte offset of the packed tile's row 0 in the block's buffer (staged windows first).
  constexpr int packed_at() const { return stage_bytes() + guard(); }
  constexpr int smem() const { return stage_bytes() + tr * rb + 2 * guard(); }
  // Over the 48 KiB of static shared memory: the kernel takes its buffer as dynamic shared
  // memory (opted in per kernel at the first launch).
  constexpr bool dynamic_smem() const { return smem() > 48 * 1024; }

  static constexpr PackedRealignGeometry Make(int e, int tr, int block_rows, int row_bytes = 128) {
    PackedRealignGeometry g;
    g.e = e;
    g.tr = tr;
    g.nt = 32 * block_rows;
    g.rb = row_bytes;
    return g;
  }
  constexpr const char* Invalid() const {
    if (e != 1 && e != 2) return "packed realign is for 1- and 2-byte elements";
    if (rb != 128 && rb != 256) return "packed realign tile rows are 128 or 256 bytes";
    if (nt < words() || nt > 1024) return "thread count (at least one per word of a row)";
    if (tr < v() || tr % v() != 0) return "tile rows must be a multiple of 16 bytes of elements";
    if (lanes() < 4 || lanes() % warp_lanes() != 0)
      return "packed realign writes 4 or 8 windows per output row and warp";
    if (write_units() % nt != 0) return "packed realign needs every thread in every write step";
    if (stage_rows() % 8 != 0) return "staged rows must come in groups of 8";
    if (smem() > kMaxSmem) return "shared memory with staging and guard rows over 227 KiB";
    return nullptr;
  }

  // Walking tiles (TransposeConfig::walk): the next tile's rows above are this tile's packed rows
  // tr - v .. tr - 1, carried by one copy of v * rb contiguous bytes down by tr rows; that holds
  // where the swizzle f(r) of PackedRealignGeometry::Offset repeats every tr rows.
  constexpr bool carry_repeats() const {
    return e > 0 && ((8 / warp_lanes()) * (tr / v()) + tr) % 8 == 0;
  }
  constexpr int carry_bytes() const { return v() * rb; }
  // Byte offset, from packed row 0, where the carried rows start (row tr - v) and where they go
  // (row -v).
  constexpr int carry_from() const { return (tr - v()) * rb; }
  constexpr int carry_to() const { return -v() * rb; }

  // Column (element index in the tile row) held by byte slot b of shared word q.
  TR_HD constexpr int ColumnOf(int q, int b) const {
    return (q / period()) * period() * w() + q % period() + period() * b;
  }
  // Byte offset of word q of packed row r from packed row 0 (r may be a guard row:
  // -v() <= r < tr + v()).
  TR_HD constexpr int Offset(int r, int q) const {
    const int rp = r + 8 * v();  // >= 0; shifts r / v by 8 and r by a multiple of 8
    const int f = ((8 / warp_lanes()) * (rp / v()) + rp) & 7;
    return r * rb + (((q >> 2) ^ f) << 4) + ((q & 3) << 2);
  }
  // Staged window `win` (0 .. chunks()) of tile row r (-v() <= r < tr), from the buffer's start.
  TR_HD constexpr int StageOffset(int r, int win) const {
    return (r + v()) * stage_row() + 16 * win;
  }
  // Load unit u = tid + k * nt (u < load_units()): tile row LoadRow(u) (from -v()), part
  // LoadHalf(u) (words 16 h ..). 128-byte rows: 4 rows x 2 halves per quarter warp; 256-byte
  // rows (272-byte staged rows, 17 chunks): 8 rows x 1 part, so that the staged reads of a
  // quarter warp stay on distinct bank chunks.
  TR_HD constexpr int LoadHalf(int u) const { return rb == 128 ? (u & 1) : (u >> 3) % parts(); }
  TR_HD constexpr int LoadRow(int u) const {
    return (rb == 128 ? (u >> 1) : (u >> 3) / parts() * 8 + (u & 7)) - v();
  }
  // Write unit u = tid + k * nt: shared word WriteWord(u), window WriteLane(u) (a warp:
  // warp_words() neighbouring words x warp_lanes() neighbouring windows; 4 x 8 or 8 x 4).
  TR_HD constexpr int WriteWord(int u) const {
    return warp_words() * ((u >> 5) % (words() / warp_words())) + u % warp_words();
  }
  TR_HD constexpr int WriteLane(int u) const {
    return (u >> 5) / (words() / warp_words()) * warp_lanes() +
           (u / warp_words()) % warp_lanes();
  }
};

// Interleaves 64 bytes of a tile row (y[i]: columns 4i / e ..) into the packed words of
// PackedRealignGeometry: z[q] holds the columns ColumnOf(q, b) (b < 4 / e) of this half.
template <int E>
TR_HD constexpr void InterleaveColumns(const uint32_t (&y)[16], uint32_t (&z)[16]) {
  static_assert(E == 1 || E == 2, "packed words hold 1- or 2-byte elements");
  if constexpr (E == 1) {
    // One block of 64 columns: z[q] = bytes q, q + 16, q + 32, q + 48.
    TR_UNROLL
    for (int a = 0; a < 4; ++a) {
      const uint32_t in[4] = {y[a], y[4 + a], y[8 + a], y[12 + a]};
      uint32_t t[4] = {};
      Transpose4x4Bytes(in, t);
      TR_UNROLL
      for (int k = 0; k < 4; ++k) z[4 * a + k] = t[k];
    }
  } else {
    // Two blocks of 16 columns: z[8h + q] = halves 16h + q and 16h + q + 8.
    TR_UNROLL
    for (int h = 0; h < 2; ++h)
      TR_UNROLL
      for (int a = 0; a < 4; ++a) {
        const uint32_t in[2] = {y[8 * h + a], y[8 * h + 4 + a]};
        uint32_t t[2] = {};
        Transpose2x2Halves(in, t);
        z[8 * h + 2 * a] = t[0];
        z[8 * h + 2 * a + 1] = t[1];
      }
  }
}

// ---- The output windows of a packed realigning tile (PackedRealignAgent's write phase). An
// output row's segment of the tile (its input rows 0 .. nr-1, e bytes each) starts p bytes past
// a 16-byte boundary; window `lane` covers segment bytes 16 lane - p .. 16 lane - p + 16, and the
// tile writes bytes [lo, hi) of it: from p in window 0 unless the rows above were staged
// (`above`: then bytes -p .. -1, the tile above's last bytes, are written for it), up to nr * e.
// hi <= lo: nothing. The tail window after the last lane (segment bytes tr * e - p ..) is
// written [0, PackedTailHi) where the next tile down does not write it as its window 0.
struct WindowBytes {
  int lo = 0, hi = 0;
  TR_HD constexpr bool whole() const { return lo == 0 && hi == 16; }
  TR_HD constexpr bool empty() const { return hi <= lo; }
};
TR_HD constexpr WindowBytes PackedWindowBytes(int lane, int p, bool above, int nr, int e) {
  const int end = nr * e + p - 16 * lane;
  return {above || lane != 0 ? 0 : p, end < 16 ? end : 16};
}
TR_HD constexpr int PackedTailHi(int p, int tr, int nr, int e) {
  const int end = nr * e - (tr * e - p);
  return end < p ? end : p;
}

// ---- The walk of the walking packed tiles (TransposeConfig::walk k): the tile rows of one tile
// column come in groups of k; walk group g takes tile rows first .. first + count - 1 in order
// (the last group of a matrix may be shorter), one block per (group, tile column) per step of
// the grid-stride walk.
struct PackedWalk {
  int64_t first = 0, count = 0;
};
TR_HD constexpr int64_t PackedWalkGroups(int64_t ntr, int k) { return (ntr + k - 1) / k; }
TR_HD constexpr PackedWalk PackedWalkGroup(int64_t g, int k, int64_t ntr) {
  const int64_t first = g * k;
  const int64_t left = ntr - first;
  return {first, left < k ? (left > 0 ? left : 0) : k};
}
}  // namespace transposed::kernels
