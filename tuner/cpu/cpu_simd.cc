#include "tuner/cpu/cpu_simd.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace transposed::cpu_simd {

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kBase:
#if defined(__x86_64__)
      return "sse2";
#else
      return "generic";
#endif
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool IsaSupported(Isa isa) {
  switch (isa) {
    case Isa::kBase:
      return true;
#if defined(__x86_64__)
    // libgcc's CPU model also checks that the OS saves the vector state (XCR0).
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    case Isa::kAvx2:
    case Isa::kAvx512:
      return false;
#endif
  }
  return false;
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kBase, Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) out.push_back(isa);
  return out;
}

RectFn RectKernel(Isa isa) {
  switch (isa) {
    case Isa::kBase:
      return &RectBase;
#if defined(__x86_64__)
    case Isa::kAvx2:
      return &RectAvx2;
    case Isa::kAvx512:
      return &RectAvx512;
#else
    default:
      break;
#endif
  }
  return &RectBase;
}

WalkFn WalkKernel(Isa isa) {
  switch (isa) {
    case Isa::kBase:
      return &WalkBase;
#if defined(__x86_64__)
    case Isa::kAvx2:
      return &WalkAvx2;
    case Isa::kAvx512:
      return &WalkAvx512;
#else
    default:
      break;
#endif
  }
  return &WalkBase;
}

int BlockEdge(Isa isa, int elem) {
  switch (isa) {
    case Isa::kBase:
      return BlockEdgeBase(elem);
#if defined(__x86_64__)
    case Isa::kAvx2:
      return BlockEdgeAvx2(elem);
    case Isa::kAvx512:
      return BlockEdgeAvx512(elem);
#else
    default:
      break;
#endif
  }
  return BlockEdgeBase(elem);
}

int MicroEdge(Isa isa, int elem) {
  const int line = 64 / elem;
  const int k = BlockEdge(isa, elem);
  return line > k ? line : k;
}

void FinishStreaming() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

bool NtAligned(const unsigned char* out, int64_t ldo, int elem) {
  return reinterpret_cast<uintptr_t>(out) % 64 == 0 && (ldo * elem) % 64 == 0;
}

void StreamCopy(unsigned char* dst, const unsigned char* src, int64_t bytes) {
  if (bytes <= 0) return;
#if defined(__x86_64__)
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % 16);
  const int64_t head = std::min<int64_t>(bytes, (16 - misalign) % 16);
  std::memcpy(dst, src, static_cast<size_t>(head));
  int64_t i = head;
  // Four 16-byte streaming stores per iteration: a whole cache line when dst is 64-byte aligned.
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  std::memcpy(dst + i, src + i, static_cast<size_t>(bytes - i));
  FinishStreaming();
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

}  // namespace transposed::cpu_simd
