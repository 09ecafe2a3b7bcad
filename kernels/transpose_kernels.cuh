// The CUDA transpose kernels (templates) and their typed launchers, plus the registry that maps a
// TransposeConfig to an instantiation. Internal to kernels/: included by the family_e*.cu files
// (one per element size, so instantiations compile in parallel) and by launch.cu.
//
// Memory layout is core/problem.h's. All global index math is 64-bit; shared-memory offsets are
// int (a tile is at most 48 KiB). Every kernel covers any problem size with a grid capped at the
// launch limits (grid-stride loops over tiles and batch). Launchers are thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/problem.h"
#include "kernels/tile_math.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels::internal {

using LaunchFn = cudaError_t (*)(const Problem& p, const void* in, void* out, cudaStream_t s);
struct Entry {
  TransposeConfig config;
  LaunchFn launch;
};
// The instantiated family for element size E (defined in family_e<E>.cu).
template <int E>
const std::vector<Entry>& FamilyTable();
template <>
const std::vector<Entry>& FamilyTable<1>();
template <>
const std::vector<Entry>& FamilyTable<2>();
template <>
const std::vector<Entry>& FamilyTable<4>();
template <>
const std::vector<Entry>& FamilyTable<8>();
template <>
const std::vector<Entry>& FamilyTable<16>();

struct Args {
  const unsigned char* in;
  unsigned char* out;
  int64_t rows, cols, batch, ldi, ldo;  // leading dimensions in elements
  const unsigned char* in_end;          // one past the last input byte (in + in_alloc_bytes)
};

inline Args MakeArgs(const Problem& p, const void* in, void* out) {
  return Args{static_cast<const unsigned char*>(in),
              static_cast<unsigned char*>(out),
              p.rows,
              p.cols,
              p.batch,
              p.in_ld(),
              p.out_ld(),
              static_cast<const unsigned char*>(in) + p.in_alloc_bytes()};
}

inline unsigned CapGrid(int64_t n, int64_t cap) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(n, cap)));
}

template <int B>
struct Native;
template <>
struct Native<1> {
  using T = uint8_t;
};
template <>
struct Native<2> {
  using T = uint16_t;
};
template <>
struct Native<4> {
  using T = uint32_t;
};
template <>
struct Native<8> {
  using T = uint2;
};
template <>
struct Native<16> {
  using T = uint4;
};

// Copies one B-byte value between B-aligned addresses.
template <int B>
__device__ __forceinline__ void CopyBytes(void* dst, const void* src) {
  using T = typename Native<B>::T;
  *static_cast<T*>(dst) = *static_cast<const T*>(src);
}

