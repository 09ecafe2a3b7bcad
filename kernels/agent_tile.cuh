// The tile agent: one tile of a TilePolicy (kernels/policy.h) moved through shared memory in named
// phases, shared by the two tile kernels:
//   TileKernel       one tile per block per step of a grid-stride walk; loads staged through
//                    registers:   LoadTile -> StoreToShared -> barrier -> WriteTile
//   TileAsyncKernel  a persistent grid walking the tiles (TileCursor) with S shared buffers;
//                    loads are cp.async copies issued S-1 tiles ahead:
//                                 IssueLoad(next) ... wait + barrier -> WriteTile
// and by both for tiles cut by the matrix edge:  EdgeTile (predicated element copies through the
// same shared layout). Thread-to-unit mapping, shared layout and global offsets are
// TileGeometry's (tile_geometry.h), shifted_rows.h's and tile_walk.h's (tested on the CPU).
//
// Internal to kernels/. Launchers are thread-safe (the resident-block count of the persistent
// grid is cached per device in atomics).
#pragma once

#include <atomic>

#include "kernels/device_common.cuh"

namespace transposed::kernels::internal {

template <int E, int TR, int TC, int BR, int VB, int PAD, int SWZ, int RA>
struct TileAgent {
  static constexpr TileGeometry kG = TileGeometry::Make(E, TR, TC, BR, VB, PAD, SWZ, RA && !SWZ);
  static_assert(kG.Invalid() == nullptr, "inconsistent tile geometry");
  static_assert(!RA || kG.RealignInvalid() == nullptr, "inconsistent realign geometry");
  static constexpr int NT = kG.nt, U = kG.u, V = kG.v, W = kG.w, SU = kG.su;
  static constexpr int UW = U >= 4 ? U / 4 : 1;  // words per unit
  static constexpr int UPR = kG.nu;               // load units per tile row
  static constexpr int NL = kG.nl();              // load steps per thread
  static constexpr int NW = kG.nw();              // write steps per thread
  static constexpr bool kLoadExact = kG.load_units % NT == 0;
  static constexpr bool kWriteExact = kG.write_units % NT == 0;
  static constexpr int RS = kG.load_row_step();     // tile rows per load step
  static constexpr int OS = kG.write_group_step();  // column groups per write step
  // Realigning pad-layout tiles ("shifted rows"): every tile row is stored in shared memory
  // shifted by its own misalignment (LoadShifted), so element (r, c) is at Offset(r, c * E) as in
  // any tile; each output window is then gathered straight from the rows it covers (shifted by the
  // output row's misalignment), so V guard rows above and below the tile keep those reads inside
  // the array (their bytes are never stored). Elements are unpacked (W == 1) at every size.
  static_assert(!RA || !SWZ, "realigning tiles use the pad layout");
  static constexpr bool kShiftGather = RA;
  static_assert(!kShiftGather || W == 1, "shifted tiles gather unpacked elements");
  static constexpr int kGuard = kShiftGather ? V * kG.s : 0;
  // Shared bytes of one buffer (guard rows included; the tile starts kGuard bytes in).
  static constexpr int kSmemBytes = kG.smem + 2 * kGuard;

  using Tile = TileRef<TR, TC>;  // one tile (device_common.cuh)

  const Args a;  // by value: the address of a kernel parameter is never taken
  const int tid;

  __device__ __forceinline__ explicit TileAgent(const Args& args) : a(args), tid(threadIdx.x) {}

  __device__ __forceinline__ Tile At(int64_t z, int64_t ty, int64_t tx) const {
    return TileAt<E, TR, TC>(a, z, ty, tx);
  }

  // Whether the vector phases may run on tile t. A realigning tile reads up to 16 bytes past its
  // last row's end (the aligned window); the one tile where that would leave the input buffer
  // takes the edge path.
  __device__ __forceinline__ bool Interior(const Tile& t) const {
    if (!t.full()) return false;
    if constexpr (RA) {
      const unsigned char* last = t.in + static_cast<int64_t>(TR - 1) * a.ldi * E;
      return (last - (reinterpret_cast<uintptr_t>(last) & 15)) + 16 * (UPR + 1) <= a.in_end;
    }
    return true;
  }

  // ---- Phase 1 (synchronous): global -> registers, all NL loads in flight before any use.
  // Thread tid always handles unit column LoadCol(tid) and rows LoadRow(tid, k), so addresses
  // advance by a constant per k.
  __device__ __forceinline__ void LoadTile(const Tile& t, uint32_t (&buf)[NL][UW]) const {
    constexpr TileGeometry G = kG;
    const int vc = G.LoadCol(tid), lr0 = G.LoadRow(tid, 0);
    const unsigned char* gin = t.in + static_cast<int64_t>(lr0) * a.ldi * E + vc * U;
    const int64_t gstep = static_cast<int64_t>(RS) * a.ldi * E;
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      if (kLoadExact || G.LoadActive(tid, k)) LoadWords<U>(gin + k * gstep, buf[k]);
    }
  }

