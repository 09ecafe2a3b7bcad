// Running one CPU configuration: the kernels behind every candidate (the naive loops, the scalar
// cache blocks, the SIMD micro-tiles of tuner/cpu/cpu_simd.h in square or column-walk blocks,
// the deliberately wrong test kinds), split over the thread pool; the reference transpose; and
// the bit-exact comparison of an output with it, gaps included. Elements are moved as bytes of
// their size, so any dtype of that size works.
//
// Thread-safety: the functions keep no state; the buffers are the caller's, and a multi-threaded
// configuration runs on the pool, whose runs are serialised.
#pragma once

#include "core/problem.h"
#include "core/status.h"
#include "tuner/cpu/config.h"
#include "tuner/cpu/thread_pool.h"

namespace transposed {

namespace cpu_internal {

// The reference transpose (plain loops over the layout of core/problem.h).
void ReferenceTranspose(const Problem& p, const unsigned char* in, unsigned char* out);
// Compares a whole output buffer (p.out_alloc_bytes(), ld gaps included) bit-exact with the
// expected one. FAILED_PRECONDITION naming the first mismatch: the element's batch, input row and
// input column (output row = input column), or the gap byte's offset.
Status CompareOutput(const Problem& p, const unsigned char* expected, const unsigned char* actual);
// Runs a configuration once on the given pool (may be null for single-threaded configs).
Status RunConfig(const CpuConfig& config, const Problem& p, const unsigned char* in,
                 unsigned char* out, ThreadPool* pool);

}  // namespace cpu_internal


}  // namespace transposed