// Loads B bytes into 32-bit words (B < 4: one word holding the value in its low bits).
template <int B>
__device__ __forceinline__ void LoadWords(const void* p, uint32_t* w) {
  if constexpr (B == 16) {
    const uint4 v = *static_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (B == 8) {
    const uint2 v = *static_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else if constexpr (B == 4) {
    w[0] = *static_cast<const uint32_t*>(p);
  } else if constexpr (B == 2) {
    w[0] = *static_cast<const uint16_t*>(p);
  } else {
    w[0] = *static_cast<const uint8_t*>(p);
  }
}

template <int B>
__device__ __forceinline__ void StoreWords(void* p, const uint32_t* w) {
  if constexpr (B == 16) {
    *static_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else if constexpr (B == 8) {
    *static_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else if constexpr (B == 4) {
    *static_cast<uint32_t*>(p) = w[0];
  } else if constexpr (B == 2) {
    *static_cast<uint16_t*>(p) = static_cast<uint16_t>(w[0]);
  } else {
    *static_cast<uint8_t*>(p) = static_cast<uint8_t>(w[0]);
  }
}

// ---- Realigning tiles: aligned 16-byte windows around misaligned rows.

// Stores S bytes (S = 1, 2, 4, 8) starting at byte `off` of the window w to dst (S-aligned).
template <int S>
__device__ __forceinline__ void PutPiece(unsigned char* dst, const uint32_t w[4], int off) {
  const uint32_t x = WordAt(w, off >> 2);
  if constexpr (S == 8) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(x, WordAt(w, (off >> 2) + 1));
  } else if constexpr (S == 4) {
    *reinterpret_cast<uint32_t*>(dst) = x;
  } else if constexpr (S == 2) {
    *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(x >> (8 * (off & 3)));
  } else {
    *reinterpret_cast<uint8_t*>(dst) = static_cast<uint8_t>(x >> (8 * (off & 3)));
  }
}

// Stores bytes [lo, hi) of the window w to the 16-byte-aligned address base; only for [p, 16)
// (head of a row segment) and [0, p) (its tail), p a multiple of E. 4- and 8-byte elements:
// one predicated store per element (at most 4); 1- and 2-byte elements: aligned pieces of 1 to 8
// bytes (at most 4), which measured faster than 8 or 16 element stores.
template <int E>
__device__ __forceinline__ void StoreWindowRange(unsigned char* base, const uint32_t w[4], int lo,
                                                 int hi) {
  if constexpr (E >= 4) {
#pragma unroll
    for (int b = 0; b < 16; b += E) {
      if (b >= lo && b < hi) {
        if constexpr (E == 8) {
          *reinterpret_cast<uint2*>(base + b) = make_uint2(w[b / 4], w[b / 4 + 1]);
        } else {
          *reinterpret_cast<uint32_t*>(base + b) = w[b / 4];
        }
      }
    }
  } else {
    int off = lo;
    if constexpr (E <= 1)
      if ((off & 1) && off + 1 <= hi) PutPiece<1>(base + off, w, off), off += 1;
    if ((off & 2) && off + 2 <= hi) PutPiece<2>(base + off, w, off), off += 2;
    if ((off & 4) && off + 4 <= hi) PutPiece<4>(base + off, w, off), off += 4;
    if ((off & 8) && off + 8 <= hi) PutPiece<8>(base + off, w, off), off += 8;
    if (off + 8 <= hi) PutPiece<8>(base + off, w, off), off += 8;
    if (off + 4 <= hi) PutPiece<4>(base + off, w, off), off += 4;
    if (off + 2 <= hi) PutPiece<2>(base + off, w, off), off += 2;
    if constexpr (E <= 1)
      if (off + 1 <= hi) PutPiece<1>(base + off, w, off);
  }
}

// The 16-byte unit `cur` of lane `ov` (0 <= ov < NG, NG lanes per output row segment `seg`, a
// power of two) goes to seg + 16 * ov. When seg is not 16-byte aligned (p = seg & 15), lane ov
// stores the aligned window that holds the last p bytes of lane ov-1's unit and the first 16-p of
// its own; the first lane stores the head piece, the last lane also the tail piece. Every lane of
// the warp must call this (it shuffles).
template <int E, int NG>
__device__ __forceinline__ void StoreRowRealigned(unsigned char* seg, int ov,
                                                  const uint32_t cur[4]) {
  uint32_t prev[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) prev[i] = __shfl_up_sync(0xffffffffu, cur[i], 1, NG);
  const int p = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
  if (p == 0) {
    StoreWords<16>(seg + 16 * ov, cur);
    return;
  }
  unsigned char* base = seg - p + 16 * ov;
  uint32_t win[4];
  Realign16<E>(prev, cur, 16 - p, win);
  if (ov != 0) {
    StoreWords<16>(base, win);
  } else {
    StoreWindowRange<E>(base, win, p, 16);
  }
  if (ov == NG - 1) {
    const uint32_t zero[4] = {0, 0, 0, 0};
    Realign16<E>(cur, zero, 16 - p, win);
    StoreWindowRange<E>(base + 16, win, 0, p);
  }
}

// ------------------------------------------------------------------------------------------------
// Reference: one element per thread, 1-D grid-stride over every element, 64-bit index math.
template <int E>
__global__ void ReferenceKernel(Args a) {
  const int64_t total = a.batch * a.rows * a.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t c = i % a.cols;
    const int64_t t = i / a.cols;
    const int64_t r = t % a.rows;
    const int64_t b = t / a.rows;
    CopyBytes<E>(a.out + ((b * a.cols + c) * a.ldo + r) * E,
                 a.in + ((b * a.rows + r) * a.ldi + c) * E);
  }
}

template <int E>
cudaError_t LaunchReferenceE(const Problem& p, const void* in, void* out, cudaStream_t s) {
  const Args a = MakeArgs(p, in, out);
  const int64_t total = p.batch * p.rows * p.cols;
  ReferenceKernel<E><<<CapGrid((total + 255) / 256, 1 << 20), 256, 0, s>>>(a);
  return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------
// Naive: 32x8 threads, thread (x, y) copies element (r, c) of a 2-D grid-stride walk; reads are
// coalesced, writes are strided by ld_out.
template <int E>
__global__ void __launch_bounds__(256) NaiveKernel(Args a) {
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z)
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.y; r < a.rows;
         r += static_cast<int64_t>(gridDim.y) * 8)
      for (int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x; c < a.cols;
           c += static_cast<int64_t>(gridDim.x) * 32)
        CopyBytes<E>(a.out + ((z * a.cols + c) * a.ldo + r) * E,
                     a.in + ((z * a.rows + r) * a.ldi + c) * E);
}

template <int E>
cudaError_t LaunchNaive(const Problem& p, const void* in, void* out, cudaStream_t s) {
  const Args a = MakeArgs(p, in, out);
  const dim3 grid(CapGrid((p.cols + 31) / 32, INT_MAX), CapGrid((p.rows + 7) / 8, 65535),
                  CapGrid(p.batch, 65535));
  NaiveKernel<E><<<grid, dim3(32, 8), 0, s>>>(a);
  return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------
// Tile: see TileGeometry (tile_math.h) for the phases. Interior tiles take the vectorized path;
// tiles cut by the matrix edge take a predicated element path through the same shared layout.
template <int E, int TR, int TC, int BR, int VB, int PAD, int SWZ, int RA>
__global__ void __launch_bounds__(32 * BR) TileKernel(Args a) {
  constexpr TileGeometry G = TileGeometry::Make(E, TR, TC, BR, VB, PAD, SWZ);
  static_assert(G.Invalid() == nullptr, "inconsistent tile geometry");
  static_assert(!RA || G.RealignInvalid() == nullptr, "inconsistent realign geometry");
  constexpr int NT = G.nt, U = G.u, V = G.v, W = G.w, SU = G.su;
  constexpr int UW = U >= 4 ? U / 4 : 1;  // words per unit
  constexpr int UPR = TC / V;             // load units per tile row
  constexpr int NL = (G.load_units + NT - 1) / NT;
  constexpr int NW = (G.write_units + NT - 1) / NT;
  constexpr bool kLoadExact = G.load_units % NT == 0;
  constexpr bool kWriteExact = G.write_units % NT == 0;
  constexpr int RS = NT / UPR;  // tile rows per load step
  constexpr int OS = NT / G.g;  // column groups per write step
  // Realigning pad-layout tiles with one element per unit row (W == 1) gather each output window
  // straight from the rows it covers (shifted by the output row's misalignment), so V guard rows
  // above and below the tile keep those reads inside the array (their bytes are never stored).
  constexpr bool kShiftGather = RA && W == 1 && !SWZ;
  constexpr int kGuard = kShiftGather ? V * G.s : 0;
  __shared__ __align__(16) unsigned char sm_raw[G.smem + 2 * kGuard];
  unsigned char* const sm = sm_raw + kGuard;

  const int tid = threadIdx.x;
  const int64_t ntr = (a.rows + TR - 1) / TR;
  const int64_t ntc = (a.cols + TC - 1) / TC;
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z) {
    for (int64_t ty = blockIdx.y; ty < ntr; ty += gridDim.y) {
      for (int64_t tx = blockIdx.x; tx < ntc; tx += gridDim.x) {
        const int64_t r0 = ty * TR;
        const int64_t c0 = tx * TC;
        const unsigned char* in = a.in + ((z * a.rows + r0) * a.ldi + c0) * E;
        unsigned char* out = a.out + ((z * a.cols + c0) * a.ldo + r0) * E;
        // A realigning tile reads up to 16 bytes past its last row's end (the aligned window);
        // the one tile where that would leave the input buffer takes the edge path.
        bool interior = r0 + TR <= a.rows && c0 + TC <= a.cols;
        if constexpr (RA) {
          const unsigned char* last = in + static_cast<int64_t>(TR - 1) * a.ldi * E;
          interior = interior &&
                     (last - (reinterpret_cast<uintptr_t>(last) & 15)) + 16 * (UPR + 1) <= a.in_end;
        }
        if (interior) {
          // Load phase: all global loads first (NL in flight per thread), then shared stores.
          // Thread t always handles unit column vc and rows lr0 + k * RS (NT % UPR == 0), so
          // addresses advance by a constant per k.
          const int vc = tid % UPR, lr0 = tid / UPR;
          const unsigned char* gin = in + static_cast<int64_t>(lr0) * a.ldi * E + vc * U;
          const int64_t gstep = static_cast<int64_t>(RS) * a.ldi * E;
          uint32_t buf[NL][UW];
          if constexpr (RA) {
            // Realign: the aligned windows around each tile row (one more for the row's last
            // lane when the row is misaligned), every load issued before any shuffle; then lane
            // vc takes the bytes o .. o+15 of its window and the next one.
            const unsigned char* rin = gin - vc * U;
            uint32_t ext[NL][4];
#pragma unroll
            for (int k = 0; k < NL; ++k) {
              const unsigned char* row = rin + k * gstep;
              const int o = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
              const unsigned char* win = row - o + vc * 16;
              LoadWords<16>(win, buf[k]);
              ext[k][0] = ext[k][1] = ext[k][2] = ext[k][3] = 0;
              if (vc == UPR - 1 && o != 0) LoadWords<16>(win + 16, ext[k]);
            }
#pragma unroll
            for (int k = 0; k < NL; ++k) {
              const int o = static_cast<int>(reinterpret_cast<uintptr_t>(rin + k * gstep) & 15);
              uint32_t nxt[4];
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                nxt[i] = __shfl_down_sync(0xffffffffu, buf[k][i], 1, UPR);
                if (vc == UPR - 1) nxt[i] = ext[k][i];
              }
              uint32_t cur[4] = {buf[k][0], buf[k][1], buf[k][2], buf[k][3]};
              Realign16<E>(cur, nxt, o, buf[k]);
            }
          } else {
#pragma unroll
            for (int k = 0; k < NL; ++k) {
              if (kLoadExact || tid + k * NT < G.load_units) LoadWords<U>(gin + k * gstep, buf[k]);
            }
          }
#pragma unroll
          for (int k = 0; k < NL; ++k) {
            if (kLoadExact || tid + k * NT < G.load_units) {
              const int row = lr0 + k * RS;
              if constexpr (SU >= 4) {
#pragma unroll
                for (int piece = 0; piece < U / SU; ++piece)
                  StoreWords<SU>(sm + G.Offset(row, vc * U + piece * SU),
                                 buf[k] + piece * (SU / 4));
              } else {
                StoreWords<U>(sm + G.Offset(row, vc * U), buf[k]);
              }
            }
          }
          __syncthreads();
          // Write phase: thread t always handles rows ov*V .. ov*V+V-1 (NT % G == 0), and column
          // groups owg0 + k * OS. Within a unit the V rows share the swizzle (it depends on
          // row / V only), so the gather is one base offset plus j * S.
          const int ov = tid % G.g, owg0 = tid / G.g;
          unsigned char* gout = out + static_cast<int64_t>(owg0) * W * a.ldo * E + ov * U;
          const int64_t ostep = static_cast<int64_t>(OS) * W * a.ldo * E;
#pragma unroll
          for (int k = 0; k < NW; ++k) {
            if (kWriteExact || tid + k * NT < G.write_units) {
              const int owg = owg0 + k * OS;
              unsigned char* dst = gout + k * ostep;
              if constexpr (W == 1) {
                uint32_t o[UW];
                const unsigned char* src = sm + G.Offset(ov * V, owg * E);
#pragma unroll
                for (int j = 0; j < V; ++j)
                  LoadWords<E>(src + j * G.s, o + j * (E >= 4 ? E / 4 : 0));
                if constexpr (kShiftGather) {
                  unsigned char* seg = dst - ov * U;
                  const int p = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
                  if (p == 0) {
                    StoreWords<16>(dst, o);
                  } else {
                    // Window ov of the output row holds elements ov * V - p / E + j.
                    const unsigned char* wsrc = src - (p / E) * G.s;
                    uint32_t win[4];
#pragma unroll
                    for (int j = 0; j < V; ++j) LoadWords<E>(wsrc + j * G.s, win + j * (E / 4));
                    unsigned char* base = dst - p;
                    if (ov != 0) {
                      StoreWords<16>(base, win);
                    } else {
                      StoreWindowRange<E>(base, win, p, 16);
                    }
                    if (ov == G.g - 1) {
#pragma unroll
                      for (int j = 0; j < V; ++j)
                        LoadWords<E>(wsrc + (V + j) * G.s, win + j * (E / 4));
                      StoreWindowRange<E>(base + 16, win, 0, p);
                    }
                  }
                } else if constexpr (RA) {
                  StoreRowRealigned<E, G.g>(dst - ov * U, ov, o);
                } else {
                  StoreWords<U>(dst, o);
                }
              } else {
                const unsigned char* src = sm + G.Offset(ov * V, owg * 4);
                uint32_t wv[V];
#pragma unroll
                for (int j = 0; j < V; ++j)
                  wv[j] = *reinterpret_cast<const uint32_t*>(src + j * G.s);
                uint32_t o[W][UW];
                TransposePackedWords<E, V, W, UW>(wv, o);
#pragma unroll
                for (int kk = 0; kk < W; ++kk) {
                  if constexpr (RA) {
                    StoreRowRealigned<E, G.g>(dst - ov * U + static_cast<int64_t>(kk) * a.ldo * E,
                                              ov, o[kk]);
                  } else {
                    StoreWords<U>(dst + static_cast<int64_t>(kk) * a.ldo * E, o[kk]);
                  }
                }
              }
            }
          }
        } else {
          // Edge tile: predicated element copies through the same shared layout.
          const int nr = static_cast<int>(std::min<int64_t>(TR, a.rows - r0));
          const int nc = static_cast<int>(std::min<int64_t>(TC, a.cols - c0));
          for (int q = tid; q < TR * TC; q += NT) {
            const int row = q / TC, col = q % TC;
            if (row < nr && col < nc)
              CopyBytes<E>(sm + G.Offset(row, col * E),
                           in + (static_cast<int64_t>(row) * a.ldi + col) * E);
          }
          __syncthreads();
          for (int q = tid; q < TR * TC; q += NT) {
            const int oc = q / TR, orow = q % TR;
            if (oc < nc && orow < nr)
              CopyBytes<E>(out + (static_cast<int64_t>(oc) * a.ldo + orow) * E,
                           sm + G.Offset(orow, oc * E));
          }
        }
        __syncthreads();  // the next tile reuses the shared buffer
      }
    }
  }
}

