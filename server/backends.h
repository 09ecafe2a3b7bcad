// BackendRegistry: the daemon's measuring backends by name, each a factory plus an availability
// probe. `--backend NAME` (server/daemon/daemon.cc) builds the one named; `--backend auto` the first
// available in registration order. The daemon's registry (DaemonBackends) holds "cuda" (one
// Backend per GPU, each measured by a transposed-worker process: tuner/cuda/cuda_backend.h),
// then "cpu" (the host, in process: tuner/cpu/cpu_backend.h). Test-only engines are not in it; tests
// run the real "cuda" factory against a test-only worker executable (--worker).
// Every choice and its reason is logged (spdlog info).
//
// Thread-safety: a registry is filled once, then only read (from any thread); Make is called
// from one thread (startup) and its backends follow tuner/backend.h's rules.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tuner/backend.h"

namespace transposed {

// What the daemon's flags say about building backends.
struct BackendOptions {
  int cpu_threads = 0;      // most threads a CPU candidate uses; 0: all hardware threads
  std::string worker_path;  // the CUDA worker executable (--worker); empty: the default search
  std::string cpu_instance_id;  // the CPU device's instance id (CpuBackendOptions::instance_id)
};

struct BackendKind {
  std::string name;         // the --backend value
  std::string description;  // one line, for --help and errors
  // OK when the backend can run here; otherwise why not (e.g. no worker, no GPU).
  std::function<Status(const BackendOptions&)> probe;
  // One Backend per device; an error, or an empty vector, when none can be made.
  std::function<StatusOr<std::vector<std::unique_ptr<Backend>>>(const BackendOptions&)> make;
};

class BackendRegistry {
 public:
  // Adds a kind; its name must be new and not "auto" (INVALID_ARGUMENT otherwise).
  Status Register(BackendKind kind);
  const BackendKind* Find(const std::string& name) const;
  // The registered names in order ("auto" is not one of them).
  std::vector<std::string> Names() const;
  // "auto": the first kind whose probe passes and whose factory makes at least one backend.
  // A name: that kind, FAILED_PRECONDITION ("--backend=NAME: why") when its probe fails or it
  // makes none. INVALID_ARGUMENT naming the choices for an unknown name or bad options.
  StatusOr<std::vector<std::unique_ptr<Backend>>> Make(const std::string& name,
                                                       const BackendOptions& options) const;

 private:
  std::vector<BackendKind> kinds_;
};

// The daemon's registry: "cuda", then "cpu".
const BackendRegistry& DaemonBackends();

}  // namespace transposed
