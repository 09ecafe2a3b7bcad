// The element-per-thread members: the trusted reference kernel (LaunchReference) and the naive
// family member; and the copy member (LaunchCopy), which moves no element: problems whose input
// and output have the same layout. Internal to kernels/. Stateless; thread-safe.
#pragma once

#include "kernels/device_common.cuh"

namespace transposed::kernels::internal {

// Reference: one element per thread, 1-D grid-stride over every element, 64-bit index math.
template <int E>
__global__ void ReferenceKernel(Args a) {
  const int64_t total = a.batch * a.rows * a.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t c = i % a.cols;
    const int64_t t = i / a.cols;
    const int64_t r = t % a.rows;
    const int64_t b = t / a.rows;
    CopyBytes<E>(a.out + ((b * a.cols + c) * a.ldo + r) * E,
                 a.in + ((b * a.rows + r) * a.ldi + c) * E);
  }
}

template <int E>
Status LaunchReferenceE(const Problem& p, const void* in, void* out, cudaStream_t s) {
  const Args a = MakeArgs(p, in, out);
  const int64_t total = p.batch * p.rows * p.cols;
  ReferenceKernel<E><<<CapGrid((total + 255) / 256, 1 << 20), 256, 0, s>>>(a);
  return Launched();
}

// ------------------------------------------------------------------------------------------------
// Naive: 32x8 threads, thread (x, y) copies element (r, c) of a 2-D grid-stride walk; reads are
// coalesced, writes are strided by ld_out.
template <int E>
__global__ void __launch_bounds__(256) NaiveKernel(Args a) {
  for (int64_t z = blockIdx.z; z < a.batch; z += gridDim.z)
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.y; r < a.rows;
         r += static_cast<int64_t>(gridDim.y) * 8)
      for (int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x; c < a.cols;
           c += static_cast<int64_t>(gridDim.x) * 32)
        CopyBytes<E>(a.out + OutputOffset(z, r, c, a.cols, a.ldo, E),
                     a.in + InputOffset(z, r, c, a.rows, a.ldi, E));
}

template <int E>
Status LaunchNaive(const Problem& p, const void* in, void* out, cudaStream_t s,
                   const LaunchOptions&) {
  const Args a = MakeArgs(p, in, out);
  const dim3 grid(CapGrid((p.cols + 31) / 32, INT_MAX), CapGrid((p.rows + 7) / 8, 65535),
                  CapGrid(p.batch, 65535));
  NaiveKernel<E><<<grid, dim3(32, 8), 0, s>>>(a);
  return Launched();
}

// ------------------------------------------------------------------------------------------------
// Copy: where the output has the input's layout (SameLayoutTransposed: one row or one column,
// both sides dense; CheckConfig refuses anything else), the transpose is the copy of the
// problem's bytes, batch entries included.
inline Status LaunchCopy(const Problem& p, const void* in, void* out, cudaStream_t s,
                         const LaunchOptions&) {
  const cudaError_t e =
      cudaMemcpyAsync(out, in, static_cast<size_t>(p.bytes()), cudaMemcpyDeviceToDevice, s);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::Internal(std::string("copy: cudaMemcpyAsync: ") + cudaGetErrorString(e));
  }
  return Status::OK();
}

}  // namespace transposed::kernels::internal