template <int E, int TR, int TC, int BR, int VB, int PAD, int SWZ, int RA>
cudaError_t LaunchTile(const Problem& p, const void* in, void* out, cudaStream_t s) {
  const Args a = MakeArgs(p, in, out);
  const dim3 grid(CapGrid((p.cols + TC - 1) / TC, INT_MAX), CapGrid((p.rows + TR - 1) / TR, 65535),
                  CapGrid(p.batch, 65535));
  TileKernel<E, TR, TC, BR, VB, PAD, SWZ, RA><<<grid, 32 * BR, 0, s>>>(a);
  return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------
// Persistent double-buffered tile (async == 2): the swizzled 16-byte-vector tile of TileKernel,
// with a grid of as many blocks as are resident on the device (occupancy x SMs) walking the tiles
// in order (tile columns fastest, then tile rows, then batch), and two shared buffers. Each tile's
// global -> shared loads are cp.async 16-byte copies issued one tile ahead, so a block's loads of
// tile k+1 are in flight while it gathers and stores tile k; the loads no longer pass through
// registers. Edge tiles take the predicated element path synchronously (nothing is prefetched
// for them).

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int E, int TR, int TC, int BR, int S>
__global__ void __launch_bounds__(32 * BR) TileAsyncKernel(Args a) {
  constexpr TileGeometry G = TileGeometry::Make(E, TR, TC, BR, 16, 0, 1);
  static_assert(G.Invalid() == nullptr, "inconsistent tile geometry");
  static_assert(G.AsyncInvalid(S) == nullptr, "inconsistent async geometry");
  constexpr int NT = G.nt, U = G.u, V = G.v, W = G.w;
  constexpr int UW = U / 4;
  constexpr int UPR = TC / V;
  constexpr int NL = (G.load_units + NT - 1) / NT;
  constexpr int NW = (G.write_units + NT - 1) / NT;
  constexpr bool kLoadExact = G.load_units % NT == 0;
  constexpr bool kWriteExact = G.write_units % NT == 0;
  constexpr int RS = NT / UPR;
  constexpr int OS = NT / G.g;
  __shared__ __align__(128) unsigned char sm_raw[S * G.smem];

  const int tid = threadIdx.x;
  const int64_t ntr = (a.rows + TR - 1) / TR;
  const int64_t ntc = (a.cols + TC - 1) / TC;
  const int64_t per_batch = ntr * ntc;
  struct Tile {
    const unsigned char* in;
    unsigned char* out;
    int nr, nc;
  };
  // Tile cursors (batch, tile row, tile column) advance by gridDim.x tiles without a division
  // per tile (64-bit divisions per tile made the first version issue-bound: it ran at 90.7% of
  // the copy on 8192^2 f32 against 94.7% for the one-tile-per-block kernel).
  struct Cursor {
    int64_t z, ty, tx;
  };
  const int64_t step = gridDim.x;
  const int64_t dty = step / ntc, dtx = step - dty * ntc;
  auto advance = [&](Cursor& c) {
    c.tx += dtx;
    c.ty += dty;
    if (c.tx >= ntc) c.tx -= ntc, ++c.ty;
    if (c.ty >= ntr) {
      const int64_t q = c.ty / ntr;  // only when the walk crosses into another batch entry
      c.z += q;
      c.ty -= q * ntr;
    }
  };
  auto tile_at = [&](const Cursor& c) {
    const int64_t r0 = c.ty * TR, c0 = c.tx * TC;
    Tile tl;
    tl.in = a.in + ((c.z * a.rows + r0) * a.ldi + c0) * E;
    tl.out = a.out + ((c.z * a.cols + c0) * a.ldo + r0) * E;
    tl.nr = static_cast<int>(std::min<int64_t>(TR, a.rows - r0));
    tl.nc = static_cast<int>(std::min<int64_t>(TC, a.cols - c0));
    return tl;
  };
  // Issues the loads of interior tile c into buf (nothing for edge tiles or past the end).
  auto issue = [&](const Cursor& c, unsigned char* buf) {
    if (c.z >= a.batch) return;
    const Tile tl = tile_at(c);
    if (tl.nr != TR || tl.nc != TC) return;
    const int vc = tid % UPR, lr0 = tid / UPR;
    const unsigned char* gin = tl.in + static_cast<int64_t>(lr0) * a.ldi * E + vc * U;
    const int64_t gstep = static_cast<int64_t>(RS) * a.ldi * E;
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      if (kLoadExact || tid + k * NT < G.load_units)
        CpAsync16(buf + G.Offset(lr0 + k * RS, vc * U), gin + k * gstep);
    }
  };

  // S buffers used round robin: tile i of this block lives in buffer i % S, and the loads of
  // tiles i+1 .. i+S-1 are in flight while tile i is stored. `at` is the tile being stored,
  // `ahead` the next one to issue.
  Cursor at;
  {
    const int64_t t = blockIdx.x;
    at.z = t / per_batch;
    const int64_t rem = t - at.z * per_batch;
    at.ty = rem / ntc;
    at.tx = rem - at.ty * ntc;
  }
  Cursor ahead = at;
#pragma unroll
  for (int k = 0; k < S - 1; ++k) {
    issue(ahead, sm_raw + k * G.smem);
    CpAsyncCommit();
    advance(ahead);
  }
  for (int b = 0; at.z < a.batch; advance(at), b = b == S - 1 ? 0 : b + 1) {
    // Buffer (b + S - 1) % S was last read before the previous iteration's closing barrier.
    const int bn = b == 0 ? S - 1 : b - 1;
    issue(ahead, sm_raw + bn * G.smem);
    CpAsyncCommit();
    advance(ahead);
    CpAsyncWait<S - 1>();  // this thread's copies of tile `at` have landed
    __syncthreads();       // ... and every thread's
    const Tile tl = tile_at(at);
    unsigned char* const cur = sm_raw + b * G.smem;
    const unsigned char* sm = cur;
    if (tl.nr == TR && tl.nc == TC) {
      // Write phase, as in TileKernel (swizzled layout, no realignment).
      const int ov = tid % G.g, owg0 = tid / G.g;
      unsigned char* gout = tl.out + static_cast<int64_t>(owg0) * W * a.ldo * E + ov * U;
      const int64_t ostep = static_cast<int64_t>(OS) * W * a.ldo * E;
#pragma unroll
      for (int k = 0; k < NW; ++k) {
        if (kWriteExact || tid + k * NT < G.write_units) {
          const int owg = owg0 + k * OS;
          unsigned char* dst = gout + k * ostep;
          if constexpr (W == 1) {
            uint32_t o[UW];
            const unsigned char* src = sm + G.Offset(ov * V, owg * E);
#pragma unroll
            for (int j = 0; j < V; ++j) LoadWords<E>(src + j * G.s, o + j * (E / 4));
            StoreWords<U>(dst, o);
          } else {
            const unsigned char* src = sm + G.Offset(ov * V, owg * 4);
            uint32_t wv[V];
#pragma unroll
            for (int j = 0; j < V; ++j) wv[j] = *reinterpret_cast<const uint32_t*>(src + j * G.s);
            uint32_t o[W][UW];
            TransposePackedWords<E, V, W, UW>(wv, o);
#pragma unroll
            for (int kk = 0; kk < W; ++kk)
              StoreWords<U>(dst + static_cast<int64_t>(kk) * a.ldo * E, o[kk]);
          }
        }
      }
    } else {
      // Edge tile: predicated element copies through the same shared layout (cur is free: no
      // copies were issued into it for this tile).
      for (int q = tid; q < TR * TC; q += NT) {
        const int row = q / TC, col = q % TC;
        if (row < tl.nr && col < tl.nc)
          CopyBytes<E>(cur + G.Offset(row, col * E),
                       tl.in + (static_cast<int64_t>(row) * a.ldi + col) * E);
      }
      __syncthreads();
      for (int q = tid; q < TR * TC; q += NT) {
        const int oc = q / TR, orow = q % TR;
        if (oc < tl.nc && orow < tl.nr)
          CopyBytes<E>(tl.out + (static_cast<int64_t>(oc) * a.ldo + orow) * E,
                       cur + G.Offset(orow, oc * E));
      }
    }
    __syncthreads();  // a later iteration issues copies into cur
  }
  CpAsyncWait<0>();
}

