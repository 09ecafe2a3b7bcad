#include "tuner/cuda/cuda_backend.h"

#include <limits.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "transposed/kernels/config.h"
#include "tuner/cuda/worker_process.h"
#include "tuner/cuda/worker_protocol.h"

namespace transposed {
namespace {

using cuda_worker::WorkerProcess;
using nlohmann::json;

// A request that takes longer than this is a hung kernel: the worker is killed.
constexpr double kRequestTimeoutSeconds = 60.0;
// Enumerating devices (the first CUDA initialisation can take a few seconds).
constexpr double kListTimeoutSeconds = 60.0;

bool IsExecutable(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

// options.worker_path, else $TRANSPOSED_WORKER, else next to /proc/self/exe, else $PATH.
StatusOr<std::string> FindWorker(const CudaBackendOptions& options) {
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

// The worker of one GPU, shared by its backend and its sessions. All exchanges hold mu.
class DeviceWorker {
 public:
  DeviceWorker(std::string path, int index, bool faults)
      : index_(index), process_(path, Args(index, faults)) {}

  static std::vector<std::string> Args(int index, bool faults) {
    std::vector<std::string> a = {"--device", std::to_string(index)};
    if (faults) a.push_back("--enable-test-faults");
    return a;
  }

  StatusOr<DeviceInfo> Describe() {
    std::lock_guard<std::mutex> lock(mu_);
    TR_RETURN_IF_ERROR(process_.Start());
    TR_ASSIGN_OR_RETURN(json r, process_.Call(json{{"op", "describe"}}, kRequestTimeoutSeconds));
    TR_RETURN_IF_ERROR(cuda_worker::ResponseStatus(r));
    return cuda_worker::DeviceInfoFromJson(r.value("device", json()));
  }

  uint64_t NewSessionId() {
    std::lock_guard<std::mutex> lock(mu_);
    return ++next_session_;
  }

  // Opens `p` in the worker for session `id` (starting the worker if needed).
  Status Open(uint64_t id, const Problem& p) {
    std::lock_guard<std::mutex> lock(mu_);
    TR_RETURN_IF_ERROR(EnsureStarted());
    return OpenLocked(id, p);
  }

  void Close(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_session_ != id || !process_.running()) return;
    open_session_ = 0;
    auto r = process_.Call(json{{"op", "close"}}, kRequestTimeoutSeconds);
    if (!r.ok())
      spdlog::warn("cuda device {}: closing a session: {}", index_, r.status().message());
  }

  // One session request about `what` (a candidate's name, or "the copy ceiling"). If the worker
  // dies, it is restarted and the session's problem re-opened before returning the error.
  StatusOr<json> SessionCall(uint64_t id, const Problem& p, const json& request,
                             const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!process_.running() || open_session_ != id) {
      TR_RETURN_IF_ERROR(EnsureStarted());
      TR_RETURN_IF_ERROR(OpenLocked(id, p));
    }
    auto r = process_.Call(request, kRequestTimeoutSeconds);
    if (r.ok()) return r;
    // The worker is gone: say so, restart it and re-open the problem for the next candidate.
    std::string msg = "worker died (" + r.status().message() + ") while running " + what;
    open_session_ = 0;
    ++restarts_;
    Status restarted = EnsureStarted();
    if (restarted.ok()) restarted = OpenLocked(id, p);
    if (restarted.ok()) {
      msg += "; restarted";
    } else {
      msg += "; restart failed: " + restarted.message();
    }
    spdlog::warn("cuda device {}: {}", index_, msg);
    return Status::Aborted(msg);
  }

  int restarts() {
    std::lock_guard<std::mutex> lock(mu_);
    return restarts_;
  }

 private:
  Status EnsureStarted() {
    if (process_.running()) return Status::OK();
    open_session_ = 0;
    return process_.Start();
  }

  Status OpenLocked(uint64_t id, const Problem& p) {
    auto r = process_.Call(json{{"op", "open"}, {"problem", cuda_worker::ProblemToJson(p)}},
                           kRequestTimeoutSeconds);
    if (!r.ok())
      return Status::Unavailable("worker died while opening " + p.ToString() + ": " +
                                 r.status().message());
    TR_RETURN_IF_ERROR(cuda_worker::ResponseStatus(*r));
    open_session_ = id;
    return Status::OK();
  }

  const int index_;
  std::mutex mu_;
  WorkerProcess process_;
  uint64_t next_session_ = 0;
  uint64_t open_session_ = 0;  // whose problem the worker holds now (0: none)
  int restarts_ = 0;
};

class CudaSession : public Session {
 public:
  CudaSession(std::shared_ptr<DeviceWorker> worker, uint64_t id, Problem p)
      : worker_(std::move(worker)), id_(id), problem_(std::move(p)) {}
  ~CudaSession() override { worker_->Close(id_); }

