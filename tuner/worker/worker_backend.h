// WorkerBackend: a Backend (tuner/backend.h) whose device lives in a worker process.
//
// The daemon never touches a device context itself: each device gets a child process (any
// executable that serves worker.proto through serve.h: transposed-worker for CUDA, the test-only
// transposed-fake-worker) that owns the context, buffers and timers. The worker describes its
// device and its candidate family (family.h) once at start; the backend lists a problem's
// candidates itself from that family, so that listing never waits behind a measurement the
// worker is running. It forwards Open/Check/Measure to the worker; when a request kills the worker (a faulting kernel, a
// crash, a hang past the timeout), the backend restarts it, re-opens the session's problem,
// reports that request as failed (ABORTED, "worker died ...") and goes on. A worker found dead
// between requests is restarted before the next one. Every restart is counted by
// Backend::CountWorkerRestart (the daemon's transposed_worker_restarts_total). The worker's
// stderr goes to the daemon's log (process.h).
//
// Thread-safety: as for every Backend: const methods from any thread, one Session measuring per
// device at a time; all exchanges with one worker are serialised by its mutex.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tuner/backend.h"
#include "tuner/worker/process.h"

namespace transposed::worker {

struct WorkerBackendOptions {
  std::string path;               // the worker executable
  std::vector<std::string> args;  // passed before "--device N" (and after "--list")
  double request_timeout_s = 60;  // a request taking longer is a hung kernel: the worker is killed
  double list_timeout_s = 60;     // `path --list` (the first CUDA initialisation can be slow)
  StderrFn on_stderr;             // empty: the daemon's log (LogStderrAs(path))
};

// The number of devices `path --list` reports (0 when it prints none).
StatusOr<int> CountWorkerDevices(const WorkerBackendOptions& options);

// One Backend per device that `path --list` reports, in order; an empty vector when it reports
// none. An error when the worker cannot be run or a device cannot be described.
StatusOr<std::vector<std::unique_ptr<Backend>>> MakeWorkerBackends(
    const WorkerBackendOptions& options);

// The pid of the worker process of `backend` (made by MakeWorkerBackends) now; -1 when none runs
// or `backend` is not a worker backend. For diagnostics and tests (kill it, watch the restart).
pid_t WorkerPid(const Backend& backend);

}  // namespace transposed::worker
