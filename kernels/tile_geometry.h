// Geometry of a tile configuration (TileGeometry): the unit sizes, shared-memory layout (padding
// or XOR swizzle) and thread-to-unit mapping of the tile kernels' load and write phases, and the
// extra rules of the realigning (shifted rows) and persistent cp.async variants. TilePolicy
// (kernels/policy.h) composes these rules into the family table's one validity check.
// constexpr and free of CUDA headers: kernels/tile_geometry_test.cc checks the layouts are
// aligned bijections, bank-conflict-free and covered once by the thread mapping, on the CPU.
//
// Plain values and pure functions; thread-safe.
#pragma once

#include "kernels/host_device.h"

namespace transposed::kernels {

// Geometry of one tile configuration for one element size. All sizes in bytes unless named
// otherwise. Phases of the tile kernel:
//   load:  `load_units` units of `u` bytes (v elements of one input row) move global -> shared;
//   write: `write_units` units, each gathering v consecutive input rows of `w` adjacent columns
//          (one r-byte read per row) and storing w output vectors of u bytes.
struct TileGeometry {
  int e = 0;         // element size
  int tr = 0;        // tile rows (elements)
  int tc = 0;        // tile cols (elements)
  int nt = 0;        // threads per block
  bool vec = false;  // vector path (u > e)
  bool swz = false;
  int u = 0;     // global access / shared store unit
  int v = 0;     // elements per unit
  int w = 0;     // output rows per write unit (4/e for packed 1- and 2-byte elements, else 1)
  int r = 0;     // shared read width in the gather
  int tcb = 0;   // bytes of one tile row
  int s = 0;     // shared-memory row stride
  int smem = 0;  // shared bytes
  int nu = 0;    // units per tile row
  int g = 0;     // write units per column group (lanes walking the output row)
  int m = 1;     // swizzle multiplier
  int su = 0;    // shared store width in the load phase
  int load_units = 0;
  int write_units = 0;
  // Realigning pad-layout tiles ("shifted rows", see ShiftedWindow below): elements unpacked
  // (w == 1 for every element size) and the write phase mapped as warps of `cw` output rows x
  // 32 / cw neighbouring windows (ShiftCol / ShiftLane); 0 otherwise.
  int cw = 0;

  static constexpr TileGeometry Make(int e, int tr, int tc, int block_rows, int vec_bytes, int pad,
                                     int swizzle, int shift = 0) {
    TileGeometry t;
    t.e = e;
    t.tr = tr;
    t.tc = tc;
    t.nt = 32 * block_rows;
    t.vec = vec_bytes > e;
    t.swz = swizzle != 0;
    t.u = t.vec ? vec_bytes : e;
    t.v = t.u / e;
    const bool packed = t.vec && e < 4 && shift == 0;
    t.w = packed ? 4 / e : 1;
    t.r = packed ? 4 : e;
    // Output rows per warp of the shifted write (4- and 8-byte elements, RealignInvalid): with
    // the pads of the family's rows (2 elements) a warp's element reads hit distinct banks
    // whatever the misalignment of its output rows (tile_geometry_test checks it).
    t.cw = shift != 0 ? 8 : 0;
    t.tcb = tc * e;
    t.s = t.tcb + (t.swz ? 0 : pad * e);
    t.smem = tr * t.s;
    t.nu = t.u > 0 ? t.tcb / t.u : 0;
    t.g = t.v > 0 ? tr / t.v : 0;
    const int k = t.g >= 32 || t.g == 0 ? 1 : 32 / t.g;
    t.m = (k * t.r / t.u) > 1 ? k * t.r / t.u : 1;
    t.su = (t.s % t.u == 0)             ? t.u
           : (t.s % 8 == 0 && t.u >= 8) ? 8
           : (t.s % 4 == 0 && t.u >= 4) ? 4
                                        : e;
    t.load_units = t.v > 0 ? tr * (tc / t.v) : 0;
    t.write_units = t.w > 0 ? (tc / t.w) * t.g : 0;
    return t;
  }

  // nullptr when the geometry is consistent, else why not.
  constexpr const char* Invalid() const {
    if (e != 1 && e != 2 && e != 4 && e != 8 && e != 16) return "element size";
    if (tr <= 0 || tc <= 0 || nt <= 0 || nt > 1024) return "tile or thread count";
    if (u != e && u != 4 && u != 8 && u != 16) return "vector width";
    if (u < e) return "vector narrower than element";
    if (tcb % u != 0) return "tile row not a multiple of the vector";
    if (tr % v != 0) return "tile rows not a multiple of the vector";
    if (tc % w != 0) return "tile cols not a multiple of the packing";
    if (vec && e < 4 && v % w != 0) return "vector not a multiple of the packing";
    if (s % r != 0) return "padding breaks the alignment of shared reads";
    if (su < e && su != u) return "padding breaks the alignment of shared stores";
    if (swz && (nu & (nu - 1)) != 0) return "swizzle needs a power-of-two unit count";
    if (smem > 48 * 1024) return "shared memory over 48 KiB";
    if (nt % (tc / v) != 0 || nt % g != 0) return "threads must be a multiple of the unit grid";
    return nullptr;
  }

