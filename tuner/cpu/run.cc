#include "tuner/cpu/run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

#include "tuner/cpu/cpu_simd.h"
#include "tuner/cpu/elem_size.h"

namespace transposed {

namespace {

using Byte = unsigned char;

// ---------------------------------------------------------------------------------------------
// Kernels. Elements are moved with fixed-size memcpy (compiled to plain moves), so any element
// size works on any byte buffer without aliasing or alignment concerns.

struct Layout {
  int64_t rows, cols, batch, ldi, ldo;
  int64_t in_mat, out_mat;  // elements per input / output matrix, gaps included

  explicit Layout(const Problem& p)
      : rows(p.rows),
        cols(p.cols),
        batch(p.batch),
        ldi(p.in_ld()),
        ldo(p.out_ld()),
        in_mat(p.rows * p.in_ld()),
        out_mat(p.cols * p.out_ld()) {}
};

template <int E>
inline void Move(Byte* dst, const Byte* src) {
  std::memcpy(dst, src, E);
}

// Element by element: along input rows (kNaive), or along output rows (kNaiveColWrite).
template <int E, bool kColumnWalk>
void Naive(const Layout& L, const Byte* in, Byte* out) {
  const int64_t outer = kColumnWalk ? L.cols : L.rows, inner = kColumnWalk ? L.rows : L.cols;
  for (int64_t b = 0; b < L.batch; ++b) {
    const Byte* ib = in + b * L.in_mat * E;
    Byte* ob = out + b * L.out_mat * E;
    for (int64_t x = 0; x < outer; ++x)
      for (int64_t y = 0; y < inner; ++y) {
        const int64_t i = kColumnWalk ? y : x, j = kColumnWalk ? x : y;
        Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
      }
  }
}

// Tiles [begin, end) of the batch's tiles, numbered batch-major, then by tile row, tile column.
template <int E, int T>
void TileRange(const Layout& L, int64_t begin, int64_t end, const Byte* in, Byte* out) {
  const int64_t tile_rows = (L.rows + T - 1) / T;
  const int64_t tile_cols = (L.cols + T - 1) / T;
  const int64_t per_mat = tile_rows * tile_cols;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t b = t / per_mat;
    const int64_t r = t % per_mat;
    const int64_t i0 = (r / tile_cols) * T;
    const int64_t j0 = (r % tile_cols) * T;
    const Byte* ib = in + (b * L.in_mat + i0 * L.ldi + j0) * E;
    Byte* ob = out + (b * L.out_mat + j0 * L.ldo + i0) * E;
    if (i0 + T <= L.rows && j0 + T <= L.cols) {
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
    } else {
      const int64_t ni = std::min<int64_t>(T, L.rows - i0);
      const int64_t nj = std::min<int64_t>(T, L.cols - j0);
      for (int64_t i = 0; i < ni; ++i)
        for (int64_t j = 0; j < nj; ++j)
          Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
    }
  }
}

template <int E, int T>
Status Tiled(const Layout& L, int threads, const Byte* in, Byte* out, ThreadPool* pool) {
  const int64_t total = L.batch * ((L.rows + T - 1) / T) * ((L.cols + T - 1) / T);
  if (threads <= 1) {
    TileRange<E, T>(L, 0, total, in, out);
    return Status::OK();
  }
  if (pool == nullptr || pool->max_threads() < threads)
    return Status::InvalidArgument("cpu: " + std::to_string(threads) +
                                   " threads exceed the backend's thread pool");
  const int64_t chunk = total / threads;
  const int64_t extra = total % threads;
  pool->Run(threads, [&](int t) {
    const int64_t begin = t * chunk + std::min<int64_t>(t, extra);
    const int64_t end = begin + chunk + (t < extra ? 1 : 0);
    TileRange<E, T>(L, begin, end, in, out);
  });
  return Status::OK();
}

// SIMD candidates: the batch's matrices are cut into L2 blocks, numbered batch-major, then by
// block row and block column; each thread takes a contiguous range of them. Square blocks
// (c.block x M elements a side, M: the micro-tile edge) go to the level's RectFn; column-walk
// blocks (c.wrun / E rows x c.rrun / E columns) to its WalkFn, each with the thread's next block
// to prefetch.
Status RunSimd(const CpuConfig& c, const Layout& L, int elem, const Byte* in, Byte* out,
               ThreadPool* pool) {
  const auto isa = static_cast<cpu_simd::Isa>(c.isa);
  if (!cpu_simd::IsaSupported(isa))
    return Status::InvalidArgument(std::string("cpu: this CPU cannot run ") +
                                   cpu_simd::IsaName(isa) + " code");
  const cpu_simd::RectFn rect = cpu_simd::RectKernel(isa);
  const cpu_simd::WalkFn walk = cpu_simd::WalkKernel(isa);
  const bool walking = c.wrun > 0;
  const int64_t square = int64_t{cpu_simd::MicroEdge(isa, elem)} * c.block;
  const int64_t edge_i = walking ? c.wrun / elem : square;
  const int64_t edge_j = walking ? c.rrun / elem : square;
  const int64_t block_rows = (L.rows + edge_i - 1) / edge_i;
  const int64_t block_cols = (L.cols + edge_j - 1) / edge_j;
  const int64_t per_mat = block_rows * block_cols;
  const int64_t total = L.batch * per_mat;
  const bool nt = c.nt && cpu_simd::NtAligned(out, L.ldo, elem);
  auto mat = [&](int64_t t) {
    const int64_t b = t / per_mat;
    return cpu_simd::Mat{in + b * L.in_mat * elem, out + b * L.out_mat * elem, L.ldi, L.ldo, elem};
  };
  auto box = [&](int64_t t) {
    const int64_t r = t % per_mat;
    const int64_t i0 = (r / block_cols) * edge_i;
    const int64_t j0 = (r % block_cols) * edge_j;
    return cpu_simd::Box{i0, std::min(L.rows, i0 + edge_i), j0, std::min(L.cols, j0 + edge_j)};
  };
  auto range = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const cpu_simd::Mat m = mat(t);
      const cpu_simd::Box b = box(t);
      if (walking && t + 1 < end) {
        const cpu_simd::Mat next_m = mat(t + 1);  // only formed inside the batch's buffers
        walk(m, b, nt, &next_m, box(t + 1));
      } else if (walking) {
        walk(m, b, nt, nullptr, b);  // the last block of this range: nothing to prefetch
      } else {
        rect(m, b.i0, b.i1, b.j0, b.j1, nt);
      }
    }
    if (nt) cpu_simd::FinishStreaming();
  };
  if (c.threads <= 1) {
    range(0, total);
    return Status::OK();
  }
  if (pool == nullptr || pool->max_threads() < c.threads)
    return Status::InvalidArgument("cpu: " + std::to_string(c.threads) +
                                   " threads exceed the backend's thread pool");
  const int64_t chunk = total / c.threads;
  const int64_t extra = total % c.threads;
  pool->Run(c.threads, [&](int t) {
    const int64_t begin = t * chunk + std::min<int64_t>(t, extra);
    range(begin, begin + chunk + (t < extra ? 1 : 0));
  });
  return Status::OK();
}

