// The worker process's side of the worker protocol: one loop that reads Request frames, runs
// them on an Engine (engine.h) and writes one Response frame each. Every worker executable
// (transposed-worker with CudaEngine, the test-only transposed-fake-worker with FakeEngine) is
// this loop plus its own main().
//
// Thread-safety: Serve runs on one thread and owns the engine while it runs.
#pragma once

#include <memory>

#include "core/status.h"
#include "tuner/worker/engine.h"
#include "tuner/worker/worker.pb.h"

namespace transposed::worker {

// Exit codes of a worker process.
inline constexpr int kExitOk = 0;        // stdin closed
inline constexpr int kExitUsage = 2;     // bad command line
inline constexpr int kExitBroken = 3;    // the engine broke (a sticky CUDA error)
inline constexpr int kExitProtocol = 4;  // malformed frame on stdin

// Runs one request on `engine`; a null engine answers every request with `init_error`.
pb::Response Dispatch(Engine* engine, const Status& init_error, const pb::Request& request);

// Serves requests from in_fd, answering on out_fd, until in_fd closes (kExitOk) or a frame is
// malformed (kExitProtocol). When the engine is broken after a request, the response is sent
// as a fatal error and the process exits at once with kExitBroken (no teardown of a broken
// device context). Returns the exit code otherwise.
int Serve(Engine* engine, const Status& init_error, int in_fd, int out_fd);

// The protocol takes a private copy of stdout and fd 1 then points at stderr (so that library
// output cannot corrupt frames); then serves stdin. A failed `engine` answers every request
// with its error (and logs it to stderr).
int ServeStdio(StatusOr<std::unique_ptr<Engine>> engine);

}  // namespace transposed::worker
