// The skinny agent: problems with one side of 1..256 elements, one agent for both directions
// (SkinnyDir), moving the contiguous side as raw 16-byte chunks and the other side as 16-byte
// vectors gathered/scattered element-wise in shared memory (SkinnyOffset layout, skinny_math.h):
// tall output rows as aligned 16-byte windows whatever their alignment (SegmentWindow), wide
// input rows as vectors where aligned, else element-wise.
// Internal to kernels/. Stateless launchers; thread-safe.
#pragma once

#include "kernels/device_common.cuh"
#include "transposed/kernels/config.h"

namespace transposed::kernels::internal {

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
// are issued all at once (MC 16-byte chunks per thread at most) before the shared stores. A
// misaligned string (a batch entry whose matrix bytes are not a multiple of 16) moves element by
// element, or, with SHIFT (SkinnyAgent::kShiftContiguous), every string as aligned 16-byte
// windows realigned in registers (ShiftWords, register_transpose.h): a chunk from the two windows around
// it, 2 chunks in flight a thread at a time (fewer registers than the plain path: no spills in
// 64), windows past `end`, the input buffer's end, element by element.
template <int E, int NT, int MAXB, bool SHIFT>
__device__ __forceinline__ void SkinnyLoadContiguous(unsigned char* sm, const unsigned char* src,
                                                     int bytes, const unsigned char* end) {
  constexpr int MC = (MAXB / 16 + NT - 1) / NT;
  const int o = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
  const int nch = bytes / 16;
  int done = 0;
  if (!SHIFT && o == 0) {
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
  } else if constexpr (SHIFT) {
    constexpr int G = MC < 2 ? MC : 2;
    const unsigned char* const base = src - o;  // aligned
#pragma unroll
    for (int k0 = 0; k0 < MC; k0 += G) {
      uint32_t w[G][8];
      bool ok[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int q = threadIdx.x + (k0 + g) * NT;
        ok[g] = q < nch && (o == 0 || base + q * 16 + 32 <= end);
        if (ok[g]) {
          LoadWords<16>(base + q * 16, w[g]);
          if (o != 0) {
            LoadWords<16>(base + q * 16 + 16, w[g] + 4);
          } else {
#pragma unroll
            for (int i = 4; i < 8; ++i) w[g][i] = 0;
          }
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int q = threadIdx.x + (k0 + g) * NT;
        if (ok[g]) {
          uint32_t y[4];
          ShiftWords<4>(w[g], o, y);
#pragma unroll
          for (int i = 0; i < 4; ++i)
            *reinterpret_cast<uint32_t*>(sm + SkinnyOffset(q * 16 + 4 * i)) = y[i];
        } else if (q < nch) {
          for (int b = q * 16; b < q * 16 + 16; b += E) SkinnyToShared<E>(sm, b, src + b);
        }
      }
    }
    done = nch * 16;
  }
  for (int b = done + static_cast<int>(threadIdx.x) * E; b < bytes; b += NT * E)
    SkinnyToShared<E>(sm, b, src + b);
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

// The two directions of a skinny problem (SkinnyIsTall in config.h):
//   kTall  cols = n <= 256 with dense input rows: L input rows are one contiguous byte string
//          (read raw), the output side is n rows written as 16-byte vectors gathered from shared;
//   kWide  rows = n <= 256 with dense output rows: the mirror image (input rows read as 16-byte
//          vectors and scattered into shared, L output rows one contiguous byte string).
enum class SkinnyDir { kTall, kWide };

// One tile of L elements along the long side x n along the narrow side; NMAX >= n bounds the
// per-thread unit counts (a power of two from 4 to 256, picked at launch; tall, and wide past 16:
// L is then the config's length x 16 / NMAX, so that L x NMAX, the shared bytes and the
// per-thread counts do not depend on NMAX; SkinnyTileLength, skinny_math.h).
// Phases: the contiguous side (LoadContiguous / StoreContiguous: raw 16-byte chunks), the
// strided side (LoadStrided: vectors scattered into shared / StoreStrided: windows gathered from
// shared), a barrier between them.
template <int E, int L, int BR, int NMAX, SkinnyDir D, bool SHIFT = false>
struct SkinnyAgent {
  static constexpr int NT = 32 * BR, V = 16 / E, NV = L / V;
  static constexpr int MAXB = L * NMAX * E;
  static constexpr int MU = (NMAX * NV + NT - 1) / NT;  // strided windows per thread at most

  const Args a;  // by value: the address of a kernel parameter is never taken
  const int n;   // narrow side

  __device__ __forceinline__ explicit SkinnyAgent(const Args& args)
      : a(args), n(static_cast<int>(D == SkinnyDir::kTall ? args.cols : args.rows)) {}
  __device__ __forceinline__ int64_t length() const {
    return D == SkinnyDir::kTall ? a.rows : a.cols;
  }

  // Misalignment (bytes past a 16-byte boundary) of the strided segments of narrow index i in
  // batch entry z: the long row starts at base + (z * n + i) * ld * E, and every tile's segment
  // starts a multiple of L * E (a multiple of 16) bytes further. Only the low 4 bits matter, so
  // 32-bit arithmetic (wrapping) gives them exactly.
  __device__ __forceinline__ int SegmentMisalignment(const void* base, int64_t z, int i,
                                                     int64_t ld) const {
    if constexpr (E == 16) return 0;  // 16-byte elements: pointers are element aligned
    const uint32_t row = static_cast<uint32_t>(z) * static_cast<uint32_t>(n) + i;
    return static_cast<int>((static_cast<uint32_t>(reinterpret_cast<uintptr_t>(base)) +
                             row * static_cast<uint32_t>(ld * E)) & 15u);
  }

  // Tall, strided side: for each output row c (an input column), the windows of its segment of
  // the tile (SegmentWindow, skinny_math.h): windows 0 .. NV-1 as units q = 0 .. n * NV - 1 spread
  // over the threads (MU per thread), window NV (non-empty only on a misaligned row) by thread c
  // afterwards, so the per-thread unit count is that of aligned rows. A whole window is gathered
  // from shared and stored as one 16-byte vector whatever the row's alignment; the head and
  // tail windows of a misaligned row store only the segment's bytes (StoreWindowRange).
  __device__ __forceinline__ void StoreWindow(const unsigned char* sm, int64_t z, int64_t r0,
                                              int nr, int c, int ov) const {
    const int p = SegmentMisalignment(a.out, z, c, a.ldo);
    const SegmentWindow w = WindowOfSegment(ov, p, nr, E);
    if (w.empty()) return;
    unsigned char* dst = a.out + OutputOffset(z, r0, c, a.cols, a.ldo, E) - p + 16 * ov;
    uint32_t x[4] = {0, 0, 0, 0};
    if (w.whole(E)) {
#pragma unroll
      for (int j = 0; j < V; ++j) SkinnyGather<E>(sm, ((w.first + j) * n + c) * E, x, j);
      StoreWords<16>(dst, x);
    } else {
      if constexpr (E < 16) {  // 16-byte elements are never misaligned
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (j >= w.lo && j < w.hi) SkinnyGather<E>(sm, ((w.first + j) * n + c) * E, x, j);
        StoreWindowRange<E>(dst, x, w.lo * E, w.hi * E);
      }
    }
  }

  __device__ __forceinline__ void StoreStrided(const unsigned char* sm, int64_t z, int64_t r0,
                                               int nr) const {
#pragma unroll 2
    for (int k = 0; k < MU; ++k) {
      const int q = threadIdx.x + k * NT;
      const int c = SkinnySide(q, NV), ov = SkinnyVec(q, NV);
      if (c < n) StoreWindow(sm, z, r0, nr, c, ov);
    }
    for (int c = threadIdx.x; c < n; c += NT) StoreWindow(sm, z, r0, nr, c, NV);
  }

  // Wide, strided side: input row r, vector vc of the tile's L elements, all loads in flight
  // before the scatter; 16-byte loads where the vector is aligned; on misaligned rows
  // (kShiftLoads) the two aligned windows around the vector, realigned in registers (ShiftWords,
  // register_transpose.h); element loads elsewhere (the tile's last partial vector, windows past
  // the end of the input buffer). The shifted loads are a kernel of their own (SHIFT, picked at
  // launch where some input row is misaligned), so that aligned rows keep the plain loads and
  // their registers. Not for the longest tiles (8 vectors a thread: two windows each spilled
  // 216-240 bytes; the f32 ones stage instead, kStaged). For f32 they replaced the staging
  // wherever a thread has 4 vectors or fewer (shifting code inside the staging kernels cost
  // registers). Measurements: docs/design/kernel-family.md, "Skinny tiles".
  static constexpr bool kShiftLoads = SHIFT && E < 16 && MU <= 4;
  // The tall side's contiguous input string of a batch entry that starts misaligned, as aligned
  // windows realigned in registers (SkinnyLoadContiguous), for 1- and 2-byte elements (where it
  // won; docs/design/kernel-family.md).
  static constexpr bool kShiftContiguous = SHIFT && E < 4 && D == SkinnyDir::kTall;
  // Whether SHIFT changes anything.
  static constexpr bool kShift = kShiftLoads || kShiftContiguous;
  __device__ __forceinline__ void LoadStrided(unsigned char* sm, int64_t z, int64_t c0,
                                              int nc) const {
    uint32_t w[MU][kShiftLoads ? 8 : 4];
    bool vec[MU];
#pragma unroll
    for (int k = 0; k < MU; ++k) {
      const int q = threadIdx.x + k * NT;
      const int r = SkinnySide(q, NV), vc = SkinnyVec(q, NV);
      const unsigned char* src = a.in + InputOffset(z, r, c0 + vc * V, a.rows, a.ldi, E);
      const int o = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
      const bool whole = r < n && vc * V + V <= nc;
      if constexpr (kShiftLoads) {
        vec[k] = whole && (o == 0 || src - o + 32 <= a.in_end);
        if (vec[k]) {
          LoadWords<16>(src - o, w[k]);
          if (o != 0) {
            LoadWords<16>(src - o + 16, w[k] + 4);
          } else {
#pragma unroll
            for (int i = 4; i < 8; ++i) w[k][i] = 0;
          }
        }
      } else {
        vec[k] = whole && o == 0;
        if (vec[k]) LoadWords<16>(src, w[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < MU; ++k) {
      const int q = threadIdx.x + k * NT;
      const int r = SkinnySide(q, NV), vc = SkinnyVec(q, NV);
      if (r >= n || vc * V >= nc) continue;
      const unsigned char* src = a.in + InputOffset(z, r, c0 + vc * V, a.rows, a.ldi, E);
      if (vec[k]) {
        uint32_t y[4];
        if constexpr (kShiftLoads) {
          ShiftWords<4>(w[k], static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15), y);
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) y[i] = w[k][i];
        }
#pragma unroll
        for (int kk = 0; kk < V; ++kk) SkinnyScatter<E>(sm, ((vc * V + kk) * n + r) * E, y, kk);
      } else {
        for (int kk = 0; kk < V && vc * V + kk < nc; ++kk)
          SkinnyToShared<E>(sm, ((vc * V + kk) * n + r) * E, src + kk * E);
      }
    }
  }

  // Wide, strided side on rows of any alignment (4-byte elements, where some input row is
  // misaligned): the aligned 16-byte windows around every row's segment, global -> staging area
  // (cp.async, no registers held), then each element staging -> tile layout. Windows that would
  // pass the end of the input buffer are copied element by element. Only the f32 kernels of 8
  // vectors a thread: for 1-, 2- and 8-byte elements, with 4 rows or fewer, and wherever the
  // shifted loads fit (kShiftLoads) it lost (docs/design/kernel-family.md, "Skinny tiles").
  static constexpr bool kStaged = E == 4 && D == SkinnyDir::kWide && MU > 4;
  // Blocks per SM the kernel is compiled for (registers: 64 a thread for 4 blocks of 256, 80 for
  // 3): 4 where the kernel fits 64 registers without spilling (not the wide kernels of 8 vectors
  // a thread, the staging and shifting ones, nor the wide 8-byte ones: 8 bytes of spills). The
  // phases of a block do not overlap (load, barrier, store), so more blocks keep more loads in
  // flight (docs/design/kernel-family.md, "Skinny tiles").
  static constexpr int kMinBlocks =
      D == SkinnyDir::kTall || (MU <= 4 && !kStaged && !kShiftLoads && E != 8) ? 4 : 3;
  static constexpr int kStageRow = L * E + 16;  // staged bytes per row (a multiple of 16)
  __device__ __forceinline__ void LoadStaged(unsigned char* sm, unsigned char* st, int64_t z,
                                             int64_t c0, int nc) const {
    constexpr int kWin = kStageRow / 16;
    for (int u = threadIdx.x; u < n * kWin; u += NT) {
      const int r = u / kWin, win = u % kWin;
      const unsigned char* src = a.in + InputOffset(z, r, c0, a.rows, a.ldi, E);
      const int o = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
      const int lo = win * 16, end = o + nc * E;  // staged bytes [o, end) of this row
      if (lo >= end) continue;
      const unsigned char* g = src - o + lo;
      if (g + 16 <= a.in_end) {
        CpAsync16(st + r * kStageRow + lo, g);
      } else {
        for (int b = lo < o ? o : lo; b < end && b < lo + 16; b += E)
          CopyBytes<E>(st + r * kStageRow + b, src - o + b);
      }
    }
    CpAsyncCommit();
    CpAsyncWait<0>();
    __syncthreads();
    for (int q = threadIdx.x; q < n * L; q += NT) {
      const int r = q / L, k = q % L;
      if (k >= nc) continue;
      const int o = SegmentMisalignment(a.in, z, r, a.ldi);
      SkinnyToShared<E>(sm, (k * n + r) * E, st + r * kStageRow + o + k * E);
    }
  }

  // Tile t (elements t*L .. along the long side) of batch entry z.
  __device__ __forceinline__ void Run(unsigned char* sm, unsigned char* st, int64_t z,
                                      int64_t t) const {
    const int64_t l0 = t * L;
    const int nl = static_cast<int>(std::min<int64_t>(L, length() - l0));
    if constexpr (D == SkinnyDir::kTall) {
      // Input rows l0 .. l0+nl-1 are contiguous (dense input rows of n elements).
      SkinnyLoadContiguous<E, NT, MAXB, kShiftContiguous>(
          sm, a.in + InputOffset(z, l0, 0, a.rows, a.ldi, E), nl * n * E, a.in_end);
      __syncthreads();
      StoreStrided(sm, z, l0, nl);
    } else {
      if constexpr (kStaged) {
        if (st != nullptr) {
          LoadStaged(sm, st, z, l0, nl);
        } else {
          LoadStrided(sm, z, l0, nl);
        }
      } else {
        LoadStrided(sm, z, l0, nl);
      }
      __syncthreads();
      // Output rows l0 .. l0+nl-1 are contiguous (dense output rows of n elements).
      SkinnyStoreContiguous<E, NT, MAXB>(a.out + OutputOffset(z, 0, l0, a.cols, a.ldo, E), sm,
                                         nl * n * E);
    }
    __syncthreads();  // the next tile reuses the shared buffer
  }
};

template <int E, int L, int BR, int NMAX, SkinnyDir D, bool SHIFT>
__global__ void __launch_bounds__(32 * BR, (SkinnyAgent<E, L, BR, NMAX, D, SHIFT>::kMinBlocks))
    SkinnyKernel(Args a, int stage_at) {
  extern __shared__ __align__(16) unsigned char sm[];
  const SkinnyAgent<E, L, BR, NMAX, D, SHIFT> agent(a);
  unsigned char* const st = stage_at > 0 ? sm + stage_at : nullptr;  // wide, misaligned rows
  const int64_t ntiles = (agent.length() + L - 1) / L;
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z)
    for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) agent.Run(sm, st, z, t);
}

// The kernel of one NMAX (tiles of L elements, n <= NMAX): where `shift` (some strided input row
// or contiguous batch entry misaligned), the shifting kernel (SkinnyAgent::kShift) where the agent
// has one, else the staging one (SkinnyAgent::kStaged: the rows' aligned windows after the tile,
// where that fits the 48 KiB of shared memory without opt-in), else the plain one (element loads
// on the misaligned rows).
template <int E, int L, int BR, int NMAX, SkinnyDir D>
void LaunchSkinnyKernel(const Args& a, int64_t n, dim3 grid, size_t smem, bool shift,
                        cudaStream_t s) {
  if constexpr (SkinnyAgent<E, L, BR, NMAX, D, true>::kShift) {
    if (shift) {
      SkinnyKernel<E, L, BR, NMAX, D, true><<<grid, 32 * BR, smem, s>>>(a, 0);
      return;
    }
  }
  int stage_at = 0;
  if constexpr (SkinnyAgent<E, L, BR, NMAX, D, false>::kStaged) {
    const size_t staged = smem + static_cast<size_t>(n) * (L * E + 16);
    if (shift && staged <= 48 * 1024) {
      stage_at = static_cast<int>(smem);
      smem = staged;
    }
  }
  SkinnyKernel<E, L, BR, NMAX, D, false><<<grid, 32 * BR, smem, s>>>(a, stage_at);
}

// L is the config's nominal length; the kernel for a narrow side of n <= NMAX elements runs tiles
// of SkinnyTileLength(L, n, tall) elements (skinny_math.h): L x 16 / NMAX tall; wide 2 L up to 4,
// L up to 16, L x 16 / NMAX past it.
// NMAX = SkinnyMaxSide(n), found by doubling from 4 (one kernel per power of two up to
// kSkinnyMaxSide).
template <int E, int L, int BR, SkinnyDir D, int NMAX = 4>
void LaunchSkinnyDir(const Args& a, int64_t n, dim3 grid, size_t smem, bool shift,
                     cudaStream_t s) {
  static_assert(SkinnyMaxSide(NMAX) == NMAX, "NMAX runs over the values of SkinnyMaxSide");
  if constexpr (NMAX < kSkinnyMaxSide) {
    if (SkinnyMaxSide(n) > NMAX) {
      LaunchSkinnyDir<E, L, BR, D, 2 * NMAX>(a, n, grid, smem, shift, s);
      return;
    }
  }
  constexpr bool kTall = D == SkinnyDir::kTall;
  LaunchSkinnyKernel<E, SkinnyTileLength(L, NMAX, kTall), BR, NMAX, D>(a, n, grid, smem, shift,
                                                                       s);
}

template <int E, int L, int BR>
Status LaunchSkinny(const Problem& p, const void* in, void* out, cudaStream_t s,
                    const LaunchOptions&) {
  const Args a = MakeArgs(p, in, out);
  const bool tall = SkinnyIsTall(p);
  const int64_t len = tall ? p.rows : p.cols;
  const int64_t n = tall ? p.cols : p.rows;
  const int64_t tl = SkinnyTileLength(L, n, tall);
  size_t smem = static_cast<size_t>(SkinnySharedFor(tl * n * E));
  const dim3 grid(CapGrid((len + tl - 1) / tl, INT_MAX), 1, CapGrid(p.batch, 65535));
  // Wide: some input row not 16-byte aligned (LaunchSkinnyKernel picks the kernel).
  const bool misaligned =
      (reinterpret_cast<uintptr_t>(in) & 15) != 0 || (p.in_ld() * E) % 16 != 0;
  // Tall: batch entry z's input string starts z x the matrix bytes past the base pointer.
  const bool entries_misaligned = (reinterpret_cast<uintptr_t>(in) & 15) != 0 ||
                                  (p.batch > 1 && (p.rows * n * E) % 16 != 0);
  if (tall) {
    LaunchSkinnyDir<E, L, BR, SkinnyDir::kTall>(a, n, grid, smem, entries_misaligned, s);
  } else {
    LaunchSkinnyDir<E, L, BR, SkinnyDir::kWide>(a, n, grid, smem, misaligned, s);
  }
  return Launched();
}

}  // namespace transposed::kernels::internal
