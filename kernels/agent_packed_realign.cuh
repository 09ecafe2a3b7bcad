// The packed realigning tile agent (TilePolicy realign 2, kernels/policy.h): 1- and 2-byte
// elements on rows of any alignment, with 16-byte global accesses on both sides and 4-byte
// shared-memory gathers (the element-size tiles move one element per memory instruction at every
// step, the shifted tiles of realign 1 gather one element per shared read). Phases:
//   StageTile  global -> shared: the aligned 16-byte windows around every tile row and the
//              16 / E rows above the tile, as they lie (cp.async, coalesced); rows past the
//              tile's extent nr (a tile cut by the matrix edge) are not staged;
//   PackTile   staging -> registers -> packed tile: each thread takes the 5 windows around 64
//              bytes of a tile row, realigns them in registers (ShiftWindows), interleaves the
//              columns whose output rows share a misalignment into words (InterleaveColumns)
//              and stores 4 16-byte chunks;
//   WriteTile  shared -> registers -> global: each thread gathers one word of 16 / E input rows
//              (shifted by its output rows' misalignment), transposes them in registers
//              (TransposePackedWords) and stores one aligned 16-byte window of 4 / E output rows
//              (a warp: 128 contiguous bytes of each output row it writes, 64 in tiles of 4
//              windows); the window that
//              straddles two tiles is the lower tile's, whole (the rows above were staged);
//              whole windows first, then the few cut by the tile's extent (output rows past nc
//              and bytes past nr are not written) or by the top of the matrix;
//   WriteTail  where the next tile down does not take this path: the partial window after the
//              last;
//   EdgeTile   tiles whose staged windows would pass the end of the input buffer: predicated
//              element copies through shared memory.
// Walking tiles (TransposeConfig::walk K, PackedRealignWalkKernel): a block takes K tiles down a
// tile column in order (Walk); the rows above of each tile after the first are the tile before's
// last packed rows (CarryRows) instead of staged ones, and each next tile is staged while the
// current one is written.
// Tiles cut by the matrix edge take the phases above, predicated on their extent (faster than
// the element copies they took before: docs/design/kernel-family.md).
// Layout, thread mapping and the register steps are PackedRealignGeometry's (packed_realign.h)
// and register_transpose.h's (tested on the CPU: bijective layout, every unit once, no bank
// conflicts).
//
// Internal to kernels/. The launchers keep only each device's function attributes (atomics);
// thread-safe.
#pragma once

#include <atomic>

#include "kernels/device_common.cuh"

namespace transposed::kernels::internal {

// K: 0 for one tile per block step, else the walk's length (PackedRealignWalkKernel).
template <int E, int TR, int RB, int BR, int K = 0>
struct PackedRealignAgent {
  static constexpr PackedRealignGeometry kG = PackedRealignGeometry::Make(E, TR, BR, RB);
  static_assert(kG.Invalid() == nullptr, "inconsistent packed realign geometry");
  static constexpr int NT = kG.nt, V = kG.v(), W = kG.w(), TC = kG.tc(), NL = kG.nl(),
                       NW = kG.nw(), P = kG.period();
  static constexpr int kRow = kG.rb;
  static constexpr int kGuard = kG.guard();
  static constexpr int kSmemBytes = kG.smem();
  // Edge tiles use a plain row-major layout of kEdgeRow-byte rows from the buffer's start (one
  // word of padding per row spreads a column's elements over the banks).
  static constexpr int kEdgeRow = kRow + 4;
  static_assert(TR * kEdgeRow <= kSmemBytes, "edge layout must fit the buffer");
  // 1-byte elements: one pack unit's registers at a time, and blocks for half the SM's threads
  // (at most 64 registers a thread). 2-byte elements: unrolled, no minimum (0: none; ptxas gives
  // 57-62 registers, but 120 with a minimum of 1 block). Measurements:
  // docs/design/kernel-family.md.
  static constexpr bool kPackOneAtATime = E == 1;
  static constexpr int kMinBlocks = E == 1 && NT < 1024 ? 1024 / NT : 0;

  using Tile = TileRef<TR, TC>;  // one tile (device_common.cuh)

  const Args a;  // by value: the address of a kernel parameter is never taken
  const int tid;

  // This thread's index, for a phase's unit mapping. Walking blocks run every phase inside their
  // walk loop, and with the member the compiler kept the units' rows, windows and offsets
  // (functions of the thread index alone) live across the loop (u8: 160-420 bytes spilled,
  // 2-byte: 122 registers against 54); a volatile read per phase keeps them per phase.
  __device__ __forceinline__ int Tid() const {
    if constexpr (K == 0) {
      return tid;
    } else {
      return ThreadIndexX();
    }
  }

