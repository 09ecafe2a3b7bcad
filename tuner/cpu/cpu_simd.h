// SIMD micro-kernels of the CPU backend: register transposes for every element size (1, 2, 4, 8
// and 16 bytes), one set per instruction-set level, chosen at run time from what the CPU has.
//
// Every level is the same code (cpu_simd_impl.h: GCC/Clang vector extensions, one K x K register
// transpose by log2(K) block-swap stages) compiled in its own translation unit with that level's
// flags, so the compiler picks the instructions (unpck/shuf on SSE2, vperm2i128/vshufps on AVX2,
// vpermt2* on AVX-512). The base level is the build's default target: SSE2 on x86-64, the
// portable fallback elsewhere. A register block is K x K elements of one vector each, K = min(
// vector bytes / element size, 16); a micro-tile is the 64 x 64-byte square (one cache line each
// way) made of such blocks, so every micro-tile reads and writes whole cache lines.
//
// Thread-safety: the kernels are pure functions of their arguments; call them from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace transposed::cpu_simd {

enum class Isa { kBase = 0, kAvx2 = 1, kAvx512 = 2 };

// "sse2" (the base level on x86-64) or "generic" (elsewhere), "avx2", "avx512".
const char* IsaName(Isa isa);
// The levels this CPU (and OS) can run, lowest first; always starts with kBase.
std::vector<Isa> SupportedIsas();
bool IsaSupported(Isa isa);

// One matrix of the problem: element size, leading dimensions in elements, base pointers.
struct Mat {
  const unsigned char* in;
  unsigned char* out;
  int64_t ldi, ldo;
  int elem;  // 1, 2, 4, 8 or 16
};

// Transposes input rows [i0, i1) x columns [j0, j1) of `m` into the output (out[j][i] = in[i][j]):
// whole micro-tiles with the register kernel, the ragged rest (only where the rectangle is not a
// multiple of the micro-tile edge) with scalar moves. nt: streaming (non-temporal) stores for the
// micro-tiles, through a 64-byte aligned staging tile; the caller must ensure that
// out + (j * ldo + i0) * elem is 64-byte aligned for every row j (see NtAligned). Issue
// FinishStreaming() once after the last call of a thread.
using RectFn = void (*)(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt);
RectFn RectKernel(Isa isa);
// A rectangle of one matrix: input rows [i0, i1) x input columns [j0, j1).
struct Box {
  int64_t i0, i1, j0, j1;
};
// Transposes the block `b` of `m` like RectFn, but walks its micro-tiles column by column
// (micro-tile columns outer, rows inner), so that each output row's share of the block is written
// as one run of (i1 - i0) elements, and, spread evenly over the block's micro-tiles, prefetches
// into L2 every input line of the block `next` of `next_m` (the block this thread does next; none
// if next_m is null), so that the next block's reads overlap this block's writes and its input
// is read row by row in runs of (j1 - j0) elements. Same contract for nt as RectFn.
using WalkFn = void (*)(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next);
WalkFn WalkKernel(Isa isa);
// Micro-tile edge in elements (64 / elem, at least the register block edge).
int MicroEdge(Isa isa, int elem);
// Register block edge K in elements.
int BlockEdge(Isa isa, int elem);
// Orders streaming stores before what follows (sfence on x86; nothing elsewhere).
void FinishStreaming();
// Whether streaming stores are possible for a matrix: out and every output row 64-byte aligned.
bool NtAligned(const unsigned char* out, int64_t ldo, int elem);
// Copies `bytes` from src to dst with streaming (non-temporal) stores where dst is 16-byte
// aligned (plain moves for the unaligned head and the tail; a plain memcpy where the CPU has no
// streaming stores), then FinishStreaming(). The copy the CPU backend's ceiling compares with
// memcpy: glibc's memcpy streams only above a size threshold, so below it a streaming transpose
// could beat "the ceiling".
void StreamCopy(unsigned char* dst, const unsigned char* src, int64_t bytes);

// Per-level entry points (cpu_simd_<level>.cc).
void RectBase(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt);
void WalkBase(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next);
int BlockEdgeBase(int elem);
#if defined(__x86_64__)
void RectAvx2(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt);
void WalkAvx2(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next);
int BlockEdgeAvx2(int elem);
void RectAvx512(const Mat& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool nt);
void WalkAvx512(const Mat& m, const Box& b, bool nt, const Mat* next_m, const Box& next);
int BlockEdgeAvx512(int elem);
#endif

}  // namespace transposed::cpu_simd