// Test hook: TRANSPOSED_MAX_PERSISTENT_BLOCKS=N caps the persistent grid at N blocks (the GPU
// test uses it so that small problems still walk several tiles per block through both buffers).
inline int64_t PersistentBlockCap() {
  const char* s = std::getenv("TRANSPOSED_MAX_PERSISTENT_BLOCKS");
  const long v = s ? std::strtol(s, nullptr, 10) : 0;
  return v > 0 ? v : INT64_MAX;
}

template <int E, int TR, int TC, int BR, int S>
cudaError_t LaunchTileAsync(const Problem& p, const void* in, void* out, cudaStream_t s) {
  const Args a = MakeArgs(p, in, out);
  // Resident blocks per device (SMs x blocks per SM), computed once per device.
  static std::atomic<int> resident[16];
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  int blocks = dev < 16 ? resident[dev].load(std::memory_order_relaxed) : 0;
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, TileAsyncKernel<E, TR, TC, BR, S>,
                                                        32 * BR, 0);
    if (err != cudaSuccess) return err;
    blocks = std::max(1, sms * per_sm);
    if (dev < 16) resident[dev].store(blocks, std::memory_order_relaxed);
  }
  const int64_t tiles = ((p.rows + TR - 1) / TR) * ((p.cols + TC - 1) / TC) * p.batch;
  const dim3 grid(CapGrid(std::min<int64_t>(tiles, std::min<int64_t>(blocks, PersistentBlockCap())),
                          INT_MAX));
  TileAsyncKernel<E, TR, TC, BR, S><<<grid, 32 * BR, 0, s>>>(a);
  return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------
