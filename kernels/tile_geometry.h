// Index math shared by the CUDA kernels and the host: tile geometry, shared-memory layouts
// (padding or XOR swizzle), and the register transposes of packed 1- and 2-byte elements.
//
// Everything here is constexpr __host__ __device__ and free of CUDA headers, so the unit tests
// check on the CPU exactly the functions the kernels run (layouts are bijections, units stay
// aligned, transposes are correct). Pure functions; thread-safe.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__)
#define TR_UNROLL _Pragma("unroll")
#else
#define TR_UNROLL
#endif
#if defined(__CUDACC__)
#define TR_HD __host__ __device__ __forceinline__
#else
#define TR_HD inline
#endif

namespace transposed::kernels {

// Byte permute with the semantics of CUDA's __byte_perm(x, y, s): result byte i is byte
// (s >> 4i) & 7 of the 8-byte value {y:x} (bytes 0-3 from x, 4-7 from y).
TR_HD constexpr uint32_t BytePerm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t sel = (s >> (4 * i)) & 7u;
    r |= static_cast<uint32_t>((v >> (8 * sel)) & 0xffu) << (8 * i);
  }
  return r;
#endif
}

// 4x4 transpose of bytes: w[j] holds row j (byte k = column k); afterwards t[k] holds column k
// (byte j = row j). 8 byte permutes.
TR_HD constexpr void Transpose4x4Bytes(const uint32_t w[4], uint32_t t[4]) {
  const uint32_t x0 = BytePerm(w[0], w[1], 0x5140);  // w0b0 w1b0 w0b1 w1b1
  const uint32_t x1 = BytePerm(w[0], w[1], 0x7362);  // w0b2 w1b2 w0b3 w1b3
  const uint32_t y0 = BytePerm(w[2], w[3], 0x5140);
  const uint32_t y1 = BytePerm(w[2], w[3], 0x7362);
  t[0] = BytePerm(x0, y0, 0x5410);
  t[1] = BytePerm(x0, y0, 0x7632);
  t[2] = BytePerm(x1, y1, 0x5410);
  t[3] = BytePerm(x1, y1, 0x7632);
}

// 2x2 transpose of 16-bit halves: w[j] holds row j; afterwards t[k] holds column k.
TR_HD constexpr void Transpose2x2Halves(const uint32_t w[2], uint32_t t[2]) {
  t[0] = BytePerm(w[0], w[1], 0x5410);
  t[1] = BytePerm(w[0], w[1], 0x7632);
}

// Packed register transpose of a write unit for 1- and 2-byte elements: wv[j] is the 4-byte word
// of input row j (V rows) at one column group; afterwards o[k] holds output row k of the group
// (W = 4 / E rows), packed as UW = V * E / 4 words. 1-byte elements: 4x4 byte transposes; 2-byte:
// 2x2 half transposes. Used by the tile kernels' write phase (TileKernel and TileAsyncKernel).
template <int E, int V, int W, int UW>
TR_HD constexpr void TransposePackedWords(const uint32_t (&wv)[V], uint32_t (&o)[W][UW]) {
  static_assert(E == 1 || E == 2, "packed words hold 1- or 2-byte elements");
  static_assert(W == 4 / E && UW == V * E / 4, "W output rows of UW words");
  if constexpr (E == 1) {
    TR_UNROLL
    for (int mm = 0; mm < V / 4; ++mm) {
      uint32_t t[4] = {};
      Transpose4x4Bytes(wv + 4 * mm, t);
      TR_UNROLL
      for (int kk = 0; kk < 4; ++kk) o[kk][mm] = t[kk];
    }
  } else {
    TR_UNROLL
    for (int mm = 0; mm < V / 2; ++mm) {
      uint32_t t[2] = {};
      Transpose2x2Halves(wv + 2 * mm, t);
      o[0][mm] = t[0];
      o[1][mm] = t[1];
    }
  }
}

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
    // whatever the misalignment of its output rows (tile_math_test checks it).
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

// Word i (0..3) of a 4-word vector, i a run-time value (selects, so the vector stays in
// registers).
TR_HD constexpr uint32_t WordAt(const uint32_t w[4], int i) {
  return i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
}

// Funnel shift right: the low 32 bits of {hi:lo} >> (8 * bytes), 0 <= bytes < 4.
TR_HD constexpr uint32_t FunnelBytes(uint32_t lo, uint32_t hi, int bytes) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, 8 * bytes);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (8 * bytes));
#endif
}

