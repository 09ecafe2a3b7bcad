// CpuConfig: one CPU candidate's configuration (kind, tile, threads, SIMD level, blocking,
// streaming stores), which round-trips with the candidate's name and params, the one identity of
// a CPU variant in the cache; and the candidates the CPU backend offers for a problem (the
// families and their limits are listed in tuner/cpu/cpu_backend.h).
//
// Thread-safety: values and functions without state; safe from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "tuner/backend.h"
#include "tuner/cpu/cpu_simd.h"

namespace transposed {

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

// The candidates for p: SIMD ones at the `isas` levels (supported, lowest first; the best is
// the last), on up to max_threads threads, the scalar tiles and naive loops where p is small
// enough, and with test_faults the deliberately wrong "cpu.test.*" ones.
std::vector<Candidate> CpuCandidates(const Problem& p, int max_threads,
                                     const std::vector<cpu_simd::Isa>& isas, bool test_faults);

}  // namespace transposed
