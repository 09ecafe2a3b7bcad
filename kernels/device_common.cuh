// Device-side building blocks shared by every agent of the transpose family: kernel arguments,
// typed loads and stores of 1..16 bytes through 32-bit words, the realigning window stores, and
// the cp.async wrappers. Internal to kernels/ (included by the agent headers).
//
// Memory layout is core/problem.h's. All global index math is 64-bit; shared-memory offsets are
// int (a tile is at most 48 KiB). Stateless; thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "core/problem.h"
#include "core/status.h"
#include "kernels/packed_realign.h"
#include "kernels/register_transpose.h"
#include "kernels/shifted_rows.h"
#include "kernels/skinny_math.h"
#include "kernels/tile_geometry.h"
#include "kernels/tile_walk.h"
#include "transposed/kernels/launch.h"

namespace transposed::kernels::internal {

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

// The status of the launch just made on this thread (no string unless it failed).
inline Status Launched() {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
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

// ---- Shared by the tile agents (agent_tile.cuh, agent_packed_realign.cuh).

// One tile of a TR x TC tiling: its first input and output bytes and its extent
// (nr x nc <= TR x TC; smaller where the matrix edge cuts it).
template <int TR, int TC>
struct TileRef {
  const unsigned char* in;
  unsigned char* out;
  int nr, nc;
  __device__ __forceinline__ bool full() const { return nr == TR && nc == TC; }
};

// Tile (ty, tx) of batch entry z (offsets from tile_walk.h).
template <int E, int TR, int TC>
__device__ __forceinline__ TileRef<TR, TC> TileAt(const Args& a, int64_t z, int64_t ty,
                                                  int64_t tx) {
  const int64_t r0 = ty * TR, c0 = tx * TC;
  TileRef<TR, TC> t;
  t.in = a.in + InputOffset(z, r0, c0, a.rows, a.ldi, E);
  t.out = a.out + OutputOffset(z, r0, c0, a.cols, a.ldo, E);
  t.nr = static_cast<int>(std::min<int64_t>(TR, a.rows - r0));
  t.nc = static_cast<int>(std::min<int64_t>(TC, a.cols - c0));
  return t;
}

// The edge-tile phase: predicated element copies global -> shared -> global for a tile cut by
// the matrix edge, element (row, col) at shared byte offset(row, col * E) (one barrier between
// the halves; the caller synchronises before reusing sm). NT threads, tid this thread's index.
template <int E, int TR, int TC, int NT, class Offset>
__device__ __forceinline__ void EdgeTileCopy(const TileRef<TR, TC>& t, const Args& a, int tid,
                                             unsigned char* sm, Offset offset) {
  for (int q = tid; q < TR * TC; q += NT) {
    const int row = q / TC, col = q % TC;
    if (row < t.nr && col < t.nc)
      CopyBytes<E>(sm + offset(row, col * E), t.in + (static_cast<int64_t>(row) * a.ldi + col) * E);
  }
  __syncthreads();
  for (int q = tid; q < TR * TC; q += NT) {
    const int oc = q / TR, orow = q % TR;
    if (oc < t.nc && orow < t.nr)
      CopyBytes<E>(t.out + (static_cast<int64_t>(oc) * a.ldo + orow) * E, sm + offset(orow, oc * E));
  }
}

// The grid-stride walk of a tile kernel over (batch entry, tile row, tile column), grid x down
// the tile rows or across the tile columns (TilesDownFirst, as TileWalkGrid launches it):
// body(z, ty, tx, ntr) for each tile of this block, then a barrier (the next tile reuses the
// shared buffer).
template <int E, int TR, int TC, class Body>
__device__ __forceinline__ void ForEachTile(const Args& a, Body&& body) {
  const int64_t ntr = (a.rows + TR - 1) / TR;
  const int64_t ntc = (a.cols + TC - 1) / TC;
  const bool down = TilesDownFirst(ntr, ntc, int64_t{TR} * TC * E);
  const int64_t bx = down ? blockIdx.y : blockIdx.x, gx = down ? gridDim.y : gridDim.x;
  const int64_t by = down ? blockIdx.x : blockIdx.y, gy = down ? gridDim.x : gridDim.y;
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z) {
    for (int64_t ty = by; ty < ntr; ty += gy) {
      for (int64_t tx = bx; tx < ntc; tx += gx) {
        body(z, ty, tx, ntr);
        __syncthreads();
      }
    }
  }
}

// The grid of a tile kernel's grid-stride walk: tile rows or tile columns on grid x
// (TilesDownFirst), the other on y, batch entries on z.
template <int E, int TR, int TC>
inline dim3 TileWalkGrid(const Problem& p) {
  const int64_t ntr = (p.rows + TR - 1) / TR, ntc = (p.cols + TC - 1) / TC;
  const bool down = TilesDownFirst(ntr, ntc, int64_t{TR} * TC * E);
  return dim3(CapGrid(down ? ntr : ntc, INT_MAX), CapGrid(down ? ntc : ntr, 65535),
              CapGrid(p.batch, 65535));
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

// threadIdx.x through a volatile read, which the compiler cannot hoist out of a loop (so that
// values computed from it are not kept live across the loop's iterations).
__device__ __forceinline__ int ThreadIndexX() {
  int x;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(x));
  return x;
}

// ---- cp.async: 16-byte global -> shared copies that bypass registers (sm_80+).
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

}  // namespace transposed::kernels::internal
