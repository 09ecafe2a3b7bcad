#include "tuner/worker/worker_backend.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/version.h"

#include "core/mutex.h"

#include "tuner/worker/codec.h"

namespace transposed::worker {
namespace {

// The channel to one device's worker process (it starts, restarts and talks to the process),
// shared by the device's backend and its sessions. All exchanges hold mu_.
// Every start after the first is a restart (the previous process died or was killed): it is
// counted through on_restart (the backend's CountWorkerRestart, read by the daemon's metrics).
class WorkerChannel {
 public:
  WorkerChannel(const WorkerBackendOptions& o, int index)
      : index_(index),
        timeout_s_(o.request_timeout_s),
        process_(o.path, Args(o, index), o.on_stderr) {}

  static std::vector<std::string> Args(const WorkerBackendOptions& o, int index) {
    std::vector<std::string> a = o.args;
    a.push_back("--device");
    a.push_back(std::to_string(index));
    return a;
  }

  // Called (under mu_) for every restart; set once by the owning backend before any request.
  void set_on_restart(std::function<void()> fn) {
    MutexLock lock(&mu_);
    on_restart_ = std::move(fn);
  }

  // One request outside any session (describe, candidates), which are safe to repeat: when the
  // worker dies on it, it is restarted and asked once more.
  StatusOr<pb::Response> Call(const pb::Request& req) {
    MutexLock lock(&mu_);
    StatusOr<pb::Response> r = Status::Unavailable("not sent");
    for (int attempt = 0; attempt < 2; ++attempt) {
      TR_RETURN_IF_ERROR(EnsureStarted());
      r = process_.Call(req, timeout_s_);
      if (r.ok()) break;
      spdlog::warn("worker device {}: {}", index_, r.status().message());
    }
    if (!r.ok()) return r.status();
    if (r->has_error()) return ErrorStatus(r->error());
    return r;
  }

  uint64_t NewSessionId() {
    MutexLock lock(&mu_);
    return ++next_session_;
  }

  // Opens `p` in the worker for session `id` (starting the worker if needed). Safe to repeat:
  // a worker that dies on it (or died, unnoticed, while idle: it is often the first request a
  // tune sends) is restarted and asked once more.
  Status Open(uint64_t id, const Problem& p, TimeBreakdown* phases) {
    MutexLock lock(&mu_);
    Status s;
    for (int attempt = 0; attempt < 2; ++attempt) {
      TR_RETURN_IF_ERROR(EnsureStarted());
      s = OpenLocked(id, p, phases);
      if (s.ok() || process_.running()) return s;  // answered: done, or the engine's error
      spdlog::warn("worker device {}: {}", index_, s.message());
    }
    return s;
  }

  void Close(uint64_t id) {
    MutexLock lock(&mu_);
    if (open_session_ != id || !process_.running()) return;
    open_session_ = 0;
    pb::Request req;
    req.mutable_close();
    auto r = process_.Call(req, timeout_s_);
    if (!r.ok())
      spdlog::warn("worker device {}: closing a session: {}", index_, r.status().message());
  }

  // One session request about `what` (a candidate's name, or "the copy ceiling"). If the worker
  // dies on it, it is restarted and the session's problem re-opened before returning the error
  // (ABORTED, "worker died (how) while running what; restarted").
  // The worker's phases of every answered request are added to *phases.
  StatusOr<pb::Response> SessionCall(uint64_t id, const Problem& p, const pb::Request& request,
                                     const std::string& what, TimeBreakdown* phases) {
    MutexLock lock(&mu_);
    if (!process_.running() || open_session_ != id) {
      TR_RETURN_IF_ERROR(EnsureStarted());
      TR_RETURN_IF_ERROR(OpenLocked(id, p, phases));
    }
    auto r = process_.Call(request, timeout_s_);
    if (r.ok()) {
      phases->Merge(PhasesFromProto(*r));
      if (r->has_error()) return ErrorStatus(r->error());
      return r;
    }
    // The worker is gone: say so, restart it and re-open the problem for the next candidate.
    std::string msg = "worker died (" + r.status().message() + ") while running " + what;
    Status restarted = EnsureStarted();
    if (restarted.ok()) restarted = OpenLocked(id, p, phases);
    if (restarted.ok()) {
      msg += "; restarted";
    } else {
      msg += "; restart failed: " + restarted.message();
    }
    spdlog::warn("worker device {}: {}", index_, msg);
    return Status::Aborted(msg);
  }

  pid_t pid() {
    MutexLock lock(&mu_);
    return process_.pid();
  }

 private:
  // Starts the worker unless it runs. A worker found dead while idle (killed from outside, out
  // of memory) is reaped and restarted here, before the next request is sent to it.
  Status EnsureStarted() REQUIRES(mu_) {
    if (process_.ReapIfExited()) {
      spdlog::warn("worker device {}: the worker exited while idle ({})", index_,
                   process_.last_exit());
    }
    if (process_.running()) return Status::OK();
    open_session_ = 0;
    TR_RETURN_IF_ERROR(process_.Start());
    if (started_++ > 0) {
      spdlog::warn("worker device {}: worker restarted (pid {})", index_, process_.pid());
      if (on_restart_) on_restart_();
    }
    return Status::OK();
  }