// The reference: plain element moves in 32 x 32 blocks (the blocking only orders the loops, so
// that checking a large problem does not take seconds).
template <int E>
void ReferenceTyped(const Layout& L, const Byte* in, Byte* out) {
  constexpr int64_t kB = 32;
  for (int64_t b = 0; b < L.batch; ++b) {
    const Byte* ib = in + b * L.in_mat * E;
    Byte* ob = out + b * L.out_mat * E;
    for (int64_t i0 = 0; i0 < L.rows; i0 += kB)
      for (int64_t j0 = 0; j0 < L.cols; j0 += kB)
        for (int64_t i = i0; i < std::min(L.rows, i0 + kB); ++i)
          for (int64_t j = j0; j < std::min(L.cols, j0 + kB); ++j)
            Move<E>(ob + (j * L.ldo + i) * E, ib + (i * L.ldi + j) * E);
  }
}

template <int E>
Status RunTyped(const CpuConfig& c, const Layout& L, const Byte* in, Byte* out, ThreadPool* pool) {
  using Kind = CpuConfig::Kind;
  switch (c.kind) {
    case Kind::kNaive:
      Naive<E, false>(L, in, out);
      return Status::OK();
    case Kind::kNaiveColWrite:
      Naive<E, true>(L, in, out);
      return Status::OK();
    case Kind::kTestSkipLast: {
      // Wrong on purpose: restores the old value of the very last element after a transpose.
      Byte* last = out + ((L.batch - 1) * L.out_mat + (L.cols - 1) * L.ldo + (L.rows - 1)) * E;
      Byte saved[E];
      std::memcpy(saved, last, E);
      Naive<E, false>(L, in, out);
      std::memcpy(last, saved, E);
      return Status::OK();
    }
    case Kind::kTestGapWrite: {
      // Wrong on purpose: a correct transpose that also flips the first gap element.
      Naive<E, false>(L, in, out);
      if (L.ldo > L.rows)
        for (int k = 0; k < E; ++k) out[L.rows * E + k] = static_cast<Byte>(~out[L.rows * E + k]);
      return Status::OK();
    }
    case Kind::kSimd:
      return RunSimd(c, L, E, in, out, pool);
    case Kind::kTiled:
      switch (c.tile) {
        case 8:
          return Tiled<E, 8>(L, c.threads, in, out, pool);
        case 16:
          return Tiled<E, 16>(L, c.threads, in, out, pool);
        case 32:
          return Tiled<E, 32>(L, c.threads, in, out, pool);
        case 64:
          return Tiled<E, 64>(L, c.threads, in, out, pool);
        case 128:
          return Tiled<E, 128>(L, c.threads, in, out, pool);
      }
      return Status::InvalidArgument("cpu: unsupported tile " + std::to_string(c.tile));
  }
  return Status::InvalidArgument("cpu: unknown candidate kind");
}

}  // namespace