// Skinny: the contiguous side of the tile is moved as raw 16-byte chunks, the other side as
// 16-byte vectors gathered/scattered element-wise in shared memory (SkinnyOffset layout).

// Element `k` of a 16-byte word vector <-> shared memory at logical byte `off`.
template <int E>
__device__ __forceinline__ void SkinnyGather(const unsigned char* sm, int off, uint32_t* w, int k) {
  const int ph = SkinnyOffset(off);
  if constexpr (E == 1) {
    w[k / 4] |= static_cast<uint32_t>(sm[ph]) << (8 * (k % 4));
  } else if constexpr (E == 2) {
    w[k / 2] |= static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(sm + ph))
                << (16 * (k % 2));
  } else {
#pragma unroll
    for (int i = 0; i < E / 4; ++i)
      w[k * (E / 4) + i] = *reinterpret_cast<const uint32_t*>(sm + ph + 4 * i);
  }
}

template <int E>
__device__ __forceinline__ void SkinnyScatter(unsigned char* sm, int off, const uint32_t* w,
                                              int k) {
  const int ph = SkinnyOffset(off);
  if constexpr (E == 1) {
    sm[ph] = static_cast<uint8_t>(w[k / 4] >> (8 * (k % 4)));
  } else if constexpr (E == 2) {
    *reinterpret_cast<uint16_t*>(sm + ph) = static_cast<uint16_t>(w[k / 2] >> (16 * (k % 2)));
  } else {
#pragma unroll
    for (int i = 0; i < E / 4; ++i)
      *reinterpret_cast<uint32_t*>(sm + ph + 4 * i) = w[k * (E / 4) + i];
  }
}