// ---- Shifted rows (realigning pad-layout tiles). A tile row of `tcb` bytes that starts o bytes
// (0 <= o < 16) past a 16-byte boundary is read as aligned 16-byte windows k = 0 .. tcb / 16
// (the last only when o != 0); window k holds the row's bytes 16k - o .. 16k - o + 15. Each
// window is stored into the row's shared copy at row + 16k - o, keeping the bytes that fall in
// [0, tcb): as 4-byte aligned words (funnel shifts of neighbouring window words when the
// destination is not word aligned) plus, then, a 1-3 byte head and tail. Afterwards element c of
// the row is at row + c * E whatever o was, with no shuffles or selects.
//   row      the row's first byte in shared memory (4-byte aligned)
//   at       16k - o: where window byte 0 goes, relative to row (negative for k = 0, o != 0)
//   w        the window, 4 little-endian words
// check_lo / check_hi: whether bytes may fall before 0 (k = 0) / at or past tcb (the last
// window); the windows in between store everything.
TR_HD void PlaceWindow(unsigned char* row, int tcb, int at, const uint32_t w[4], bool check_lo,
                       bool check_hi) {
  unsigned char* const dst = row + at;
  const int s = static_cast<int>((4 - (reinterpret_cast<uintptr_t>(dst) & 3)) & 3);
  auto keep = [&](int pos, int n) {
    return (!check_lo || pos >= 0) && (!check_hi || pos + n <= tcb);
  };
  if (s == 0) {
    TR_UNROLL
    for (int i = 0; i < 4; ++i)
      if (keep(at + 4 * i, 4)) *reinterpret_cast<uint32_t*>(dst + 4 * i) = w[i];
    return;
  }
  // Head: window bytes 0 .. s-1 end at the word boundary dst + s.
  if (keep(at, s)) {
    if (s & 1) *dst = static_cast<unsigned char>(w[0]);
    if (s & 2) *reinterpret_cast<uint16_t*>(dst + (s & 1)) = static_cast<uint16_t>(w[0] >> (8 * (s & 1)));
  }
  TR_UNROLL
  for (int i = 0; i < 3; ++i)
    if (keep(at + s + 4 * i, 4))
      *reinterpret_cast<uint32_t*>(dst + s + 4 * i) = FunnelBytes(w[i], w[i + 1], s);
  // Tail: window bytes 12 + s .. 15 start at the word boundary dst + 12 + s.
  if (keep(at + 12 + s, 4 - s)) {
    const uint32_t t = w[3] >> (8 * s);
    unsigned char* const p = dst + 12 + s;
    if ((4 - s) & 2) *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(t);
    if ((4 - s) & 1) p[(4 - s) & 2] = static_cast<unsigned char>(t >> (8 * ((4 - s) & 2)));
  }
}