  __device__ __forceinline__ explicit PackedRealignAgent(const Args& args)
      : a(args), tid(threadIdx.x) {}

  __device__ __forceinline__ Tile At(int64_t z, int64_t ty, int64_t tx) const {
    return TileAt<E, TR, TC>(a, z, ty, tx);
  }

  // The tiles of this path, whole or cut by the matrix edge: those whose last staged window
  // stays inside the input buffer (the last row's windows end up to rb + 16 bytes past the
  // aligned address below it).
  __device__ __forceinline__ bool Packed(const Tile& t) const {
    const unsigned char* last = t.in + static_cast<int64_t>(t.nr - 1) * a.ldi * E;
    return last - (reinterpret_cast<uintptr_t>(last) & 15) + kG.stage_row() <=
           a.in_end;
  }

  // ---- Phase 1: the aligned windows around every tile row (and the V rows above the tile
  // where it has some: `above`), global -> staging (cp.async, neighbouring threads on
  // neighbouring windows). The caller commits, waits and synchronises.
  __device__ __forceinline__ void StageTile(const Tile& t, unsigned char* stage,
                                            bool above) const {
    constexpr PackedRealignGeometry G = kG;
    constexpr int kWin = G.stage_windows();
    const int me = Tid();
#pragma unroll
    for (int k = 0; k < G.ns(); ++k) {
      const int u = me + k * NT;
      if (G.stage_units() % NT == 0 || u < G.stage_units()) {
        const int r = u / kWin - V, win = u % kWin;
        const unsigned char* row = t.in + static_cast<int64_t>(r) * a.ldi * E;
        const int o = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
        if ((above || r >= 0) && r < t.nr && (win < kWin - 1 || o != 0))
          CpAsync16(stage + G.StageOffset(r, win), row - o + 16 * win);
      }
    }
  }

  // ---- Phase 2: staged windows -> registers (realigned, interleaved) -> packed tile.
  __device__ __forceinline__ void PackUnit(int k, const Tile& t, const unsigned char* stage,
                                           unsigned char* sm, bool above) const {
    constexpr PackedRealignGeometry G = kG;
    const int u = Tid() + k * NT;
    const int row = G.LoadRow(u), h = G.LoadHalf(u);
    if ((G.load_units() % NT == 0 || u < G.load_units()) && (above || row >= 0) &&
        row < t.nr) {
      const int o = static_cast<int>(
          reinterpret_cast<uintptr_t>(t.in + static_cast<int64_t>(row) * a.ldi * E) & 15);
      uint32_t x[20], y[16], z[16];
#pragma unroll
      for (int i = 0; i < 5; ++i) LoadWords<16>(stage + G.StageOffset(row, 4 * h + i), x + 4 * i);
      ShiftWindows(x, o, y);
      InterleaveColumns<E>(y, z);
#pragma unroll
      for (int i = 0; i < 4; ++i) StoreWords<16>(sm + G.Offset(row, 16 * h + 4 * i), z + 4 * i);
    }
  }
  __device__ __forceinline__ void PackTile(const Tile& t, const unsigned char* stage,
                                           unsigned char* sm, bool above) const {
    if constexpr (kPackOneAtATime) {
#pragma unroll 1
      for (int k = 0; k < NL; ++k) PackUnit(k, t, stage, sm, above);
    } else {
#pragma unroll
      for (int k = 0; k < NL; ++k) PackUnit(k, t, stage, sm, above);
    }
  }