// One element global -> shared (logical byte off) and back.
template <int E>
__device__ __forceinline__ void SkinnyToShared(unsigned char* sm, int off, const unsigned char* g) {
  uint32_t w[E >= 4 ? E / 4 : 1];
  LoadWords<E>(g, w);
  const int ph = SkinnyOffset(off);
  if constexpr (E < 4) {
    StoreWords<E>(sm + ph, w);
  } else {
#pragma unroll
    for (int i = 0; i < E / 4; ++i) *reinterpret_cast<uint32_t*>(sm + ph + 4 * i) = w[i];
  }
}

template <int E>
__device__ __forceinline__ void SkinnyFromShared(unsigned char* g, const unsigned char* sm,
                                                 int off) {
  uint32_t w[E >= 4 ? E / 4 : 1];
  const int ph = SkinnyOffset(off);
  if constexpr (E < 4) {
    LoadWords<E>(sm + ph, w);
  } else {
#pragma unroll
    for (int i = 0; i < E / 4; ++i) w[i] = *reinterpret_cast<const uint32_t*>(sm + ph + 4 * i);
  }
  StoreWords<E>(g, w);
}

// Contiguous global bytes [0, bytes) <-> shared logical bytes [0, bytes), bytes <= MAXB. Loads
// are issued all at once (MC 16-byte chunks per thread at most) before the shared stores.
template <int E, int NT, int MAXB>
__device__ __forceinline__ void SkinnyLoadContiguous(unsigned char* sm, const unsigned char* src,
                                                     int bytes) {
  constexpr int MC = (MAXB / 16 + NT - 1) / NT;
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    const int nch = bytes / 16;
    uint32_t w[MC][4];
#pragma unroll
    for (int k = 0; k < MC; ++k) {
      const int q = threadIdx.x + k * NT;
      if (q < nch) LoadWords<16>(src + q * 16, w[k]);
    }
#pragma unroll
    for (int k = 0; k < MC; ++k) {
      const int q = threadIdx.x + k * NT;
      if (q < nch) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          *reinterpret_cast<uint32_t*>(sm + SkinnyOffset(q * 16 + 4 * i)) = w[k][i];
      }
    }
    done = nch * 16;
  }
  for (int o = done + static_cast<int>(threadIdx.x) * E; o < bytes; o += NT * E)
    SkinnyToShared<E>(sm, o, src + o);
}