  // ---- Phases 1+2 of the shifted tile: every tile row as its aligned 16-byte windows (all
  // loads in flight first), each stored at its row's misalignment (PlaceWindow, shifted_rows.h):
  // thread tid loads window LoadCol(tid) of rows LoadRow(tid, k); the last window of row r,
  // needed when the row is misaligned, is thread r's.
  __device__ __forceinline__ void LoadShifted(const Tile& t, unsigned char* sm) const {
    constexpr TileGeometry G = kG;
    const int vc = G.LoadCol(tid), lr0 = G.LoadRow(tid, 0);
    const unsigned char* rin = t.in + static_cast<int64_t>(lr0) * a.ldi * E;
    const int64_t gstep = static_cast<int64_t>(RS) * a.ldi * E;
    uint32_t buf[NL][4];
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      const unsigned char* row = rin + k * gstep;
      const int o = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
      LoadWords<16>(row - o + 16 * vc, buf[k]);
    }
    for (int r = tid; r < TR; r += NT) {
      const unsigned char* row = t.in + static_cast<int64_t>(r) * a.ldi * E;
      const int o = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
      if (o != 0) {
        uint32_t x[4];
        LoadWords<16>(row - o + 16 * UPR, x);
        PlaceWindow(sm + G.Offset(r, 0), G.tcb, 16 * UPR - o, x, false, true);
      }
    }
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      const int o = static_cast<int>(reinterpret_cast<uintptr_t>(rin + k * gstep) & 15);
      PlaceWindow(sm + G.Offset(lr0 + k * RS, 0), G.tcb, 16 * vc - o, buf[k], vc == 0, false);
    }
  }

  // ---- Phase 3 of the shifted tile: step k of thread tid writes window ShiftLane(tid, k) of
  // output row ShiftCol(tid, k). The row's segment starts p bytes past a 16-byte boundary;
  // window ov is the aligned 16 bytes at segment - p + 16 ov, i.e. tile rows ov V - p / E + j,
  // gathered from the shifted rows; the first window's head and the last window's tail belong
  // to the neighbouring tiles and are left to them.
  __device__ __forceinline__ void WriteShifted(const Tile& t, const unsigned char* sm) const {
    constexpr TileGeometry G = kG;
#pragma unroll
    for (int k = 0; k < G.shift_steps(); ++k) {
      const int c = G.ShiftCol(tid, k), ov = G.ShiftLane(tid, k);
      unsigned char* seg = t.out + static_cast<int64_t>(c) * a.ldo * E;
      const int p = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
      const unsigned char* src = sm + G.Offset(ov * V - p / E, c * E);
      unsigned char* base = seg - p + 16 * ov;
      uint32_t win[4];
      GatherWindow<E>(src, G.s, win);
      if (p == 0 || ov != 0) {
        StoreWords<16>(base, win);
      } else {
        StoreWindowRange<E>(base, win, p, 16);
      }
      if (p != 0 && ov == G.g - 1) {
        GatherWindow<E>(src + V * G.s, G.s, win);
        StoreWindowRange<E>(base + 16, win, 0, p);
      }
    }
  }

  // ---- Phase 2 (synchronous): registers -> shared, in the policy's layout.
  __device__ __forceinline__ void StoreToShared(const uint32_t (&buf)[NL][UW],
                                                unsigned char* sm) const {
    constexpr TileGeometry G = kG;
    const int vc = G.LoadCol(tid);
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      if (kLoadExact || G.LoadActive(tid, k)) {
        const int row = G.LoadRow(tid, k);
        if constexpr (SU >= 4) {
#pragma unroll
          for (int piece = 0; piece < U / SU; ++piece)
            StoreWords<SU>(sm + G.Offset(row, vc * U + piece * SU), buf[k] + piece * (SU / 4));
        } else {
          StoreWords<U>(sm + G.Offset(row, vc * U), buf[k]);
        }
      }
    }
  }

  // ---- Phases 1+2 (asynchronous): global -> shared as 16-byte cp.async copies (full tiles of
  // swizzled 16-byte policies only; the caller commits and waits).
  __device__ __forceinline__ void IssueLoad(const Tile& t, unsigned char* sm) const {
    constexpr TileGeometry G = kG;
    static_assert(G.AsyncInvalid(2) == nullptr, "cp.async loads need whole 16-byte units");
    const int vc = G.LoadCol(tid), lr0 = G.LoadRow(tid, 0);
    const unsigned char* gin = t.in + static_cast<int64_t>(lr0) * a.ldi * E + vc * U;
    const int64_t gstep = static_cast<int64_t>(RS) * a.ldi * E;
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      if (kLoadExact || G.LoadActive(tid, k))
        CpAsync16(sm + G.Offset(lr0 + k * RS, vc * U), gin + k * gstep);
    }
  }

  // ---- Phase 3: shared -> gather (V input rows of W columns) -> register transpose -> global.
  // Thread tid always handles lane WriteLane(tid) of column groups WriteGroup(tid, k). Within a
  // unit the V rows share the swizzle (it depends on row / V only), so the gather is one base
  // offset plus j * S.
  __device__ __forceinline__ void WriteTile(const Tile& t, const unsigned char* sm) const {
    constexpr TileGeometry G = kG;
    const int ov = G.WriteLane(tid), owg0 = G.WriteGroup(tid, 0);
    unsigned char* gout = t.out + static_cast<int64_t>(owg0) * W * a.ldo * E + ov * U;
    const int64_t ostep = static_cast<int64_t>(OS) * W * a.ldo * E;
#pragma unroll
    for (int k = 0; k < NW; ++k) {
      if (kWriteExact || G.WriteActive(tid, k)) {
        const int owg = owg0 + k * OS;
        unsigned char* dst = gout + k * ostep;
        if constexpr (W == 1) {
          uint32_t o[UW];
          const unsigned char* src = sm + G.Offset(ov * V, owg * E);
#pragma unroll
          for (int j = 0; j < V; ++j) LoadWords<E>(src + j * G.s, o + j * (E >= 4 ? E / 4 : 0));
          StoreWords<U>(dst, o);
        } else {
          const unsigned char* src = sm + G.Offset(ov * V, owg * 4);
          uint32_t wv[V];
#pragma unroll
          for (int j = 0; j < V; ++j) wv[j] = *reinterpret_cast<const uint32_t*>(src + j * G.s);
          uint32_t o[W][UW];
          TransposePackedWords<E, V, W, UW>(wv, o);
#pragma unroll
          for (int kk = 0; kk < W; ++kk) {
            StoreWords<U>(dst + static_cast<int64_t>(kk) * a.ldo * E, o[kk]);
          }
        }
      }
    }
  }

  // ---- Edge tile: predicated element copies global -> shared -> global through the same
  // layout (one barrier between the halves; the caller synchronises before reusing sm).
  __device__ __forceinline__ void EdgeTile(const Tile& t, unsigned char* sm) const {
    EdgeTileCopy<E, TR, TC, NT>(t, a, tid, sm, [](int row, int byte) {
      constexpr TileGeometry G = kG;
      return G.Offset(row, byte);
    });
  }
};

