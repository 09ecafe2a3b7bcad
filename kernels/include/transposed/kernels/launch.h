// Launching members of the transpose family on a CUDA stream.
//
// Launch() runs one configuration (see config.h) on device buffers laid out as core/problem.h
// describes; LaunchReference() runs a deliberately simple kernel (one element per thread, 64-bit
// index math) that checks and benchmarks use as the trusted reference. Both are asynchronous on
// `stream`, never abort, and report errors as Status: INVALID_ARGUMENT for a problem or config
// that does not fit (including misaligned pointers), FAILED_PRECONDITION for a vendor member
// whose library is not present, INTERNAL with the CUDA (or cuBLAS) error when the launch itself
// fails. Errors of the kernel's execution surface at the caller's next synchronization.
//
// PreparedLaunch does the checks and the table lookup once, for callers that launch the same
// configuration on the same problem many times (the tuner's timing loop, the benchmark): Run()
// then neither validates nor builds strings.
//
// Thread-safe: no shared mutable state besides the lazily loaded vendor library (its handle is
// guarded); CUDA's own rules for streams apply. Only available when built with CUDA
// (TRANSPOSED_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels {

// Explicit knobs of a launch (defaults are what production uses).
struct LaunchOptions {
  // Persistent (async) tiles: at most this many blocks; 0 = as many as are resident on the
  // device. Tests set a small cap so that every block walks many tiles.
  int64_t max_persistent_blocks = 0;
};

namespace internal {
struct Entry;
}

class PreparedLaunch {
 public:
  // Checks `c` against `p` (CheckConfig) and finds its instantiation.
  static StatusOr<PreparedLaunch> Prepare(const TransposeConfig& c, const Problem& p,
                                          const LaunchOptions& options = {});

  // Whether device pointers in/out suit this launch (alignment, no overlap, not null).
  Status CheckPointers(const void* in, const void* out) const;
  // Launches on `stream`; the caller guarantees CheckPointers(in, out) held. No validation, no
  // allocation on success.
  Status Run(const void* in, void* out, cudaStream_t stream) const;

  const TransposeConfig& config() const { return config_; }
  const Problem& problem() const { return problem_; }

 private:
  PreparedLaunch() = default;
  TransposeConfig config_;
  Problem problem_;
  LaunchOptions options_;
  const internal::Entry* entry_ = nullptr;
  int align_ = 1;
};

// Launches config `c` on `stream` (asynchronously): Prepare + CheckPointers + Run. in/out are
// device pointers laid out as core/problem.h says.
Status Launch(const TransposeConfig& c, const Problem& p, const void* in, void* out,
              cudaStream_t stream, const LaunchOptions& options = {});

// A deliberately simple trusted kernel (one element per thread, 64-bit index math), used as the
// reference in checks.
Status LaunchReference(const Problem& p, const void* in, void* out, cudaStream_t stream);

// Whether a vendor member (config.vendor()) can run in this process: its library was found and
// loads. Always true for our own kernels. The first call for a library loads it (dlopen).
bool VendorAvailable(const TransposeConfig& c);
// "cuBLAS 13.1.0 (libcublas.so.13)", "cuTENSOR 2.3.1 (libcutensor.so.2)" when loaded, else why
// not ("libcutensor not found (libcutensor.so.2, libcutensor.so)").
std::string VendorDescription(const TransposeConfig& c);

// The candidates a tuner on this process offers for `p`: CandidateConfigs(p) less the vendor
// members whose library does not load here, so cutensor.permute is enumerated only where
// libcutensor loads (and cublas.geam only where libcublas does). Same order.
std::vector<TransposeConfig> AvailableCandidateConfigs(const Problem& p);

}  // namespace transposed::kernels