template <int E, int NT, int MAXB>
__device__ __forceinline__ void SkinnyStoreContiguous(unsigned char* dst, const unsigned char* sm,
                                                      int bytes) {
  constexpr int MC = (MAXB / 16 + NT - 1) / NT;
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    const int nch = bytes / 16;
#pragma unroll
    for (int k = 0; k < MC; ++k) {
      const int q = threadIdx.x + k * NT;
      if (q < nch) {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = *reinterpret_cast<const uint32_t*>(sm + SkinnyOffset(q * 16 + 4 * i));
        StoreWords<16>(dst + q * 16, w);
      }
    }
    done = nch * 16;
  }
  for (int o = done + static_cast<int>(threadIdx.x) * E; o < bytes; o += NT * E)
    SkinnyFromShared<E>(dst + o, sm, o);
}

// Tall: cols = n <= 16 and dense input rows, so L input rows are one contiguous byte string.
// NMAX >= n bounds the per-thread unit counts (4, 8 or 16, picked at launch).
template <int E, int L, int BR, int NMAX>
__global__ void __launch_bounds__(32 * BR, 3) SkinnyTallKernel(Args a) {
  extern __shared__ __align__(16) unsigned char sm[];
  constexpr int NT = 32 * BR, V = 16 / E, NV = L / V;
  constexpr int MAXB = L * NMAX * E;
  constexpr int MU = (NMAX * NV + NT - 1) / NT;  // write units per thread at most
  const int n = static_cast<int>(a.cols);
  const int64_t ntiles = (a.rows + L - 1) / L;
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z) {
    for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
      const int64_t r0 = t * L;
      const int nr = static_cast<int>(std::min<int64_t>(L, a.rows - r0));
      SkinnyLoadContiguous<E, NT, MAXB>(sm, a.in + (z * a.rows + r0) * a.ldi * E, nr * n * E);
      __syncthreads();
#pragma unroll 2
      for (int k = 0; k < MU; ++k) {
        const int q = threadIdx.x + k * NT;
        const int c = q / NV, ov = q % NV;
        if (c >= n || ov * V >= nr) continue;
        unsigned char* dst = a.out + ((z * a.cols + c) * a.ldo + r0 + ov * V) * E;
        if (ov * V + V <= nr && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
          uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
          for (int j = 0; j < V; ++j) SkinnyGather<E>(sm, ((ov * V + j) * n + c) * E, w, j);
          StoreWords<16>(dst, w);
        } else {
          for (int j = 0; j < V && ov * V + j < nr; ++j)
            SkinnyFromShared<E>(dst + j * E, sm, ((ov * V + j) * n + c) * E);
        }
      }
      __syncthreads();
    }
  }
}