// Gathers one 16-byte output window from a shifted tile: elements j = 0 .. 16/E - 1 at
// col + j * stride (col: the element of the window's first input row), packed little-endian.
// 4- and 8-byte elements only (RealignInvalid; 1 and 2 bytes take the packed tiles).
template <int E>
TR_HD void GatherWindow(const unsigned char* col, int stride, uint32_t w[4]) {
  static_assert(E == 4 || E == 8, "shifted rows hold 4- or 8-byte elements");
  TR_UNROLL
  for (int j = 0; j < 16 / E; ++j)
    TR_UNROLL
    for (int i = 0; i < E / 4; ++i)
      w[j * (E / 4) + i] = reinterpret_cast<const uint32_t*>(col + j * stride)[i];
}

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
//          neighbouring windows, i.e. 128 contiguous bytes of each output row it writes. Window
//          0 starts p bytes before the tile's segment; its head bytes belong to the tile above,
//          whose rows were staged too, so it is stored whole (the tile above leaves it out) and
//          the tile's own last p bytes are the next tile's window 0. Only the first tile row of
//          a matrix (nothing above: window 0 stored from byte p) and a tile whose next tile does
//          not take this path (an extra partial window, warp 0) store partial windows.
// Packed layout: rows of rb bytes, 16-byte chunk k of row r at chunk k ^ f(r), f(r) =
// (r + r / v) mod 8 (within each 128 bytes), so that the gather's word reads (4 words x 8
// windows of rows v apart) are bank-conflict-free and the load's 16-byte stores (128-byte rows:
// 4 neighbouring rows x 2 halves per quarter warp; 256-byte rows: 8 rows x 1 part) at most 2-way
// (tile_math_test checks both for every p and output leading dimension); v guard rows below the
// tile for the extra partial window. Tiles over 48 KiB of shared memory (staging included) take
// it as dynamic shared memory.
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
    if (lanes() % 8 != 0) return "packed realign writes 8 windows per output row and warp";
    if (write_units() % nt != 0) return "packed realign needs every thread in every write step";
    if (stage_rows() % 8 != 0) return "staged rows must come in groups of 8";
    if (smem() > kMaxSmem) return "shared memory with staging and guard rows over 227 KiB";
    return nullptr;
  }

  // Column (element index in the tile row) held by byte slot b of shared word q.
  TR_HD constexpr int ColumnOf(int q, int b) const {
    return (q / period()) * period() * w() + q % period() + period() * b;
  }
  // Byte offset of word q of packed row r from packed row 0 (r may be a guard row:
  // -v() <= r < tr + v()).
  TR_HD constexpr int Offset(int r, int q) const {
    const int rp = r + 8 * v();  // >= 0; shifts r / v by 8 and r by a multiple of 8
    const int f = (rp / v() + rp) & 7;
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
  // Write unit u = tid + k * nt: shared word WriteWord(u), window WriteLane(u) (a warp: 4 words
  // x 8 neighbouring windows).
  TR_HD constexpr int WriteWord(int u) const { return 4 * ((u >> 5) % chunks()) + (u & 3); }
  TR_HD constexpr int WriteLane(int u) const {
    return (u >> 5) / chunks() * 8 + ((u >> 2) & 7);
  }
};

// Realigns 4N bytes: x holds N + 4 words read from an aligned address A (x[N..N+3] may be
// anything when o == 0); afterwards y[i] holds bytes o + 4i .. o + 4i + 3 of x (0 <= o < 16).
// Selects and funnel shifts only, so everything stays in registers.
template <int N>
TR_HD constexpr void ShiftWords(const uint32_t (&x)[N + 4], int o, uint32_t (&y)[N]) {
  uint32_t a[N + 3] = {}, b[N + 1] = {};
  const bool s1 = (o & 4) != 0, s2 = (o & 8) != 0;
  TR_UNROLL
  for (int i = 0; i < N + 3; ++i) a[i] = s1 ? x[i + 1] : x[i];
  TR_UNROLL
  for (int i = 0; i < N + 1; ++i) b[i] = s2 ? a[i + 2] : a[i];
  TR_UNROLL
  for (int i = 0; i < N; ++i) y[i] = FunnelBytes(b[i], b[i + 1], o & 3);
}
// 64 bytes from the five aligned windows around them (the packed tiles' load unit).
TR_HD constexpr void ShiftWindows(const uint32_t (&x)[20], int o, uint32_t (&y)[16]) {
  ShiftWords<16>(x, o, y);
}

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

// ---- Order of the one-tile-per-block walk. Tiles (ty, tx) and (ty + 1, tx) share the partly
// written 32-byte sectors at both ends of their output row segments when rows are odd, and
// (ty, tx) and (ty, tx + 1) the partly read sectors of their input rows; the walk should bring
// neighbours close enough together that the shared sectors are still in L2. Down first (grid x
// along the tile rows): output rows are written front to back, input neighbours are ntr tiles
// apart; across first: output neighbours are ntc tiles apart. Down first wherever it keeps the
// input neighbours within kDownFirstBytes of traffic (in + out), or where ntc > ntr anyway
// (measured on the H100, docs/benchmark.md: 5005x105371 f32 59% -> 92% of the copy, tall
// 27135x3121 f32 83% -> 88%; tall f64 63015x1867, 31 MB apart, loses 6 points down first).
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
// narrow side. The strided side moves as 16-byte vectors of V = 16 / e elements; unit q of a tile
// is vector SkinnyVec(q) of narrow index SkinnySide(q) (NV = L / V vectors per narrow index).
TR_HD constexpr int SkinnySide(int q, int nv) { return q / nv; }
TR_HD constexpr int SkinnyVec(int q, int nv) { return q % nv; }

