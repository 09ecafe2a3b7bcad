// The one body of the CPU micro-kernels (see cpu_simd.h), included by each instruction-set level's
// translation unit (cpu_simd_<level>.cc) after it defines:
//   TR_SIMD_VECTOR_BYTES  widest vector of the level: 16 (SSE2 / generic), 32 (AVX2), 64 (AVX-512)
// Everything here has internal linkage, so that code compiled for one level can never be picked
// by the linker for another (no shared inline or template symbols between the levels).
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "tuner/cpu/cpu_simd.h"
#include "tuner/cpu/elem_size.h"

#ifndef TR_SIMD_VECTOR_BYTES
#error "define TR_SIMD_VECTOR_BYTES before including cpu_simd_impl.h"
#endif

namespace transposed::cpu_simd {
namespace {

using Byte = unsigned char;

constexpr int kVectorBytes = TR_SIMD_VECTOR_BYTES;
constexpr int kLineBytes = 64;

constexpr int MinInt(int a, int b) { return a < b ? a : b; }
constexpr int MaxInt(int a, int b) { return a > b ? a : b; }

// Lanes of a vector: the element itself, or 8-byte halves of a 16-byte element.
template <int E> struct LaneOf;
template <> struct LaneOf<1> { using type = uint8_t; };
template <> struct LaneOf<2> { using type = uint16_t; };
template <> struct LaneOf<4> { using type = uint32_t; };
template <> struct LaneOf<8> { using type = uint64_t; };
template <> struct LaneOf<16> { using type = uint64_t; };

// Register block edge K (elements): one vector per row, at most 16 rows (the register file).
template <int E> constexpr int kBlock = MaxInt(1, MinInt(kVectorBytes / E, 16));
// Micro-tile edge M (elements): one cache line per row.
template <int E> constexpr int kMicro = MaxInt(kBlock<E>, kLineBytes / E);

template <int E> struct Vec {
  using Lane = typename LaneOf<E>::type;
  static constexpr int kLanes = kBlock<E> * E / static_cast<int>(sizeof(Lane));
  typedef Lane type __attribute__((vector_size(sizeof(Lane) * kLanes)));
};

// One block-swap stage of the transpose (Eklundh): rows a (r) and b (r + h) exchange their
// off-diagonal h-element blocks. HL = h in lanes; NL = lanes per vector.
template <typename V, int NL, int HL, bool kHigh, int... I>
inline V SwapBlocks(V a, V b, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(
      a, b,
      (kHigh ? (((I / HL) % 2 == 0) ? I + HL : NL + I) : (((I / HL) % 2 == 0) ? I : NL + I - HL))...);
}

// One stage over all pairs (i, i + H) with (i & H) == 0, unrolled at compile time.
template <int E, int H, int... I>
inline void Stage(typename Vec<E>::type* r, std::integer_sequence<int, I...>) {
  using V = typename Vec<E>::type;
  constexpr int NL = Vec<E>::kLanes;
  constexpr int HL = H * E / static_cast<int>(sizeof(typename Vec<E>::Lane));
  constexpr auto lanes = std::make_integer_sequence<int, NL>{};
  auto pair = [&](auto ic) {
    constexpr int i = decltype(ic)::value;
    if constexpr ((i & H) == 0) {
      const V a = r[i];
      const V b = r[i + H];
      r[i] = SwapBlocks<V, NL, HL, false>(a, b, lanes);
      r[i + H] = SwapBlocks<V, NL, HL, true>(a, b, lanes);
    }
  };
  (pair(std::integral_constant<int, I>{}), ...);
}

template <int E, int H>
inline void Stages(typename Vec<E>::type* r) {
  if constexpr (H >= 1) {
    Stage<E, H>(r, std::make_integer_sequence<int, kBlock<E>>{});
    Stages<E, H / 2>(r);
  }
}

// One interleave stage (the perfect shuffle): rows i and i + K/2 are interleaved element by
// element into rows 2i (their low halves) and 2i + 1 (their high halves). log2(K) such stages
// transpose K x K; on 16-byte vectors each is one unpck instruction.
template <typename V, int NL, int G, bool kHigh, int... I>
inline V Interleave(V a, V b, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(
      a, b, (((I / G) % 2 ? NL : 0) + ((kHigh ? NL / G / 2 : 0) + (I / G) / 2) * G + I % G)...);
}

template <int E, int... I>
inline void InterleaveStage(typename Vec<E>::type* r, std::integer_sequence<int, I...>) {
  using V = typename Vec<E>::type;
  constexpr int K = kBlock<E>;
  constexpr int NL = Vec<E>::kLanes;
  constexpr int G = E / static_cast<int>(sizeof(typename Vec<E>::Lane));
  constexpr auto lanes = std::make_integer_sequence<int, NL>{};
  V old[K];
  ((old[I] = r[I], old[I + K / 2] = r[I + K / 2]), ...);
  ((r[2 * I] = Interleave<V, NL, G, false>(old[I], old[I + K / 2], lanes),
    r[2 * I + 1] = Interleave<V, NL, G, true>(old[I], old[I + K / 2], lanes)),
   ...);
}

template <int E, int kLeft>
inline void InterleaveStages(typename Vec<E>::type* r) {
  if constexpr (kLeft > 0) {
    InterleaveStage<E>(r, std::make_integer_sequence<int, kBlock<E> / 2>{});
    InterleaveStages<E, kLeft - 1>(r);
  }
}

constexpr int Log2(int k) { return k <= 1 ? 0 : 1 + Log2(k / 2); }

// K x K register transpose: K row loads, log2(K) stages, K row stores (all unaligned), every
// loop unrolled so that the rows live in registers. 16-byte vectors use interleave stages (native
// unpck on SSE2), wider ones block-swap stages (vperm2i128/vshufps on AVX2, vpermt2 on AVX-512).
template <int E, int... I>
inline void BlockImpl(const Byte* in, int64_t ldi_b, Byte* out, int64_t ldo_b,
                      std::integer_sequence<int, I...>) {
  using V = typename Vec<E>::type;
  V r[sizeof...(I)];
  (__builtin_memcpy(&r[I], in + I * ldi_b, sizeof(V)), ...);
  if constexpr (sizeof(V) == 16) {
    InterleaveStages<E, Log2(kBlock<E>)>(r);
  } else {
    Stages<E, kBlock<E> / 2>(r);
  }
  (__builtin_memcpy(out + I * ldo_b, &r[I], sizeof(V)), ...);
}

template <int E>
inline __attribute__((always_inline)) void Block(const Byte* in, int64_t ldi_b, Byte* out,
                                                 int64_t ldo_b) {
  BlockImpl<E>(in, ldi_b, out, ldo_b, std::make_integer_sequence<int, kBlock<E>>{});
}

// One 64-byte line from an aligned staging row to an aligned destination, bypassing the caches.
inline void StreamLine(Byte* dst, const Byte* src) {
#if defined(__AVX512F__)
  _mm512_stream_si512(reinterpret_cast<__m512i*>(dst),
                      _mm512_load_si512(reinterpret_cast<const void*>(src)));
#elif defined(__AVX__)
  for (int k = 0; k < 2; ++k)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst) + k,
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(src) + k));
#elif defined(__SSE2__)
  for (int k = 0; k < 4; ++k)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst) + k,
                     _mm_load_si128(reinterpret_cast<const __m128i*>(src) + k));
