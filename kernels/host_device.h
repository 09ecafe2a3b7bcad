// The __host__ __device__ spelling of the kernels' index math: TR_HD marks a function the CUDA
// kernels run and the CPU unit tests call (forced inline on the device, plain inline on the
// host), TR_UNROLL unrolls a loop on the device only. One concept per header (register_transpose.h,
// tile_geometry.h, shifted_rows.h, packed_realign.h, tile_walk.h, skinny_math.h) includes this.
//
// Macros only; no state.
#pragma once

#if defined(__CUDA_ARCH__)
#define TR_UNROLL _Pragma("unroll")
#else
#define TR_UNROLL
#endif
#if defined(__CUDACC__)
#define TR_HD __host__ __device__ __forceinline__
#else
#define TR_HD inline
#endif