  Status OpenLocked(uint64_t id, const Problem& p, TimeBreakdown* phases) REQUIRES(mu_) {
    pb::Request req;
    *req.mutable_open()->mutable_problem() = ProblemToProto(p);
    auto r = process_.Call(req, timeout_s_);
    if (!r.ok())
      return Status::Unavailable("worker died while opening " + p.ToString() + ": " +
                                 r.status().message());
    phases->Merge(PhasesFromProto(*r));
    if (r->has_error()) return ErrorStatus(r->error());
    open_session_ = id;
    return Status::OK();
  }

  const int index_;
  const double timeout_s_;
  Mutex mu_;
  WorkerProcess process_ GUARDED_BY(mu_);
  std::function<void()> on_restart_ GUARDED_BY(mu_);
  uint64_t next_session_ GUARDED_BY(mu_) = 0;
  uint64_t open_session_ GUARDED_BY(mu_) = 0;  // whose problem the worker holds now (0: none)
  int64_t started_ GUARDED_BY(mu_) = 0;        // processes started
};

class WorkerSession : public Session {
 public:
  WorkerSession(std::shared_ptr<WorkerChannel> channel, uint64_t id, Problem p,
                TimeBreakdown open_phases)
      : channel_(std::move(channel)), id_(id), problem_(std::move(p)),
        phases_(std::move(open_phases)) {}
  ~WorkerSession() override { channel_->Close(id_); }

  Status Check(const Candidate& c) override {
    pb::Request req;
    *req.mutable_check()->mutable_candidate() = VariantToProto(c, "");
    return channel_->SessionCall(id_, problem_, req, c.name, &phases_).status();
  }

  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& opt) override {
    pb::Request req;
    *req.mutable_measure()->mutable_candidate() = VariantToProto(c, "");
    ToProto(opt, req.mutable_measure()->mutable_options());
    TR_ASSIGN_OR_RETURN(pb::Response r,
                        channel_->SessionCall(id_, problem_, req, c.name, &phases_));
    if (!r.has_measure()) return Status::Internal("worker: measure answered with another kind");
    return MeasurementFromProto("measurement", r.measure().measurement(), false);
  }

  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& opt) override {
    pb::Request req;
    ToProto(opt, req.mutable_ceiling()->mutable_options());
    TR_ASSIGN_OR_RETURN(pb::Response r,
                        channel_->SessionCall(id_, problem_, req, "the copy ceiling", &phases_));
    if (!r.has_ceiling()) return Status::Internal("worker: ceiling answered with another kind");
    return MeasurementFromProto("measurement", r.ceiling().measurement(), false);
  }

  TimeBreakdown TakePhases() override { return std::exchange(phases_, TimeBreakdown()); }

 private:
  std::shared_ptr<WorkerChannel> channel_;
  const uint64_t id_;
  const Problem problem_;
  TimeBreakdown phases_;  // the worker's, since the last TakePhases
};

class WorkerBackend : public Backend {
 public:
  WorkerBackend(std::shared_ptr<WorkerChannel> channel, DeviceInfo device, CandidateFamily family)
      : channel_(std::move(channel)), device_(std::move(device)), family_(std::move(family)),
        here_(CandidatesHere(family_)) {
    // Sessions share the worker but never outlive their backend (tuner/backend.h).
    channel_->set_on_restart([this] { CountWorkerRestart(); });
  }
  ~WorkerBackend() override { channel_->set_on_restart(nullptr); }

  const DeviceInfo& device() const override { return device_; }

  // From the family the worker described at start, computed here: no request to the worker,
  // which may be busy measuring. A worker built at another kernel library version is asked,
  // once per problem (the answers are kept, up to kMaxAskedProblems); empty, with a log line,
  // when it cannot answer, which the tuner reports as "no valid candidate".
  std::vector<Candidate> Candidates(const Problem& p) const override {
    if (here_) return FamilyCandidates(family_, p);
    const std::string key = p.Key();
    {
      MutexLock lock(&asked_mu_);
      if (auto it = asked_.find(key); it != asked_.end()) return it->second;
    }
    std::vector<Candidate> out = Ask(p);
    if (!out.empty()) {
      MutexLock lock(&asked_mu_);
      if (asked_.size() >= kMaxAskedProblems) asked_.clear();
      asked_.emplace(key, out);
    }
    return out;
  }

  StatusOr<std::unique_ptr<Session>> Open(const Problem& p) override {
    TR_RETURN_IF_ERROR(ValidateProblem(p, device_.memory_bytes));
    const uint64_t id = channel_->NewSessionId();
    TimeBreakdown phases;
    TR_RETURN_IF_ERROR(channel_->Open(id, p, &phases));
    return std::unique_ptr<Session>(
        std::make_unique<WorkerSession>(channel_, id, p, std::move(phases)));
  }