namespace cpu_internal {

void ReferenceTranspose(const Problem& p, const unsigned char* in, unsigned char* out) {
  const Layout L(p);
  cpu::WithElemSize(
      p.elem_size(), [&](auto e) { ReferenceTyped<decltype(e)::value>(L, in, out); }, [] {});
}

Status CompareOutput(const Problem& p, const unsigned char* expected, const unsigned char* actual) {
  const int64_t n = p.out_alloc_bytes();
  if (std::memcmp(expected, actual, static_cast<size_t>(n)) == 0) return Status::OK();
  int64_t off = 0;
  while (expected[off] == actual[off]) ++off;
  int64_t mismatched = 0;
  for (int64_t k = off; k < n; ++k) mismatched += expected[k] != actual[k] ? 1 : 0;
  const int64_t es = p.elem_size();
  const OutputByte at = LocateOutputByte(p, off);
  const int64_t e = at.element, b = at.batch, out_row = at.out_row, out_col = at.out_col;
  std::ostringstream msg;
  if (at.in_gap) {
    msg << "wrote into the output's ld gap at byte offset " << off << " (batch " << b
        << ", output row " << out_row << ", column " << out_col << " >= rows " << p.rows << ")";
  } else {
    auto hex = [&](const unsigned char* buf) {
      std::string s = "0x";
      char d[3];
      for (int64_t k = es - 1; k >= 0; --k) {  // little-endian element, most significant first
        std::snprintf(d, sizeof(d), "%02x", buf[e * es + k]);
        s += d;
      }
      return s;
    };
    msg << "mismatch at batch " << b << ", row " << out_col << ", col " << out_row << ": expected "
        << hex(expected) << ", got " << hex(actual);
  }
  msg << " (" << mismatched << " bytes differ)";
  return Status::FailedPrecondition(msg.str());
}

Status RunConfig(const CpuConfig& config, const Problem& p, const unsigned char* in,
                 unsigned char* out, ThreadPool* pool) {
  const Layout L(p);
  return cpu::WithElemSize(
      p.elem_size(), [&](auto e) { return RunTyped<decltype(e)::value>(config, L, in, out, pool); },
      [&] {
        return Status::InvalidArgument("cpu: unsupported element size " +
                                       std::to_string(p.elem_size()));
      });
}

}  // namespace cpu_internal

}  // namespace transposed