  // One output window of the W output rows of word q: input rows r .. r + V - 1 (r may start in
  // the rows above the tile or end in the guard rows below).
  __device__ __forceinline__ void Gather(const unsigned char* sm, int q, int r,
                                         uint32_t (&o)[W][4]) const {
    constexpr PackedRealignGeometry G = kG;
    uint32_t wv[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      wv[j] = *reinterpret_cast<const uint32_t*>(sm + G.Offset(r + j, q));
    TransposePackedWords<E, V, W, 4>(wv, o);
  }

  // ---- Phase 3: window `lane` of output rows ColumnOf(q, b), all starting p bytes past a
  // 16-byte boundary: window 0 begins p bytes before the tile's segment, in the tile above's
  // (whole when `above`: those rows were staged; from byte p otherwise).
  // Only output rows below nc, and only bytes below nr * E of each (PackedWindowBytes,
  // packed_realign.h): whole windows in WriteUnit, then the cut ones in WritePartialWindows. Not
  // unrolled: unrolled, the predicated stores took the 2-byte kernels from 62-64 registers to
  // 128-159; one unit at a time they use 54-56 (docs/design/kernel-family.md).
  __device__ __forceinline__ void WriteTile(const Tile& t, const unsigned char* sm,
                                            bool above) const {
#pragma unroll 1
    for (int k = 0; k < NW; ++k) WriteUnit(k, t, sm, above);
    WritePartialWindows(t, sm, above);
  }
  // The windows WriteUnit left (cut by the tile's extent, or window 0 without the rows above).
  __device__ __forceinline__ void WritePartialWindows(const Tile& t, const unsigned char* sm,
                                                      bool above) const {
    constexpr PackedRealignGeometry G = kG;
    const int64_t row_step = static_cast<int64_t>(P) * a.ldo * E;
#pragma unroll 1
    for (int k = 0; k < NW; ++k) {
      const int u = Tid() + k * NT;
      const int q = G.WriteWord(u), lane = G.WriteLane(u);
      unsigned char* const seg = t.out + static_cast<int64_t>(G.ColumnOf(q, 0)) * a.ldo * E;
      const int p = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
      const WindowBytes wb = PackedWindowBytes(lane, p, above, t.nr, E);
      if (wb.whole() || wb.empty()) continue;
      uint32_t o[W][4];
      Gather(sm, q, lane * V - p / E, o);
      unsigned char* base = seg - p + 16 * lane;
#pragma unroll
      for (int b = 0; b < W; ++b, base += row_step)
        if (G.ColumnOf(q, b) < t.nc) StoreWindowRange<E>(base, o[b], wb.lo, wb.hi);
    }
  }
  __device__ __forceinline__ void WriteUnit(int k, const Tile& t, const unsigned char* sm,
                                            bool above) const {
    constexpr PackedRealignGeometry G = kG;
    const int64_t row_step = static_cast<int64_t>(P) * a.ldo * E;  // output row c -> c + P
    const int u = Tid() + k * NT;
    const int q = G.WriteWord(u), lane = G.WriteLane(u);
    unsigned char* const seg = t.out + static_cast<int64_t>(G.ColumnOf(q, 0)) * a.ldo * E;
    const int p = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
    if (!PackedWindowBytes(lane, p, above, t.nr, E).whole()) return;
    uint32_t o[W][4];
    Gather(sm, q, lane * V - p / E, o);
    unsigned char* base = seg - p + 16 * lane;
#pragma unroll
    for (int b = 0; b < W; ++b, base += row_step)
      if (G.ColumnOf(q, b) < t.nc) StoreWords<16>(base, o[b]);
  }

  // ---- Phase 3b, where the next tile down does not take this path (edge tile, or none): the
  // tile's last p bytes of every output row, as the partial window after the last lane (the
  // first rb / 4 threads, one per shared word).
  __device__ __forceinline__ void WriteTail(const Tile& t, const unsigned char* sm) const {
    constexpr PackedRealignGeometry G = kG;
    const int q = Tid();
    if (q >= G.words()) return;
    const int64_t row_step = static_cast<int64_t>(P) * a.ldo * E;
    unsigned char* const seg = t.out + static_cast<int64_t>(G.ColumnOf(q, 0)) * a.ldo * E;
    const int p = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
    if (p == 0) return;
    // Segment bytes TR * E - p .. TR * E; a partial tile ends at nr * E.
    const int hi = PackedTailHi(p, TR, t.nr, E);
    if (hi <= 0) return;
    uint32_t o[W][4];
    Gather(sm, q, TR - p / E, o);
    unsigned char* base = seg - p + 16 * G.lanes();
#pragma unroll
    for (int b = 0; b < W; ++b, base += row_step)
      if (G.ColumnOf(q, b) < t.nc) StoreWindowRange<E>(base, o[b], 0, hi);
  }

  // ---- Walking tiles (TransposeConfig::walk): the packed rows tr - v .. tr - 1 of this tile
  // become the next tile's rows above (-v .. -1), one contiguous copy (carry_repeats). The
  // caller synchronises before (the write phase reads them) and after.
  __device__ __forceinline__ void CarryRows(unsigned char* sm) const {
    constexpr PackedRealignGeometry G = kG;
    static_assert(G.carry_repeats(), "the packed layout must repeat every tile to carry rows");
#pragma unroll
    for (int i = Tid(); i < G.carry_bytes() / 16; i += NT)
      *reinterpret_cast<uint4*>(sm + G.carry_to() + 16 * i) =
          *reinterpret_cast<const uint4*>(sm + G.carry_from() + 16 * i);
  }

  // The tiles of walk group g of tile column tx (tile rows PackedWalkGroup(g, K, ntr)), in
  // order: the first stages its rows above (where it has some), the others take them from the
  // tile before (CarryRows); each next tile on this path is staged (cp.async) while the current
  // one is written. Tiles off the packed path (the walk's last ones, near the end of the input
  // buffer) take EdgeTile. Ends synchronised.
  __device__ __forceinline__ void Walk(int64_t z, int64_t g, int64_t tx, int64_t ntr,
                                       unsigned char* stage, unsigned char* sm) const {
    const PackedWalk w = PackedWalkGroup(g, K, ntr);
    const int64_t end = w.first + w.count;
    int64_t ty = w.first;
    Tile t = At(z, ty, tx);
    bool packed = Packed(t), carried = false;
    if (packed) {
      StageTile(t, stage, ty > 0);
      CpAsyncCommit();
    }
    // Not unrolled (a walk has at most K tiles: unrolled, the u8 kernels spilled 200-480 bytes
    // and the 2-byte ones took 122-173 registers instead of 54-56).
#pragma unroll 1
    for (; ty < end && packed; ++ty) {
      const bool above = ty > 0;
      CpAsyncWait<0>();
      __syncthreads();  // the staged tile, and the carried rows, are visible
      PackTile(t, stage, sm, above && !carried);
      __syncthreads();  // packed; the staging buffer is free
      bool next_packed = false;
      Tile next = t;
      if (ty + 1 < ntr) {
        next = At(z, ty + 1, tx);
        next_packed = Packed(next);
      }
      const bool walk_on = ty + 1 < end && next_packed;
      if (walk_on) {
        StageTile(next, stage, false);
        CpAsyncCommit();
      }
      WriteTile(t, sm, above);
      // The next tile down writes this tile's last bytes (its window 0) only if it takes this
      // path too (in this walk or another block's).
      if (!next_packed) WriteTail(t, sm);
      __syncthreads();  // the write phase has read the packed rows
      if (walk_on) CarryRows(sm);
      t = next;
      packed = walk_on;
      carried = walk_on;
    }
#pragma unroll 1
    for (; ty < end; ++ty) {
      if (ty > w.first) t = At(z, ty, tx);
      EdgeTile(t, stage);
      __syncthreads();
    }
  }

  // ---- Edge tile: predicated element copies global -> shared -> global (one barrier between
  // the halves; the caller synchronises before reusing the buffer).
  __device__ __forceinline__ void EdgeTile(const Tile& t, unsigned char* buf) const {
    EdgeTileCopy<E, TR, TC, NT>(t, a, Tid(), buf,
                                [](int row, int byte) { return row * kEdgeRow + byte; });
  }
};

// One tile per block per step of a grid-stride walk, tile rows or columns fastest
// (TilesDownFirst), as TileKernel.
template <int E, int TR, int RB, int BR>
__global__ void __launch_bounds__(32 * BR, PackedRealignAgent<E, TR, RB, BR>::kMinBlocks)
    PackedRealignKernel(Args a) {
  using Agent = PackedRealignAgent<E, TR, RB, BR>;
  constexpr int TC = Agent::TC;
  unsigned char* sm_raw;
  if constexpr (Agent::kG.dynamic_smem()) {
    extern __shared__ __align__(16) unsigned char sm_dynamic[];
    sm_raw = sm_dynamic;
  } else {
    __shared__ __align__(16) unsigned char sm_static[Agent::kSmemBytes];
    sm_raw = sm_static;
  }
  unsigned char* const sm = sm_raw + Agent::kG.packed_at();
  const Agent agent(a);
  ForEachTile<E, TR, TC>(a, [&](int64_t z, int64_t ty, int64_t tx, int64_t ntr) {
    const typename Agent::Tile t = agent.At(z, ty, tx);
    if (agent.Packed(t)) {
      const bool above = ty > 0;  // rows above the tile in this matrix
      agent.StageTile(t, sm_raw, above);
      CpAsyncCommit();
      CpAsyncWait<0>();
      __syncthreads();
      agent.PackTile(t, sm_raw, sm, above);
      __syncthreads();
      agent.WriteTile(t, sm, above);
      // The next tile down writes this tile's last bytes (its window 0) only if it takes this
      // path too.
      if (ty + 1 == ntr || !agent.Packed(agent.At(z, ty + 1, tx))) agent.WriteTail(t, sm);
    } else {
      agent.EdgeTile(t, sm_raw);
    }
  });
}

// Walking tiles: block (tile column x, walk group y, batch entry z), grid-stride on each, tile
// columns fastest (the walk groups down first measured 1-6 points slower on 4097x3001 i8;
// docs/design/kernel-family.md).
template <int E, int TR, int RB, int BR, int K>
__global__ void __launch_bounds__(32 * BR, PackedRealignAgent<E, TR, RB, BR>::kMinBlocks)
    PackedRealignWalkKernel(Args a) {
  using Agent = PackedRealignAgent<E, TR, RB, BR, K>;
  constexpr int TC = Agent::TC;
  unsigned char* sm_raw;
  if constexpr (Agent::kG.dynamic_smem()) {
    extern __shared__ __align__(16) unsigned char sm_dynamic[];
    sm_raw = sm_dynamic;
  } else {
    __shared__ __align__(16) unsigned char sm_static[Agent::kSmemBytes];
    sm_raw = sm_static;
  }
  unsigned char* const sm = sm_raw + Agent::kG.packed_at();
  const Agent agent(a);
  const int64_t ntr = (a.rows + TR - 1) / TR, ntc = (a.cols + TC - 1) / TC;
  const int64_t groups = PackedWalkGroups(ntr, K);
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z)
    for (int64_t g = blockIdx.y; g < groups; g += gridDim.y)
      for (int64_t tx = blockIdx.x; tx < ntc; tx += gridDim.x)
        agent.Walk(z, g, tx, ntr, sm_raw, sm);
}

template <int E, int TR, int RB, int BR, int K>
inline auto PackedRealignKernelOf() {
  if constexpr (K == 0) {
    return &PackedRealignKernel<E, TR, RB, BR>;
  } else {
    return &PackedRealignWalkKernel<E, TR, RB, BR, K>;
  }
}

// Devices whose function attributes LaunchPackedRealign tracks (cudaGetDevice below this).
inline constexpr int kMaxAttributeDevices = 64;

// K = 0: one tile per block step (PackedRealignKernel); K >= 2: walks of K tiles
// (PackedRealignWalkKernel).
template <int E, int TR, int RB, int BR, int K = 0>
Status LaunchPackedRealign(const Problem& p, const void* in, void* out, cudaStream_t s,
                           const LaunchOptions&) {
  using Agent = PackedRealignAgent<E, TR, RB, BR>;
  constexpr int TC = Agent::TC;
  constexpr bool kDynamic = Agent::kG.dynamic_smem();
  void (*const kernel)(Args) = PackedRealignKernelOf<E, TR, RB, BR, K>();
  const Args a = MakeArgs(p, in, out);
  const int64_t ntr = (p.rows + TR - 1) / TR, ntc = (p.cols + TC - 1) / TC;
  const dim3 grid =
      K == 0 ? TileWalkGrid<E, TR, TC>(p)
             : dim3(CapGrid(ntc, INT_MAX), CapGrid(PackedWalkGroups(ntr, K > 0 ? K : 1), 65535),
                    CapGrid(p.batch, 65535));
  // The largest shared-memory carveout, so that as many blocks fit as registers allow (a failure
  // only costs occupancy), and the opt-in to more than 48 KiB of dynamic shared memory where the
  // tile needs it (a failure there fails the launch). Function attributes belong to a device's
  // context, so they are set once per device (a process may launch on several): state 0 until
  // then, else 1 + the opt-in's cudaError_t. Two threads setting them at once set the same values.
  static std::atomic<int> state[kMaxAttributeDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxAttributeDevices) {
    cudaGetLastError();
    return Status::Internal("packed realign tile: no current CUDA device below " +
                            std::to_string(kMaxAttributeDevices));
  }
  int st = state[device].load(std::memory_order_acquire);
  if (st == 0) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                         cudaSharedmemCarveoutMaxShared);
    cudaGetLastError();
    const cudaError_t optin =
        kDynamic ? cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Agent::kSmemBytes)
                 : cudaSuccess;
    cudaGetLastError();
    st = 1 + static_cast<int>(optin);
    state[device].store(st, std::memory_order_release);
  }
  if (st != 1 + static_cast<int>(cudaSuccess)) {
    return Status::Internal(std::string("packed realign tile needs ") +
                            std::to_string(Agent::kSmemBytes) + " bytes of shared memory: " +
                            cudaGetErrorString(static_cast<cudaError_t>(st - 1)));
  }
  kernel<<<grid, 32 * BR, kDynamic ? Agent::kSmemBytes : 0, s>>>(a);
  return Launched();
}

}  // namespace transposed::kernels::internal