#else
  __builtin_memcpy(dst, src, kLineBytes);
#endif
}

// Lines ahead (in the row direction) whose input the micro-tile prefetches: the next micro-tiles
// of a row band read the following line of each of the same M rows, more streams than the
// hardware prefetchers track.
constexpr int kPrefetchLines = 2;

#if TR_SIMD_VECTOR_BYTES == 64 && defined(__AVX512BW__)
// AVX-512 micro-tile for 1- and 2-byte elements (the register block of 16 x 16 in xmm/ymm would
// take 4 to 8 times the shuffles). The M x 64-byte tile is four groups of G = 16 / E rows, one zmm
// per row. Phase 1, per group: G zmm loads and log2(G) interleave stages of unpck (each acts
// within the four 128-bit lanes at once), after which register j's lane c holds the group's
// share (16 bytes) of output row c * G + j; the G registers go to an aligned scratch tile in L1
// (whole 64-byte stores, so the loads of phase 2 forward from them). Phase 2, per j: the four
// groups' registers j, a 4 x 4 transpose of 128-bit lanes (8 vshufi64x2), are output rows
// j, G + j, 2G + j, 3G + j, stored whole (or streamed) straight from the registers.
template <int E>
inline __m512i UnpackLo(__m512i a, __m512i b) {
  if constexpr (E == 1) return _mm512_unpacklo_epi8(a, b);
  else return _mm512_unpacklo_epi16(a, b);
}
template <int E>
inline __m512i UnpackHi(__m512i a, __m512i b) {
  if constexpr (E == 1) return _mm512_unpackhi_epi8(a, b);
  else return _mm512_unpackhi_epi16(a, b);
}

