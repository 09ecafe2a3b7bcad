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

// Every output element of `p` in `out` becomes the bitwise NOT of the same element of `expected`;
// gaps between rows are left alone.
static __global__ void PoisonKernel(uint8_t* out, const uint8_t* expected, int64_t rows,
                                    int64_t cols, int64_t batch, int64_t ldo, int esize) {
  const int64_t total = batch * cols * rows * esize;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t byte = i % esize;
    const int64_t e = i / esize;
    const int64_t r = e % rows;  // output column
    const int64_t t = e / rows;  // b * cols + j
    const int64_t off = (t * ldo + r) * esize + byte;
    out[off] = static_cast<uint8_t>(~expected[off]);
  }
}

static __global__ void CompareKernel(const uint8_t* a, const uint8_t* b, int64_t bytes,
                                     unsigned long long* count, unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
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

inline Status Poison(const Problem& p, void* out, const void* expected, cudaStream_t s) {
  PoisonKernel<<<Blocks(p.bytes()), 256, 0, s>>>(static_cast<uint8_t*>(out),
                                                 static_cast<const uint8_t*>(expected), p.rows,
                                                 p.cols, p.batch, p.out_ld(), p.elem_size());
  return Cuda(cudaGetLastError(), "poison");
}

// Compares `bytes` bytes; OK or INTERNAL naming the mismatch count and the first bad byte, with
// its element coordinates in the output (batch, row, col) when it lies inside the matrix.
// nan_equal (4- and 8-byte elements only): elements compare equal when both are NaNs, whatever
// their payloads (the check of members with canonicalizes_nan(); counts are then elements).
inline Status CompareBytes(const Problem& p, const void* got, const void* want, int64_t bytes,
                           cudaStream_t s, bool nan_equal = false) {
  unsigned long long* d = nullptr;
  Status st = Cuda(cudaMalloc(&d, 2 * sizeof(unsigned long long)), "malloc");
  if (!st.ok()) return st;
  unsigned long long init[2] = {0, ~0ull};
  st = Cuda(cudaMemcpyAsync(d, init, sizeof(init), cudaMemcpyHostToDevice, s), "memcpy");
  if (st.ok()) {
    const auto* g = static_cast<const uint8_t*>(got);
    const auto* w = static_cast<const uint8_t*>(want);
    if (nan_equal && p.elem_size() == 4) {
      CompareNanKernel<4><<<Blocks(bytes / 4), 256, 0, s>>>(g, w, bytes, d, d + 1);
    } else if (nan_equal && p.elem_size() == 8) {
      CompareNanKernel<8><<<Blocks(bytes / 8), 256, 0, s>>>(g, w, bytes, d, d + 1);
    } else {
      CompareKernel<<<Blocks(bytes), 256, 0, s>>>(g, w, bytes, d, d + 1);
    }
    st = Cuda(cudaGetLastError(), "compare");
  }
  unsigned long long res[2] = {0, 0};
  if (st.ok()) st = Cuda(cudaMemcpyAsync(res, d, sizeof(res), cudaMemcpyDeviceToHost, s), "memcpy");
  if (st.ok()) st = Cuda(cudaStreamSynchronize(s), "sync");
  cudaFree(d);
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

}  // namespace transposed::kernels::check
