// Device-side helpers for checking transposes bit-exactly: random fills (counter-based, so the
// host can regenerate them), poisoning an output with the bitwise NOT of the expected result,
// and a byte comparison that reports the mismatch count and the first mismatching byte.
//
// Used by the GPU test and the benchmark's correctness check. Header-only; every function takes a
// stream and is thread-safe in the CUDA sense (no shared host state).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/problem.h"
#include "core/status.h"

namespace transposed::kernels::check {

// splitmix64 finalizer: a well-mixed 64-bit value for every (seed, index).
__host__ __device__ inline uint64_t Mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Byte `i` of the fill with `seed`.
__host__ __device__ inline uint8_t FillByte(uint64_t seed, uint64_t i) {
  return static_cast<uint8_t>(Mix(seed, i / 8) >> (8 * (i % 8)));
}

static __global__ void FillKernel(uint8_t* p, int64_t bytes, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t words = bytes / 8;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride)
    reinterpret_cast<uint64_t*>(p)[i] = Mix(seed, i);
  for (int64_t i = words * 8 + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < bytes; i += stride)
    p[i] = FillByte(seed, i);
}

// Byte `o` of an output row (row_bytes = ld_out x E; its first elem_bytes = rows x E bytes are
// elements, the rest the gap): the poison of `e`, the expected byte there.
__device__ __forceinline__ uint8_t PoisonByte(uint8_t e, int64_t o, int64_t elem_bytes) {
  return o < elem_bytes ? static_cast<uint8_t>(~e) : e;
}

// The first `bytes` bytes of `out` (the output allocation) become: for output elements the bitwise
// NOT of `expected`, for the gaps between rows `expected` itself (so that a check sees the gaps a
// candidate must leave alone, whatever ran in the buffer before). 16-byte words when both
// pointers allow it; one 64-bit division per word, per byte only for words across a row's end.
static __global__ void PoisonKernel(uint8_t* out, const uint8_t* expected, int64_t bytes,
                                    int64_t row_bytes, int64_t elem_bytes, int64_t words) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool gaps = row_bytes != elem_bytes;
  for (int64_t w = first; w < words; w += stride) {
    uint4 x = reinterpret_cast<const uint4*>(expected)[w];
    const int64_t off = gaps ? (w * 16) % row_bytes : 0;
    if (!gaps || off + 16 <= elem_bytes) {
      x.x = ~x.x, x.y = ~x.y, x.z = ~x.z, x.w = ~x.w;
    } else if (!(off >= elem_bytes && off + 16 <= row_bytes)) {
      uint8_t* b = reinterpret_cast<uint8_t*>(&x);
      for (int j = 0; j < 16; ++j) b[j] = PoisonByte(b[j], (w * 16 + j) % row_bytes, elem_bytes);
    }  // else: all gap, left as expected
    reinterpret_cast<uint4*>(out)[w] = x;
  }
  for (int64_t i = words * 16 + first; i < bytes; i += stride)
    out[i] = PoisonByte(expected[i], i % row_bytes, elem_bytes);
}

// Counts the mismatching bytes (count) and the first one (first): 16-byte words when both
// pointers allow it, then the tail byte by byte.
static __global__ void CompareKernel(const uint8_t* a, const uint8_t* b, int64_t bytes,
                                     int64_t words, unsigned long long* count,
                                     unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t w = start; w < words; w += stride) {
    const uint4 x = reinterpret_cast<const uint4*>(a)[w];
    const uint4 y = reinterpret_cast<const uint4*>(b)[w];
    const uint32_t d[4] = {x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w};
    if ((d[0] | d[1] | d[2] | d[3]) == 0) continue;
    unsigned long long n = 0;
    int64_t at = -1;
    for (int q = 0; q < 4; ++q) {
      for (int j = 0; j < 4; ++j) {
        if ((d[q] >> (8 * j)) & 0xffu) {
          ++n;
          if (at < 0) at = w * 16 + q * 4 + j;  // little-endian: low byte first
        }
      }
    }
    atomicAdd(count, n);
    atomicMin(first, static_cast<unsigned long long>(at));
  }
  for (int64_t i = words * 16 + start; i < bytes; i += stride) {
    if (a[i] != b[i]) {
      atomicAdd(count, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

// Whether the E-byte word holds an IEEE NaN (E = 4: binary32, E = 8: binary64).
template <int E>
__device__ __forceinline__ bool IsNan(uint64_t w) {
  if constexpr (E == 4) {
    return (w & 0x7f800000u) == 0x7f800000u && (w & 0x007fffffu) != 0;
  } else {
    return (w & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
           (w & 0x000fffffffffffffull) != 0;
  }
}

// Like CompareKernel, element by element: equal bits, or both NaN (any payload).
template <int E>
__global__ void CompareNanKernel(const uint8_t* a, const uint8_t* b, int64_t bytes,
                                 unsigned long long* count, unsigned long long* first) {
  using W = typename std::conditional<E == 4, uint32_t, uint64_t>::type;
  const int64_t n = bytes / E;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const W x = reinterpret_cast<const W*>(a)[i], y = reinterpret_cast<const W*>(b)[i];
    if (x != y && !(IsNan<E>(x) && IsNan<E>(y))) {
      atomicAdd(count, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i * E));
    }
  }
}

inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 4 ? 65535 * 4 : b));
}