template <int E, bool kNt>
inline void LaneMicroImpl(const Byte* in, int64_t ldi_b, Byte* out, int64_t ldo_b) {
  static_assert(E == 1 || E == 2, "1- and 2-byte elements only");
  constexpr int G = 16 / E;
  constexpr int kStages = Log2(G);
  typedef int64_t Q __attribute__((vector_size(64)));
  Q scratch[4][G];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    __m512i r[G];
#pragma GCC unroll 16
    for (int j = 0; j < G; ++j) r[j] = _mm512_loadu_si512(in + (g * G + j) * ldi_b);
    // log2(G) perfect shuffles: rows i and i + G/2 interleave into rows 2i and 2i + 1.
#pragma GCC unroll 4
    for (int stage = 0; stage < kStages; ++stage) {
      __m512i o[G];
#pragma GCC unroll 8
      for (int i = 0; i < G / 2; ++i) {
        o[2 * i] = UnpackLo<E>(r[i], r[i + G / 2]);
        o[2 * i + 1] = UnpackHi<E>(r[i], r[i + G / 2]);
      }
#pragma GCC unroll 16
      for (int i = 0; i < G; ++i) r[i] = o[i];
    }
#pragma GCC unroll 16
    for (int j = 0; j < G; ++j) scratch[g][j] = reinterpret_cast<Q>(r[j]);
  }
#pragma GCC unroll 16
  for (int j = 0; j < G; ++j) {
    // vshufi64x2 through the vector extension (GCC 12's _mm512_shuffle_i64x2 warns falsely).
    const Q a0 = scratch[0][j], a1 = scratch[1][j], a2 = scratch[2][j], a3 = scratch[3][j];
    const Q t0 = __builtin_shufflevector(a0, a1, 0, 1, 2, 3, 8, 9, 10, 11);
    const Q t1 = __builtin_shufflevector(a0, a1, 4, 5, 6, 7, 12, 13, 14, 15);
    const Q t2 = __builtin_shufflevector(a2, a3, 0, 1, 2, 3, 8, 9, 10, 11);
    const Q t3 = __builtin_shufflevector(a2, a3, 4, 5, 6, 7, 12, 13, 14, 15);
    const Q o[4] = {__builtin_shufflevector(t0, t2, 0, 1, 4, 5, 8, 9, 12, 13),
                    __builtin_shufflevector(t0, t2, 2, 3, 6, 7, 10, 11, 14, 15),
                    __builtin_shufflevector(t1, t3, 0, 1, 4, 5, 8, 9, 12, 13),
                    __builtin_shufflevector(t1, t3, 2, 3, 6, 7, 10, 11, 14, 15)};
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      Byte* dst = out + (c * G + j) * ldo_b;
      if constexpr (kNt) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), reinterpret_cast<__m512i>(o[c]));
      } else {
        __builtin_memcpy(dst, &o[c], sizeof(Q));
      }
    }
  }
}

template <int E>
inline void LaneMicro(const Byte* in, int64_t ldi_b, Byte* out, int64_t ldo_b, bool nt) {
  if (nt) {
    LaneMicroImpl<E, true>(in, ldi_b, out, ldo_b);
  } else {
    LaneMicroImpl<E, false>(in, ldi_b, out, ldo_b);
  }
}
#endif

