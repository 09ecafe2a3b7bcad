// CpuSession: one problem's measurement session on the host. It fills its input with random
// bytes once and computes the reference once; a check poisons the output, runs the candidate and
// compares bit-exact, gaps included. The first measurement allocates enough rotating input/output
// pairs that the timed working set is at least twice the last-level cache (capped at
// kCpuMaxRotationBytes and a quarter of the memory left), so timings are of cold caches; buffers
// of 2 MiB or more are asked for transparent huge pages. A timed run during which a thread was
// preempted is re-taken, up to as many times as samples are wanted (the method says how many).
// The ceiling is the fastest copy of the same bytes (memcpy or streaming stores, one thread or
// all).
//
// Thread-safety: a session is used by one thread at a time; sessions of one backend share its
// thread pool, whose runs are serialised.
#pragma once

#include <cstdint>
#include <memory>

#include "core/problem.h"
#include "core/status.h"
#include "tuner/backend.h"
#include "tuner/cpu/thread_pool.h"

namespace transposed {

// A session for p whose buffers have been allocated and filled (RESOURCE_EXHAUSTED naming the
// bytes when they cannot be). memory_bytes: what the rotating buffers may take at most four
// times over (0: unknown); llc_bytes: the last-level cache the rotation must exceed.
StatusOr<std::unique_ptr<Session>> OpenCpuSession(const Problem& p,
                                                  std::shared_ptr<ThreadPool> pool,
                                                  int max_threads, int64_t llc_bytes,
                                                  uint64_t memory_bytes, bool test_faults);

}  // namespace transposed
