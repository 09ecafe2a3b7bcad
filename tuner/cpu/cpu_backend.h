// CpuBackend: the real CPU backend. Tunes SIMD, cache-blocked and plain, optionally
// multi-threaded transposes on the host, and describes the host as a device.
//
// Candidates (dtype matters only by element size, 1, 2, 4, 8 or 16 bytes):
//   cpu.{isa}.b{B}.t{N}[.nt]  SIMD register transposes (tuner/cpu/cpu_simd.h; isa: sse2 or generic,
//                             avx2, avx512, as the CPU has them) in 64 x 64-byte micro-tiles
//                             (L1), walked in B x B blocks of micro-tiles (L2; B = 1: row by
//                             row), on N threads; .nt: streaming stores, offered when the output
//                             rows are 64-byte aligned and the output is at least
//                             kCpuMinStreamingBytes; parallel problems get B = 4 only
//   cpu.{isa}.w{W}.r{R}.t{N}[.nt]  the same micro-tiles in blocks of W / E input rows x R / E
//                             input columns (W, R in bytes), each walked column by column so that
//                             every output row gets one W-byte run, while the thread's next block
//                             is prefetched into L2 row by row in R-byte runs
//   cpu.tile{T}.t{N}          T x T scalar cache blocks, T in {8,16,32,64,128} (portable)
//   cpu.naive                 row loop: reads contiguous input, writes strided output
//   cpu.naive.colwrite        column loop: reads strided input, writes contiguous output
// N > 1 only for problems of at least kCpuMinParallelBytes; the naive loops and the scalar
// tiles only for problems up to kCpuMaxNaiveBytes. Threads: at most the CPUs the process may use (its affinity mask and
// cgroup CPU quota); pool thread k is pinned to the k-th CPU of the mask.
//
// A session fills its input once, computes the reference once, and, on the first measurement,
// allocates enough rotating input/output pairs that the timed working set is at least twice the
// last-level cache (capped at kCpuMaxRotationBytes), so timings are of cold caches, like a real
// transpose of a large tensor. Buffers of 2 MiB or more are asked for transparent huge pages.
// Honest timing on a shared machine: a timed run during which one of its threads was preempted
// (an involuntary context switch) is re-taken, up to as many times as samples are wanted; the
// method JSON says how many were re-taken and how many disturbed ones had to be kept. Warm-up
// stops after 5 ms once one run is done, so a large problem is not warmed up thrice.
//
// Its parts: tuner/cpu/config.h (configurations, names, the candidate list), run.h (the kernels,
// the reference and the check), session.h (buffers and timing), thread_pool.h, host_info.h.
//
// Thread-safety: CpuBackend's const methods may be called from any thread. A Session is used by
// one thread at a time. Sessions of one backend share its thread pool, whose runs are
// serialised; measurements of two sessions at once would disturb each other, as for any backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "tuner/backend.h"
#include "tuner/cpu/config.h"
#include "tuner/cpu/cpu_simd.h"
#include "tuner/cpu/host_info.h"
#include "tuner/cpu/host_memory.h"
#include "tuner/cpu/run.h"
#include "tuner/cpu/thread_pool.h"

namespace transposed {

struct CpuBackendOptions {
  // Most threads any candidate uses; 0: the CPUs this process may use (UsableCpus()).
  int max_threads = 0;
  // Adds deliberately wrong candidates ("cpu.test.*") that their check must reject; for tests.
  bool enable_test_faults = false;
  // Where Open reads the memory available to this process (tuner/cpu/host_memory.h); a problem whose
  // buffers do not fit is refused with RESOURCE_EXHAUSTED naming the bytes.
  HostMemoryPaths memory;
  // The device instance id (DeviceInfo::uuid); empty: derived from the host's CPU description,
  // which is the same on every node of one model. Distinct ids make two daemons on identical
  // hosts (or on one host) distinct instances of one device class (transposed --instance-id).
  std::string instance_id;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {});
  ~CpuBackend() override;

  const DeviceInfo& device() const override { return device_; }
  std::vector<Candidate> Candidates(const Problem& p) const override;
  StatusOr<std::unique_ptr<Session>> Open(const Problem& p) override;

  int max_threads() const { return max_threads_; }
  // Where the cache sizes of device() came from: "sysfs", "cpuid", "sysconf" or "unknown"
  // (tuner/cpu/cpu_cache.h; the daemon warns on "unknown").
  const std::string& cache_source() const { return cache_source_; }

 private:
  CpuBackendOptions options_;
  int max_threads_;
  int64_t llc_bytes_;
  std::string cache_source_;
  std::vector<cpu_simd::Isa> isas_;  // supported SIMD levels, lowest first
  DeviceInfo device_;
  std::shared_ptr<ThreadPool> pool_;
};

}  // namespace transposed