// ------------------------------------------------------------------------------------------------
// Synchronous tile kernel: a 3-D grid-stride walk over (tile column, tile row, batch entry), tile
// rows or tile columns fastest (TilesDownFirst).
template <int E, int TR, int TC, int BR, int VB, int PAD, int SWZ, int RA>
__global__ void __launch_bounds__(32 * BR) TileKernel(Args a) {
  using Agent = TileAgent<E, TR, TC, BR, VB, PAD, SWZ, RA>;
  __shared__ __align__(16) unsigned char sm_raw[Agent::kSmemBytes];
  unsigned char* const sm = sm_raw + Agent::kGuard;
  const Agent agent(a);
  ForEachTile<E, TR, TC>(a, [&](int64_t z, int64_t ty, int64_t tx, int64_t) {
    const typename Agent::Tile t = agent.At(z, ty, tx);
    if (agent.Interior(t)) {
      if constexpr (Agent::kShiftGather) {
        agent.LoadShifted(t, sm);
        __syncthreads();
        agent.WriteShifted(t, sm);
      } else {
        uint32_t buf[Agent::NL][Agent::UW];
        agent.LoadTile(t, buf);
        agent.StoreToShared(buf, sm);
        __syncthreads();
        agent.WriteTile(t, sm);
      }
    } else {
      agent.EdgeTile(t, sm);
    }
  });
}

template <int E, int TR, int TC, int BR, int VB, int PAD, int SWZ, int RA>
Status LaunchTile(const Problem& p, const void* in, void* out, cudaStream_t s,
                  const LaunchOptions&) {
  const Args a = MakeArgs(p, in, out);
  const dim3 grid = TileWalkGrid<E, TR, TC>(p);
  TileKernel<E, TR, TC, BR, VB, PAD, SWZ, RA><<<grid, 32 * BR, 0, s>>>(a);
  return Launched();
}

