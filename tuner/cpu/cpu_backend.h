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
// cgroup CPU quota); worker k is pinned to the k-th CPU of the mask.
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
// Thread-safety: CpuBackend's const methods may be called from any thread. A Session is used by
// one thread at a time. Sessions of one backend share its worker pool, whose runs are
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
#include "tuner/cpu/cpu_simd.h"
#include "tuner/cpu/host_memory.h"

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

// Problems smaller than this get single-threaded candidates only.
inline constexpr int64_t kCpuMinParallelBytes = 256 * 1024;
// Problems larger than this get no naive and no scalar-tile candidates (they cannot win and take
// long to time).
inline constexpr int64_t kCpuMaxNaiveBytes = 4 << 20;
// Outputs of at least this many bytes (with 64-byte aligned rows) get streaming-store variants.
inline constexpr int64_t kCpuMinStreamingBytes = 1 << 20;
// Largest run (bytes) of a column-walk SIMD candidate's block side (cpu.{isa}.w{W}.r{R}...).
inline constexpr int kCpuMaxRunBytes = 64 << 10;
// Upper bound of a session's rotating measurement buffers.
inline constexpr int64_t kCpuMaxRotationBytes = int64_t{1} << 30;

// A CPU candidate's configuration; round-trips with a Candidate's name and params.
struct CpuConfig {
  enum class Kind { kNaive, kNaiveColWrite, kTiled, kSimd, kTestSkipLast, kTestGapWrite };
  Kind kind = Kind::kNaive;
  int tile = 0;     // kTiled only
  int threads = 1;  // kTiled and kSimd only may use more than one
  int isa = 0;      // kSimd: cpu_simd::Isa
  int block = 1;    // kSimd: L2 block edge in micro-tiles (when wrun == 0)
  bool nt = false;  // kSimd: streaming stores
  // kSimd, column walk (when > 0): blocks of wrun / E input rows x rrun / E input columns (bytes,
  // multiples of 64), walked column by column with the next block prefetched (cpu_simd::WalkFn).
  int wrun = 0;
  int rrun = 0;

  Candidate ToCandidate() const;
  // Parses a candidate's name; its params must agree. INVALID_ARGUMENT when unknown.
  static StatusOr<CpuConfig> FromCandidate(const Candidate& c);
};

class ThreadPool;

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

// Building blocks, exposed for tests.
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
// Parses a sysfs cache size ("32K", "1024K", "32M", "512"); nullopt if malformed.
std::optional<int64_t> ParseCacheSize(const std::string& s);
// Parses a cgroup v2 cpu.max ("max 100000", "150000 100000"): the whole CPUs the quota allows
// (at least 1); nullopt if unlimited or malformed.
std::optional<int> ParseCpuMax(const std::string& s);

}  // namespace cpu_internal

// The CPUs this process may run on: its affinity mask (sched_getaffinity), limited by the cgroup
// CPU quota of its cgroup and the cgroup's ancestors (cgroup v2 cpu.max, or v1 cfs quota/period).
struct UsableCpus {
  std::vector<int> cpus;  // the affinity mask, lowest first; never empty
  int count = 1;          // min(cpus.size(), quota), at least 1
  int quota = 0;          // whole CPUs the cgroup quota allows; 0: unlimited
};
UsableCpus ReadUsableCpus();

namespace cpu_internal {

}  // namespace cpu_internal

// A persistent pool of worker threads, so that thread creation is never timed. Run() calls are
// serialised by an internal mutex; safe to share between threads.
class ThreadPool {
 public:
  // cpus: where to pin worker k (k = 1..): cpus[k % cpus.size()]; empty: no pinning.
  explicit ThreadPool(int max_threads, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int max_threads() const { return max_threads_; }
  // Calls fn(t) for every t in [0, n) (n clamped to [1, max_threads]), t = 0 on the calling
  // thread, the others on workers (started on first use); returns when all have returned.
  // If a worker cannot be started, its share runs on the calling thread.
  void Run(int n, const std::function<void(int)>& fn);
  // Involuntary context switches the workers suffered while running shares, in total so far
  // (the calling thread's share is not included: measure it with getrusage(RUSAGE_THREAD)).
  int64_t worker_preemptions() const;

 private:
  void Worker(int id, uint64_t generation);

  struct State;
  const int max_threads_;
  const std::vector<int> cpus_;
  std::unique_ptr<State> state_;
};

}  // namespace transposed