// Wide: rows = n <= 16 and dense output rows, so L output rows are one contiguous byte string.
template <int E, int L, int BR, int NMAX>
__global__ void __launch_bounds__(32 * BR, 3) SkinnyWideKernel(Args a) {
  extern __shared__ __align__(16) unsigned char sm[];
  constexpr int NT = 32 * BR, V = 16 / E, NV = L / V;
  constexpr int MAXB = L * NMAX * E;
  constexpr int MU = (NMAX * NV + NT - 1) / NT;  // load units per thread at most
  const int n = static_cast<int>(a.rows);
  const int64_t ntiles = (a.cols + L - 1) / L;
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z) {
    for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
      const int64_t c0 = t * L;
      const int nc = static_cast<int>(std::min<int64_t>(L, a.cols - c0));
      uint32_t w[MU][4];
      bool vec[MU];
#pragma unroll
      for (int k = 0; k < MU; ++k) {
        const int q = threadIdx.x + k * NT;
        const int r = q / NV, vc = q % NV;
        const unsigned char* src = a.in + ((z * a.rows + r) * a.ldi + c0 + vc * V) * E;
        vec[k] = r < n && vc * V + V <= nc && (reinterpret_cast<uintptr_t>(src) & 15) == 0;
        if (vec[k]) LoadWords<16>(src, w[k]);
      }
#pragma unroll
      for (int k = 0; k < MU; ++k) {
        const int q = threadIdx.x + k * NT;
        const int r = q / NV, vc = q % NV;
        if (r >= n || vc * V >= nc) continue;
        if (vec[k]) {
#pragma unroll
          for (int kk = 0; kk < V; ++kk)
            SkinnyScatter<E>(sm, ((vc * V + kk) * n + r) * E, w[k], kk);
        } else {
          const unsigned char* src = a.in + ((z * a.rows + r) * a.ldi + c0 + vc * V) * E;
          for (int kk = 0; kk < V && vc * V + kk < nc; ++kk)
            SkinnyToShared<E>(sm, ((vc * V + kk) * n + r) * E, src + kk * E);
        }
      }
      __syncthreads();
      SkinnyStoreContiguous<E, NT, MAXB>(a.out + (z * a.cols + c0) * a.ldo * E, sm, nc * n * E);
      __syncthreads();
    }
  }
}

template <int E, int L, int BR>
cudaError_t LaunchSkinny(const Problem& p, const void* in, void* out, cudaStream_t s) {
  const Args a = MakeArgs(p, in, out);
  const bool tall = SkinnyIsTall(p);
  const int64_t len = tall ? p.rows : p.cols;
  const int64_t n = tall ? p.cols : p.rows;
  const size_t smem = static_cast<size_t>(SkinnySharedFor(static_cast<int64_t>(L) * n * E));
  const dim3 grid(CapGrid((len + L - 1) / L, INT_MAX), 1, CapGrid(p.batch, 65535));
  if (tall) {
    if (n <= 4) {
      SkinnyTallKernel<E, L, BR, 4><<<grid, 32 * BR, smem, s>>>(a);
    } else if (n <= 8) {
      SkinnyTallKernel<E, L, BR, 8><<<grid, 32 * BR, smem, s>>>(a);
    } else {
      SkinnyTallKernel<E, L, BR, 16><<<grid, 32 * BR, smem, s>>>(a);
    }
  } else {
    if (n <= 4) {
      SkinnyWideKernel<E, L, BR, 4><<<grid, 32 * BR, smem, s>>>(a);
    } else if (n <= 8) {
      SkinnyWideKernel<E, L, BR, 8><<<grid, 32 * BR, smem, s>>>(a);
    } else {
      SkinnyWideKernel<E, L, BR, 16><<<grid, 32 * BR, smem, s>>>(a);
    }
  }
  return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------
// Registration helpers for family_e*.cu: instantiate only the entries of the file's element size.
template <bool On, int E>
void AddNaive(std::vector<Entry>& t) {
  if constexpr (On) t.push_back({NaiveConfig(), &LaunchNaive<E>});
}

template <bool On, int E, int TR, int TC, int BR, int VB, int PAD, int SWZ, int RA = 0>
void AddTile(std::vector<Entry>& t) {
  if constexpr (On) {
    TransposeConfig c;
    c.algorithm = Algorithm::kTile;
    c.tile_rows = TR;
    c.tile_cols = TC;
    c.block_rows = BR;
    c.vec_bytes = VB;
    c.pad = PAD;
    c.swizzle = SWZ;
    c.realign = RA;
    t.push_back({c, &LaunchTile<E, TR, TC, BR, VB, PAD, SWZ, RA>});
  }
}

template <bool On, int E, int TR, int TC, int BR, int S>
void AddAsync(std::vector<Entry>& t) {
  if constexpr (On) {
    TransposeConfig c;
    c.algorithm = Algorithm::kTile;
    c.tile_rows = TR;
    c.tile_cols = TC;
    c.block_rows = BR;
    c.vec_bytes = 16;
    c.pad = 0;
    c.swizzle = 1;
    c.realign = 0;
    c.async = S;
    t.push_back({c, &LaunchTileAsync<E, TR, TC, BR, S>});
  }
}

template <bool On, int E, int L, int BR>
void AddSkinny(std::vector<Entry>& t) {
  if constexpr (On) {
    TransposeConfig c;
    c.algorithm = Algorithm::kSkinny;
    c.tile_rows = L;
    c.tile_cols = 0;
    c.block_rows = BR;
    c.vec_bytes = 16;
    c.pad = 0;
    c.swizzle = 0;
    t.push_back({c, &LaunchSkinny<E, L, BR>});
  }
}

}  // namespace transposed::kernels::internal
