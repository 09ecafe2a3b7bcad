// CpuBackend: the real CPU backend. Tunes plain and cache-blocked, optionally multi-threaded
// transposes on the host, and describes the host as a device.
//
// Candidates (dtype matters only by element size, 1, 2, 4, 8 or 16 bytes):
//   cpu.naive            row loop: reads contiguous input, writes strided output
//   cpu.naive.colwrite   column loop: reads strided input, writes contiguous output
//   cpu.tile{T}.t{N}     T x T cache blocks, T in {8,16,32,64,128}, on N threads; N > 1 only for
//                        problems of at least kCpuMinParallelBytes
// A session keeps one input/output/reference set for checks and, on the first measurement,
// allocates enough rotating input/output pairs that the timed working set exceeds twice the
// last-level cache (capped at kCpuMaxRotationBytes), so timings are of cold caches, like a
// real transpose of a large tensor.
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

namespace transposed {

struct CpuBackendOptions {
  // Most threads any candidate uses; 0: std::thread::hardware_concurrency().
  int max_threads = 0;
  // Adds deliberately wrong candidates ("cpu.test.*") that their check must reject; for tests.
  bool enable_test_faults = false;
};

// Problems smaller than this get single-threaded candidates only.
inline constexpr int64_t kCpuMinParallelBytes = 256 * 1024;
// Upper bound of a session's rotating measurement buffers.
inline constexpr int64_t kCpuMaxRotationBytes = int64_t{1} << 30;

// A CPU candidate's configuration; round-trips with a Candidate's name and params.
struct CpuConfig {
  enum class Kind { kNaive, kNaiveColWrite, kTiled, kTestSkipLast, kTestGapWrite };
  Kind kind = Kind::kNaive;
  int tile = 0;     // kTiled only
  int threads = 1;  // kTiled only may use more than one

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

 private:
  CpuBackendOptions options_;
  int max_threads_;
  int64_t llc_bytes_;
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

}  // namespace cpu_internal

// A persistent pool of worker threads, so that thread creation is never timed. Run() calls are
// serialised by an internal mutex; safe to share between threads.
class ThreadPool {
 public:
  explicit ThreadPool(int max_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int max_threads() const { return max_threads_; }
  // Calls fn(t) for every t in [0, n) (n clamped to [1, max_threads]), t = 0 on the calling
  // thread, the others on workers (started on first use); returns when all have returned.
  // If a worker cannot be started, its share runs on the calling thread.
  void Run(int n, const std::function<void(int)>& fn);

 private:
  void Worker(int id, uint64_t generation);

  struct State;
  const int max_threads_;
  std::unique_ptr<State> state_;
};

}  // namespace transposed