  // The worker's sample (worker.proto LoadRequest); a failed request is a sample without a
  // source that says why.
  LoadSample SampleLoad() override {
    pb::Request req;
    req.mutable_load();
    auto r = channel_->Call(req);
    LoadSample s;
    if (!r.ok() || !r->has_load()) {
      s.detail = "the worker did not answer the load request: " +
                 (r.ok() ? std::string("answered with another kind") : r.status().ToString());
      return s;
    }
    const pb::LoadResponse& l = r->load();
    s.source = l.source();
    s.detail = l.detail();
    s.utilization_percent = l.utilization_percent() >= 0 && l.utilization_percent() <= 100
                                ? l.utilization_percent() : -1;
    s.other_processes = l.other_processes() >= 0 ? l.other_processes() : -1;
    return s;
  }

  pid_t worker_pid() const { return channel_->pid(); }

 private:
  static constexpr size_t kMaxAskedProblems = 4096;

  // The worker's candidates of `p` (a round trip, queued behind any running measurement).
  std::vector<Candidate> Ask(const Problem& p) const {
    pb::Request req;
    *req.mutable_candidates()->mutable_problem() = ProblemToProto(p);
    auto r = channel_->Call(req);
    std::vector<Candidate> out;
    if (!r.ok() || !r->has_candidates()) {
      spdlog::warn("worker device {}: listing candidates for {}: {}", device_.index, p.ToString(),
                   r.ok() ? "answered with another kind" : r.status().ToString());
      return out;
    }
    for (int i = 0; i < r->candidates().candidates_size(); ++i) {
      auto c = VariantFromProto("candidates[" + std::to_string(i) + "]",
                                r->candidates().candidates(i));
      if (!c.ok()) {
        spdlog::warn("worker device {}: listing candidates for {}: {}", device_.index,
                     p.ToString(), c.status().ToString());
        return {};
      }
      out.push_back(std::move(*c));
    }
    return out;
  }

  std::shared_ptr<WorkerChannel> channel_;
  const DeviceInfo device_;
  const CandidateFamily family_;
  const bool here_;  // CandidatesHere(family_)
  mutable Mutex asked_mu_;
  mutable std::unordered_map<std::string, std::vector<Candidate>> asked_ GUARDED_BY(asked_mu_);
};

}  // namespace

StatusOr<int> CountWorkerDevices(const WorkerBackendOptions& options) {
  std::vector<std::string> list_args = options.args;
  list_args.push_back("--list");
  TR_ASSIGN_OR_RETURN(std::string listed,
                      RunAndCapture(options.path, list_args, options.list_timeout_s,
                                    options.on_stderr ? options.on_stderr
                                                      : LogStderrAs(options.path)));
  char* end = nullptr;
  const long count = std::strtol(listed.c_str(), &end, 10);
  if (end == listed.c_str() || count <= 0) return 0;
  if (count > 4096) return Status::Unavailable(options.path + " --list: " + std::to_string(count) + " devices");
  return static_cast<int>(count);
}

StatusOr<std::vector<std::unique_ptr<Backend>>> MakeWorkerBackends(
    const WorkerBackendOptions& options) {
  TR_ASSIGN_OR_RETURN(const int count, CountWorkerDevices(options));
  std::vector<std::unique_ptr<Backend>> backends;
  if (count == 0) {
    spdlog::info("worker {} reports no device", options.path);
    return backends;
  }
  for (int i = 0; i < count; ++i) {
    auto channel = std::make_shared<WorkerChannel>(options, i);
    pb::Request req;
    req.mutable_describe();
    auto r = channel->Call(req);
    if (!r.ok() || !r->has_describe()) {
      return Status(r.ok() ? StatusCode::kInternal : r.status().code(),
                    "device " + std::to_string(i) + " of " + options.path + ": " +
                        (r.ok() ? "describe answered with another kind" : r.status().message()));
    }
    auto described = DeviceFromProto("device", r->describe().device());
    if (!described.ok()) {
      return Status(described.status().code(), "device " + std::to_string(i) + " of " +
                                                   options.path + ": " +
                                                   described.status().message());
    }
    auto family = FromProto("family", r->describe().family());
    if (!family.ok()) {
      return Status(family.status().code(), "device " + std::to_string(i) + " of " +
                                                options.path + ": " + family.status().message());
    }
    DeviceInfo info = std::move(*described);
    info.index = i;
    spdlog::info("{} device {}: {} {} (worker {})", info.backend, i, info.name, info.uuid,
                 options.path);
    if (!CandidatesHere(*family)) {
      spdlog::warn("worker {} device {}: built at kernel library {}, this daemon at {}: its "
                   "candidates are asked from the worker, once per problem",
                   options.path, i, family->kernels_library_version, kLibraryVersion);
    }
    backends.push_back(std::make_unique<WorkerBackend>(channel, std::move(info), std::move(*family)));
  }
  return backends;
}

pid_t WorkerPid(const Backend& backend) {
  const auto* w = dynamic_cast<const WorkerBackend*>(&backend);
  return w ? w->worker_pid() : -1;
}

}  // namespace transposed::worker