// The widest narrow side of the skinny path: batched matrices with a short side of 17..256 (H100
// 2026-11-26: 438 matrices of 27x540 f32 ran at 71% of the copy in 16x16 tiles, 106% skinny;
// 250 of 145x2284 u8 50% in packed tiles, 70% skinny; 300 of 2000x100 u8 78% -> 103%).
inline constexpr int kSkinnyMaxSide = 256;

// Effective tile length of a skinny tile of nominal length `len` (the config's l<LEN>) for a
// narrow side of n elements: the kernel is instantiated for n <= SkinnyMaxSide(n) (4, 8, 16, 32,
// 64, 128 or 256). In the tall direction the tile is made longer as the narrow side shrinks, so
// that a tile always holds about len x 16 elements (a narrow side of 1 to 4 moved a quarter of
// the bytes per block that 16 did: 19497724x1 bf16 ran at 51% of the copy on the H100, 88% with
// the longer tile); shared memory stays within the n = 16 bound (SkinnySharedFor(len * 16 * e)).
// The wide direction keeps `len` for n = 5 to 16 (its per-thread window count, held in
// registers, would grow and spill with longer tiles), doubles it for n <= 4 (to the window count
// of n = 8: 2 to 4 rows moved half the bytes per block of 8 and ran 10-20 points below the copy;
// H100 / H200 2026-11-27: 4x35380959 f32 89.6% -> 99.7% / 76.0% -> 91.3%, 2x1295571 f64 85.0% ->
// 101.5% / 72.5% -> 89.8%, 2x31280590 c128 85.2% -> 98.4% / 69.2% -> 89.4%), and shortens it like
// the tall one past 16, so that the tile bytes and the per-thread counts stay those of n = 16.
TR_HD constexpr int SkinnyMaxSide(int64_t n) {
  return n <= 4    ? 4
         : n <= 8  ? 8
         : n <= 16 ? 16
         : n <= 32 ? 32
         : n <= 64 ? 64
         : n <= 128 ? 128
                    : 256;
}
TR_HD constexpr int64_t SkinnyTileLength(int len, int64_t n, bool tall) {
  if (tall || SkinnyMaxSide(n) > 16) return int64_t{len} * 16 / SkinnyMaxSide(n);
  return SkinnyMaxSide(n) == 4 ? int64_t{len} * 2 : int64_t{len};
}

// ---- Skinny strided side on rows of any alignment (the tall direction's output rows). For each
// narrow index a skinny tile moves a segment of n (<= tile length) elements of one long row, which starts p bytes past a 16-byte
// boundary (p a multiple of e: pointers are element aligned). The segment is moved as the
// aligned 16-byte windows k = 0 .. SegmentWindows(p, n, e) - 1 around it: window k is the 16
// bytes at segment - p + 16 k; its element slot j (0 .. 16/e - 1) holds segment element
// first + j for lo <= j < hi; the other slots belong to the neighbouring segments (the head of
// window 0, the tail of the last) and are neither read as the segment's nor written. Windows
// with lo == 0 and hi == 16/e are whole (one 16-byte access); the at most two others partial.
struct SegmentWindow {
  int first = 0;      // segment element in slot 0 (negative in a head window)
  int lo = 0, hi = 0; // slots of the segment: [lo, hi), empty when lo >= hi
  TR_HD constexpr bool whole(int e) const { return lo == 0 && hi == 16 / e; }
  TR_HD constexpr bool empty() const { return lo >= hi; }
};
TR_HD constexpr int SegmentWindows(int p, int n, int e) { return (p + n * e + 15) / 16; }
TR_HD constexpr SegmentWindow WindowOfSegment(int k, int p, int n, int e) {
  const int v = 16 / e;
  SegmentWindow w;
  w.first = k * v - p / e;
  w.lo = w.first < 0 ? -w.first : 0;
  w.hi = n - w.first < v ? n - w.first : v;
  return w;
}

// Shared-memory layout of the skinny kernels: the tile is a contiguous byte string (the
// contiguous side of the problem) with 4 bytes of padding after every 128 bytes, so that the
// strided gathers of the other side spread over the banks.
TR_HD constexpr int SkinnyOffset(int byte) { return byte + (byte >> 7) * 4; }
// Shared bytes for `bytes` bytes of tile, rounded up to 16.
TR_HD constexpr int64_t SkinnySharedFor(int64_t bytes) {
  return ((bytes + ((bytes + 127) >> 7) * 4) + 15) / 16 * 16;
}

}  // namespace transposed::kernels