// One M x M micro-tile (64 x 64 bytes). When one register block covers it (K == M) the block
// loads the M input lines and stores the M output lines directly (each touched once). Otherwise
// the tile's input lines are first copied whole into an aligned L1 tile, so that each input line
// is read once however its rows alias in the cache (rows 4 KiB apart share one L1 set), and the
// blocks assemble each output-row block in an aligned staging tile that is then written as whole
// lines. Streaming stores always go through the staging tile.
// kRowPrefetch: the row-band walk's prefetches (RectT); the column walk (WalkT) prefetches the
// next block instead.
template <int E, bool kRowPrefetch = true>
inline void Micro(const Byte* in, int64_t ldi_b, Byte* out, int64_t ldo_b, bool nt) {
  constexpr int K = kBlock<E>;
  constexpr int M = kMicro<E>;
  constexpr int NB = M / K;
  static_assert(M * E == kLineBytes, "a micro-tile row is one cache line");
  if constexpr (kRowPrefetch)
    for (int r = 0; r < M; ++r) __builtin_prefetch(in + r * ldi_b + kPrefetchLines * kLineBytes);
  // Plain stores read each output line for ownership: ask for the lines of the micro-tile
  // kPrefetchLines ahead (its M output rows start kPrefetchLines * M rows further on).
  if (kRowPrefetch && !nt) {
    for (int r = 0; r < M; ++r)
      __builtin_prefetch(out + (kPrefetchLines * M + r) * ldo_b, 1);
  }
#if TR_SIMD_VECTOR_BYTES == 64 && defined(__AVX512BW__)
  if constexpr (E <= 2) {
    LaneMicro<E>(in, ldi_b, out, ldo_b, nt);
    return;
  }
#endif
  if constexpr (NB == 1) {
    if (!nt) {
      Block<E>(in, ldi_b, out, ldo_b);
      return;
    }
  }
  const Byte* src = in;
  int64_t src_ld = ldi_b;
  alignas(64) Byte tile_in[NB > 1 ? M * kLineBytes : kLineBytes];
  if constexpr (NB > 1) {
    for (int r = 0; r < M; ++r)
      __builtin_memcpy(tile_in + r * kLineBytes, in + r * ldi_b, kLineBytes);
    src = tile_in;
    src_ld = kLineBytes;
  }
  alignas(64) Byte stage[K * kLineBytes];
  for (int bj = 0; bj < NB; ++bj) {
    for (int bi = 0; bi < NB; ++bi)
      Block<E>(src + bi * K * src_ld + bj * K * E, src_ld, stage + bi * K * E, kLineBytes);
    if (nt) {
      for (int k = 0; k < K; ++k) StreamLine(out + (bj * K + k) * ldo_b, stage + k * kLineBytes);
    } else {
      for (int k = 0; k < K; ++k)
        __builtin_memcpy(out + (bj * K + k) * ldo_b, stage + k * kLineBytes, kLineBytes);
    }
  }
}

template <int E>
void Scalar(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j)
      __builtin_memcpy(m.out + (j * m.ldo + i) * E, m.in + (i * m.ldi + j) * E, E);
}

template <int E>
void RectT(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt) {
  constexpr int M = kMicro<E>;
  const int64_t ldi_b = m.ldi * E;
  const int64_t ldo_b = m.ldo * E;
  const int64_t i_full = i0 + (i1 - i0) / M * M;
  const int64_t j_full = j0 + (j1 - j0) / M * M;
  for (int64_t i = i0; i < i_full; i += M)
    for (int64_t j = j0; j < j_full; j += M)
      Micro<E>(m.in + i * ldi_b + j * E, ldi_b, m.out + j * ldo_b + i * E, ldo_b, nt);
  Scalar<E>(m, i0, i_full, j_full, j1);  // right strip
  Scalar<E>(m, i_full, i1, j0, j1);      // bottom strip
}

