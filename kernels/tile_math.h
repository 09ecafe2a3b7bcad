// Index math shared by the CUDA kernels and the host: tile geometry, shared-memory layouts
// (padding or XOR swizzle), and the register transposes of packed 1- and 2-byte elements.
//
// Everything here is constexpr __host__ __device__ and free of CUDA headers, so the unit tests
// check on the CPU exactly the functions the kernels run (layouts are bijections, units stay
// aligned, transposes are correct). Pure functions; thread-safe.
#pragma once

#include <cstdint>

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

  static constexpr TileGeometry Make(int e, int tr, int tc, int block_rows, int vec_bytes, int pad,
                                     int swizzle) {
    TileGeometry t;
    t.e = e;
    t.tr = tr;
    t.tc = tc;
    t.nt = 32 * block_rows;
    t.vec = vec_bytes > e;
    t.swz = swizzle != 0;
    t.u = t.vec ? vec_bytes : e;
    t.v = t.u / e;
    t.w = (t.vec && e < 4) ? 4 / e : 1;
    t.r = (t.vec && e < 4) ? 4 : e;
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

  // Byte offset in shared memory of byte `byte` (0 <= byte < tcb) of tile row `row`.
  TR_HD constexpr int Offset(int row, int byte) const {
    if (!swz) return row * s + byte;
    const int f = ((row / v) * m) & (nu - 1);
    return row * s + (((byte / u) ^ f) * u) + (byte % u);
  }
};

// Shared-memory layout of the skinny kernels: the tile is a contiguous byte string (the
// contiguous side of the problem) with 4 bytes of padding after every 128 bytes, so that the
// strided gathers of the other side spread over the banks.
TR_HD constexpr int SkinnyOffset(int byte) { return byte + (byte >> 7) * 4; }
// Shared bytes for `bytes` bytes of tile, rounded up to 16.
TR_HD constexpr int64_t SkinnySharedFor(int64_t bytes) {
  return ((bytes + ((bytes + 127) >> 7) * 4) + 15) / 16 * 16;
}

}  // namespace transposed::kernels
