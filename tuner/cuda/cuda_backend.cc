#include "tuner/cuda/cuda_backend.h"

#include <limits.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>

#include "tuner/worker/worker_backend.h"

namespace transposed {
namespace {

// A request that takes longer than this is a hung kernel: the worker is killed.
constexpr double kRequestTimeoutSeconds = 60.0;
// Enumerating devices (the first CUDA initialisation can take a few seconds).
constexpr double kListTimeoutSeconds = 60.0;

bool IsExecutable(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

}  // namespace

// options.worker_path, else $TRANSPOSED_WORKER, else next to /proc/self/exe, else $PATH.
StatusOr<std::string> FindCudaWorker(const CudaBackendOptions& options) {
  if (!options.worker_path.empty()) {
    if (IsExecutable(options.worker_path)) return options.worker_path;
    return Status::NotFound("worker_path " + options.worker_path + " is not an executable");
  }
  if (const char* env = std::getenv("TRANSPOSED_WORKER"); env && *env) {
    if (IsExecutable(env)) return std::string(env);
    return Status::NotFound(std::string("$TRANSPOSED_WORKER ") + env + " is not an executable");
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    std::string p = dir + "/transposed-worker";
    if (IsExecutable(p)) return p;
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':')) {
      std::string p = (d.empty() ? "." : d) + "/transposed-worker";
      if (IsExecutable(p)) return p;
    }
  }
  return Status::NotFound(
      "transposed-worker not found (worker_path, $TRANSPOSED_WORKER, next to the executable, "
      "$PATH)");
}

namespace {

worker::WorkerBackendOptions WorkerOptions(const std::string& path) {
  worker::WorkerBackendOptions o;
  o.path = path;
  o.request_timeout_s = kRequestTimeoutSeconds;
  o.list_timeout_s = kListTimeoutSeconds;
  o.on_stderr = worker::LogStderrAs("transposed-worker");
  return o;
}

}  // namespace

StatusOr<int> CountCudaDevices(const CudaBackendOptions& options) {
  TR_ASSIGN_OR_RETURN(std::string path, FindCudaWorker(options));
  return worker::CountWorkerDevices(WorkerOptions(path));
}

StatusOr<std::vector<std::unique_ptr<Backend>>> MakeCudaBackends(
    const CudaBackendOptions& options) {
  TR_ASSIGN_OR_RETURN(std::string path, FindCudaWorker(options));
  return worker::MakeWorkerBackends(WorkerOptions(path));
}

}  // namespace transposed