// Prefetches (into L2: locality hint 2, prefetcht1 on x86) the input lines of a block, a few at a
// time, row by row, so that each input row is read as one run.
class BlockPrefetcher {
 public:
  BlockPrefetcher(const Mat* m, const Box& b, int64_t calls) {
    if (m == nullptr || b.i1 <= b.i0 || b.j1 <= b.j0 || calls <= 0) return;
    // Addresses as integers: the line holding a run's first byte may start before the buffer.
    const uintptr_t row =
        reinterpret_cast<uintptr_t>(m->in) + static_cast<uintptr_t>((b.i0 * m->ldi + b.j0) * m->elem);
    ld_b_ = static_cast<uintptr_t>(m->ldi * m->elem);
    rows_left_ = b.i1 - b.i0;
    // Lines of one row's run, counted from the line holding its first byte.
    const uintptr_t first = row % kLineBytes;
    line0_ = row - first;
    lines_ = (static_cast<int64_t>(first) + (b.j1 - b.j0) * m->elem + kLineBytes - 1) / kLineBytes;
    per_call_ = (rows_left_ * lines_ + calls - 1) / calls;
  }
  // The next share of the lines.
  inline void Step() {
    for (int64_t k = 0; k < per_call_ && rows_left_ > 0; ++k) {
      __builtin_prefetch(reinterpret_cast<const void*>(line0_ + static_cast<uintptr_t>(line_) * kLineBytes), 0, 2);
      if (++line_ == lines_) {
        line_ = 0;
        line0_ += ld_b_;
        --rows_left_;
      }
    }
  }

 private:
  uintptr_t line0_ = 0, ld_b_ = 0;
  int64_t rows_left_ = 0, lines_ = 0, line_ = 0, per_call_ = 0;
};

template <int E>
void WalkT(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next) {
  constexpr int M = kMicro<E>;
  const int64_t ldi_b = m.ldi * E;
  const int64_t ldo_b = m.ldo * E;
  const int64_t i_full = b.i0 + (b.i1 - b.i0) / M * M;
  const int64_t j_full = b.j0 + (b.j1 - b.j0) / M * M;
  BlockPrefetcher prefetch(next_m, next, (i_full - b.i0) / M * ((j_full - b.j0) / M));
  // 1-byte elements: a micro-tile writes 64 output rows; at power-of-two row strides of 4 KiB or
  // more, 64 streaming stores to lines that far apart in a burst run at a quarter of the speed of
  // 16 (measured, docs/design/cpu-backend.md). So up to kStageTiles micro-tiles down the column are
  // transposed into an L1 staging block first, and written out 16 rows at a time, each row's lines
  // of those tiles one after another.
  constexpr int kStageTiles = M >= 64 ? 8 : 1;
  constexpr int kBand = 16;
  alignas(64) Byte stage[kStageTiles > 1 ? M * kStageTiles * kLineBytes : kLineBytes];
  for (int64_t j = b.j0; j < j_full; j += M) {
    int64_t i = b.i0;
    if constexpr (kStageTiles > 1) {
      for (int64_t n; (n = std::min<int64_t>(kStageTiles, (i_full - i) / M)) > 1; i += n * M) {
        for (int t = 0; t < n; ++t) {
          prefetch.Step();
          Micro<E, false>(m.in + (i + t * M) * ldi_b + j * E, ldi_b, stage + t * kLineBytes,
                          kStageTiles * kLineBytes, false);
        }
        Byte* dst = m.out + j * ldo_b + i * E;
        for (int q0 = 0; q0 < M; q0 += kBand)
          for (int t = 0; t < n; ++t)
            for (int q = q0; q < q0 + kBand; ++q) {
              Byte* d = dst + q * ldo_b + t * kLineBytes;
              const Byte* src = stage + (q * kStageTiles + t) * kLineBytes;
              if (nt) {
                StreamLine(d, src);
              } else {
                __builtin_memcpy(d, src, kLineBytes);
              }
            }
      }
    }
    for (; i < i_full; i += M) {
      prefetch.Step();
      Micro<E, false>(m.in + i * ldi_b + j * E, ldi_b, m.out + j * ldo_b + i * E, ldo_b, nt);
    }
  }
  Scalar<E>(m, b.i0, i_full, j_full, b.j1);  // right strip
  Scalar<E>(m, i_full, b.i1, b.j0, b.j1);    // bottom strip
}

void Walk(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next) {
  cpu::WithElemSize(
      m.elem, [&](auto e) { WalkT<decltype(e)::value>(m, b, nt, next_m, next); }, [] {});
}

void Rect(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt) {
  cpu::WithElemSize(
      m.elem, [&](auto e) { RectT<decltype(e)::value>(m, i0, i1, j0, j1, nt); }, [] {});
}

int BlockEdgeOf(int elem) {
  return cpu::WithElemSize(
      elem, [](auto e) { return kBlock<decltype(e)::value>; }, [] { return 1; });
}

}  // namespace
}  // namespace transposed::cpu_simd