  // Extra rules of the realigning variant (nullptr when they hold). It loads the aligned 16-byte
  // windows around each tile row and stores aligned 16-byte windows of each output row, moving
  // bytes between neighbouring units with warp shuffles, so the units of one tile row (nu) and of
  // one output row (g) must be a power-of-two lane group of at most a warp, and every thread must
  // take part in every load and write step (shuffles need converged warps).
  constexpr const char* RealignInvalid() const {
    if (e < 4) return "shifted rows are for 4- and 8-byte elements (1 and 2 bytes: realign 2)";
    if (!vec || u != 16) return "realign needs 16-byte vectors wider than the element";
    if (swz) return "realign needs the pad layout (shifted rows)";
    if (nu < 1 || nu > 32 || (nu & (nu - 1)) != 0)
      return "realign needs a power-of-two unit count of at most 32 per tile row";
    if (g < 1 || g > 32 || (g & (g - 1)) != 0)
      return "realign needs a power-of-two unit count of at most 32 per output row";
    if (load_units % nt != 0 || write_units % nt != 0)
      return "realign needs every thread in every load and write step";
    if (w == 1 && !swz && smem + 2 * v * s > 48 * 1024)
      return "shared memory with guard rows over 48 KiB";
    if (cw != 0) {
      if (tc % cw != 0 || g % (32 / cw) != 0)
        return "shifted write needs whole warps of cw output rows x 32/cw windows";
      if ((tc / cw) * (g / (32 / cw)) % (nt / 32) != 0)
        return "shifted write needs every warp in every write step";
      if (s % 4 != 0) return "shifted rows need 4-byte aligned shared rows";
    }
    return nullptr;
  }
  // ---- Write mapping of the shifted (realigning pad-layout) tile: step k of thread tid gathers
  // window ShiftLane(tid, k) (0 .. g-1) of output row ShiftCol(tid, k) (0 .. tc-1). A warp
  // covers cw output rows x 32 / cw neighbouring windows of each.
  constexpr int shift_steps() const { return cw > 0 ? (tc / cw) * (g / (32 / cw)) / (nt / 32) : 0; }
  TR_HD constexpr int ShiftCol(int tid, int k) const {
    const int t = tid / 32 + k * (nt / 32);
    return (t % (tc / cw)) * cw + (tid % 32) % cw;
  }
  TR_HD constexpr int ShiftLane(int tid, int k) const {
    const int t = tid / 32 + k * (nt / 32);
    return (t / (tc / cw)) * (32 / cw) + (tid % 32) / cw;
  }

  // Extra rules of the persistent double-buffered variant (async == 2; nullptr when they hold):
  // the loads are 16-byte cp.async copies straight into the shared layout, so every shared unit
  // must be a whole, 16-byte aligned 16-byte vector (swizzle keeps units whole), and the buffers
  // (`stages`, 2 or 3) must fit in the 48 KiB of static shared memory.
  constexpr const char* AsyncInvalid(int stages) const {
    if (!vec || u != 16 || su != 16) return "async needs 16-byte vectors stored whole in shared";
    if (!swz) return "async needs the swizzled layout";
    if (stages < 2 || stages > 3) return "async needs 2 or 3 buffers";
    if (stages * smem > 48 * 1024) return "shared buffers over 48 KiB";
    return nullptr;
  }

  // ---- Thread-to-unit mapping of the two phases (nt threads; step k of nl / nw).
  // Load step k of thread tid moves unit column LoadCol(tid) of tile row LoadRow(tid, k); the
  // thread takes part when LoadActive(tid, k). nt is a multiple of the units per tile row (nu),
  // so a thread keeps its unit column and its global address advances by a constant per step.
  constexpr int nl() const { return nt > 0 ? (load_units + nt - 1) / nt : 0; }
  constexpr int nw() const { return nt > 0 ? (write_units + nt - 1) / nt : 0; }
  constexpr int load_row_step() const { return nu > 0 ? nt / nu : 0; }
  constexpr int write_group_step() const { return g > 0 ? nt / g : 0; }
  TR_HD constexpr int LoadCol(int tid) const { return tid % nu; }
  TR_HD constexpr int LoadRow(int tid, int k) const { return tid / nu + k * load_row_step(); }
  TR_HD constexpr bool LoadActive(int tid, int k) const { return tid + k * nt < load_units; }
  // Write step k of thread tid gathers input rows WriteLane(tid) * v .. + v - 1 of column group
  // WriteGroup(tid, k) (w adjacent input columns = w output rows) and stores lane WriteLane(tid)
  // of those output rows' segment: g lanes walk one output row segment.
  TR_HD constexpr int WriteLane(int tid) const { return tid % g; }
  TR_HD constexpr int WriteGroup(int tid, int k) const { return tid / g + k * write_group_step(); }
  TR_HD constexpr bool WriteActive(int tid, int k) const { return tid + k * nt < write_units; }

  // Byte offset in shared memory of byte `byte` (0 <= byte < tcb) of tile row `row`.
  TR_HD constexpr int Offset(int row, int byte) const {
    if (!swz) return row * s + byte;
    const int f = ((row / v) * m) & (nu - 1);
    return row * s + (((byte / u) ^ f) * u) + (byte % u);
  }
};
}  // namespace transposed::kernels