inline Status Cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

inline Status Fill(void* p, int64_t bytes, uint64_t seed, cudaStream_t s) {
  FillKernel<<<Blocks(bytes / 8 + 1), 256, 0, s>>>(static_cast<uint8_t*>(p), bytes, seed);
  return Cuda(cudaGetLastError(), "fill");
}

inline bool Aligned16(const void* a, const void* b) {
  return (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

// Poisons the output allocation of `p` in `out` from `expected` (PoisonKernel).
inline Status Poison(const Problem& p, void* out, const void* expected, cudaStream_t s) {
  const int64_t bytes = p.out_alloc_bytes();
  const int64_t words = Aligned16(out, expected) ? bytes / 16 : 0;
  PoisonKernel<<<Blocks(words > 0 ? words : bytes), 256, 0, s>>>(
      static_cast<uint8_t*>(out), static_cast<const uint8_t*>(expected), bytes,
      p.out_ld() * p.elem_size(), p.rows * p.elem_size(), words);
  return Cuda(cudaGetLastError(), "poison");
}

// Compares `bytes` bytes; OK or INTERNAL naming the mismatch count and the first bad byte, with
// its element coordinates in the output (batch, row, col) when it lies inside the matrix.
// nan_equal (4- and 8-byte elements only): elements compare equal when both are NaNs, whatever
// their payloads (the check of members with canonicalizes_nan(); counts are then elements).
// `counters`: two device words the comparison may use (CompareBytes allocates them itself).
inline Status CompareBytesWith(const Problem& p, const void* got, const void* want, int64_t bytes,
                               cudaStream_t s, bool nan_equal, unsigned long long* counters) {
  unsigned long long* d = counters;
  unsigned long long init[2] = {0, ~0ull};
  Status st = Cuda(cudaMemcpyAsync(d, init, sizeof(init), cudaMemcpyHostToDevice, s), "memcpy");
  if (st.ok()) {
    const auto* g = static_cast<const uint8_t*>(got);
    const auto* w = static_cast<const uint8_t*>(want);
    if (nan_equal && p.elem_size() == 4) {
      CompareNanKernel<4><<<Blocks(bytes / 4), 256, 0, s>>>(g, w, bytes, d, d + 1);
    } else if (nan_equal && p.elem_size() == 8) {
      CompareNanKernel<8><<<Blocks(bytes / 8), 256, 0, s>>>(g, w, bytes, d, d + 1);
    } else {
      const int64_t words = Aligned16(got, want) ? bytes / 16 : 0;
      CompareKernel<<<Blocks(words > 0 ? words : bytes), 256, 0, s>>>(g, w, bytes, words, d,
                                                                      d + 1);
    }
    st = Cuda(cudaGetLastError(), "compare");
  }
  unsigned long long res[2] = {0, 0};
  if (st.ok()) st = Cuda(cudaMemcpyAsync(res, d, sizeof(res), cudaMemcpyDeviceToHost, s), "memcpy");
  if (st.ok()) st = Cuda(cudaStreamSynchronize(s), "sync");
  if (!st.ok()) return st;
  if (res[0] == 0) return Status::OK();
  const int64_t first = static_cast<int64_t>(res[1]);
  const int64_t e = first / p.elem_size();
  const int64_t ldo = p.out_ld();
  const int64_t row = e / ldo;  // b * cols + j
  const int64_t col = e % ldo;
  std::string where = "byte " + std::to_string(first);
  if (first < p.out_alloc_bytes() && col < p.rows)
    where += " (batch " + std::to_string(row / p.cols) + ", out row " +
             std::to_string(row % p.cols) + ", out col " + std::to_string(col) + ")";
  else
    where += " (outside the matrix: a gap or the guard)";
  return Status::Internal(std::to_string(res[0]) + " mismatching bytes, first at " + where);
}

inline Status CompareBytes(const Problem& p, const void* got, const void* want, int64_t bytes,
                           cudaStream_t s, bool nan_equal = false) {
  unsigned long long* d = nullptr;
  Status st = Cuda(cudaMalloc(&d, 2 * sizeof(unsigned long long)), "malloc");
  if (!st.ok()) return st;
  st = CompareBytesWith(p, got, want, bytes, s, nan_equal, d);
  cudaFree(d);
  return st;
}

}  // namespace transposed::kernels::check