// ------------------------------------------------------------------------------------------------
// Persistent tile kernel with S shared buffers (the swizzled 16-byte tile): a grid of as many
// blocks as are resident walks the tiles in order; the loads of a block's next S-1 tiles are in
// flight (cp.async) while it writes the current one. Edge tiles take EdgeTile synchronously
// (nothing is prefetched for them).
template <int E, int TR, int TC, int BR, int S>
__global__ void __launch_bounds__(32 * BR) TileAsyncKernel(Args a) {
  using Agent = TileAgent<E, TR, TC, BR, 16, 0, 1, 0>;
  static_assert(Agent::kG.AsyncInvalid(S) == nullptr, "inconsistent async geometry");
  constexpr int kBuf = Agent::kG.smem;
  __shared__ __align__(128) unsigned char sm_raw[S * kBuf];
  const Agent agent(a);
  const int64_t ntr = (a.rows + TR - 1) / TR;
  const int64_t ntc = (a.cols + TC - 1) / TC;
  const int64_t step = gridDim.x;
  const int64_t dty = step / ntc, dtx = step - dty * ntc;
  // Issues the loads of full tile c into buf (nothing for edge tiles or past the end).
  auto issue = [&](const TileCursor& c, unsigned char* buf) {
    if (c.z >= a.batch) return;
    const typename Agent::Tile t = agent.At(c.z, c.ty, c.tx);
    if (t.full()) agent.IssueLoad(t, buf);
  };
  // Buffers round robin: tile i of this block lives in buffer i % S; `at` is the tile being
  // written, `ahead` the next one to issue.
  TileCursor at = TileCursor::Start(blockIdx.x, ntr, ntc);
  TileCursor ahead = at;
#pragma unroll
  for (int k = 0; k < S - 1; ++k) {
    issue(ahead, sm_raw + k * kBuf);
    CpAsyncCommit();
    ahead.Advance(dty, dtx, ntr, ntc);
  }
  for (int b = 0; at.z < a.batch; at.Advance(dty, dtx, ntr, ntc), b = b == S - 1 ? 0 : b + 1) {
    // Buffer (b + S - 1) % S was last read before the previous iteration's closing barrier.
    const int bn = b == 0 ? S - 1 : b - 1;
    issue(ahead, sm_raw + bn * kBuf);
    CpAsyncCommit();
    ahead.Advance(dty, dtx, ntr, ntc);
    CpAsyncWait<S - 1>();  // this thread's copies of tile `at` have landed
    __syncthreads();       // ... and every thread's
    const typename Agent::Tile t = agent.At(at.z, at.ty, at.tx);
    unsigned char* const cur = sm_raw + b * kBuf;
    if (t.full()) {
      agent.WriteTile(t, cur);
    } else {
      agent.EdgeTile(t, cur);  // cur is free: no copies were issued into it for this tile
    }
    __syncthreads();  // a later iteration issues copies into cur
  }
  CpAsyncWait<0>();
}

template <int E, int TR, int TC, int BR, int S>
Status LaunchTileAsync(const Problem& p, const void* in, void* out, cudaStream_t s,
                       const LaunchOptions& o) {
  const Args a = MakeArgs(p, in, out);
  // Resident blocks per device (SMs x blocks per SM), computed once per device.
  static std::atomic<int> resident[16];
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) {
    int blocks = dev < 16 ? resident[dev].load(std::memory_order_relaxed) : 0;
    if (blocks == 0) {
      int sms = 0, per_sm = 0;
      err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, TileAsyncKernel<E, TR, TC, BR, S>, 32 * BR, 0);
      blocks = std::max(1, sms * per_sm);
      if (err == cudaSuccess && dev < 16) resident[dev].store(blocks, std::memory_order_relaxed);
    }
    if (err == cudaSuccess) {
      const int64_t tiles = ((p.rows + TR - 1) / TR) * ((p.cols + TC - 1) / TC) * p.batch;
      int64_t cap = blocks;
      if (o.max_persistent_blocks > 0) cap = std::min<int64_t>(cap, o.max_persistent_blocks);
      TileAsyncKernel<E, TR, TC, BR, S><<<CapGrid(std::min(tiles, cap), INT_MAX), 32 * BR, 0, s>>>(a);
      return Launched();
    }
  }
  return Status::Internal(std::string("persistent grid size: ") + cudaGetErrorName(err));
}

}  // namespace transposed::kernels::internal