  Status Check(const Candidate& c) override {
    TR_ASSIGN_OR_RETURN(
        json r, worker_->SessionCall(
                    id_, problem_,
                    json{{"op", "check"}, {"candidate", cuda_worker::CandidateToJson(c)}}, c.name));
    return cuda_worker::ResponseStatus(r);
  }

  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& opt) override {
    TR_ASSIGN_OR_RETURN(
        json r, worker_->SessionCall(id_, problem_,
                                     json{{"op", "measure"},
                                          {"candidate", cuda_worker::CandidateToJson(c)},
                                          {"options", cuda_worker::MeasureOptionsToJson(opt)}},
                                     c.name));
    TR_RETURN_IF_ERROR(cuda_worker::ResponseStatus(r));
    return cuda_worker::MeasurementFromJson(r.value("measurement", json()));
  }

  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& opt) override {
    TR_ASSIGN_OR_RETURN(
        json r, worker_->SessionCall(
                    id_, problem_,
                    json{{"op", "ceiling"}, {"options", cuda_worker::MeasureOptionsToJson(opt)}},
                    "the copy ceiling"));
    TR_RETURN_IF_ERROR(cuda_worker::ResponseStatus(r));
    return cuda_worker::MeasurementFromJson(r.value("measurement", json()));
  }

 private:
  std::shared_ptr<DeviceWorker> worker_;
  const uint64_t id_;
  const Problem problem_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(std::shared_ptr<DeviceWorker> worker, DeviceInfo device, bool faults)
      : worker_(std::move(worker)), device_(std::move(device)), faults_(faults) {}

  const DeviceInfo& device() const override { return device_; }

  std::vector<Candidate> Candidates(const Problem& p) const override {
    std::vector<Candidate> out;
    for (const auto& c : kernels::EnumerateConfigs(p)) {
      // Not offered: cublas.geam canonicalizes NaN payloads (kernels/config.h), and the daemon
      // answers bit-exact transposes only (python/tests/test_gpu.py, NaN bit patterns included,
      // failed on 4097x3001 f32 when geam won there). Benchmarked in transpose_bench instead;
      // a per-request opt-in to value-exact answers would re-enable it where the worker found
      // libcublas (DeviceInfo attribute "cublas").
      if (c.canonicalizes_nan()) continue;
      out.push_back({c.Name(), c.Params()});
    }
    if (faults_) out.push_back({cuda_worker::kFaultCandidateName, {}});
    return out;
  }

  StatusOr<std::unique_ptr<Session>> Open(const Problem& p) override {
    TR_RETURN_IF_ERROR(ValidateProblem(p, device_.memory_bytes));
    const uint64_t id = worker_->NewSessionId();
    TR_RETURN_IF_ERROR(worker_->Open(id, p));
    return std::unique_ptr<Session>(std::make_unique<CudaSession>(worker_, id, p));
  }

 private:
  std::shared_ptr<DeviceWorker> worker_;
  const DeviceInfo device_;
  const bool faults_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Backend>>> MakeCudaBackends(
    const CudaBackendOptions& options) {
  TR_ASSIGN_OR_RETURN(std::string path, FindWorker(options));
  // Test hook for the daemon's end-to-end fault test, which cannot set options itself.
  bool faults = options.enable_test_faults;
  if (const char* e = std::getenv("TRANSPOSED_CUDA_TEST_FAULTS"); e && std::string(e) == "1") {
    spdlog::warn("cuda: TRANSPOSED_CUDA_TEST_FAULTS=1: the faulting test candidate {} is enabled",
                 cuda_worker::kFaultCandidateName);
    faults = true;
  }
  TR_ASSIGN_OR_RETURN(std::string listed,
                      cuda_worker::RunAndCapture(path, {"--list"}, kListTimeoutSeconds));
  std::vector<std::unique_ptr<Backend>> backends;
  char* end = nullptr;
  const long count = std::strtol(listed.c_str(), &end, 10);
  if (end == listed.c_str() || count <= 0) {
    spdlog::info("cuda: {} reports no GPU", path);
    return backends;
  }
  for (int i = 0; i < count; ++i) {
    auto worker = std::make_shared<DeviceWorker>(path, i, faults);
    auto info = worker->Describe();
    if (!info.ok()) {
      return Status(info.status().code(),
                    "cuda device " + std::to_string(i) + ": " + info.status().message());
    }
    info->index = i;
    spdlog::info("cuda device {}: {} {} (worker {})", i, info->name, info->uuid, path);
    backends.push_back(std::make_unique<CudaBackend>(worker, std::move(*info), faults));
  }
  return backends;
}

}  // namespace transposed
