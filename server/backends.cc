#include "server/backends.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "tuner/cpu/cpu_backend.h"
#include "tuner/cpu/cpu_cache.h"
#include "tuner/cuda/cuda_backend.h"

namespace transposed {

Status BackendRegistry::Register(BackendKind kind) {
  if (kind.name.empty() || kind.name == "auto" || Find(kind.name) != nullptr)
    return Status::InvalidArgument("backend name '" + kind.name + "' is empty, reserved or taken");
  if (!kind.probe || !kind.make)
    return Status::InvalidArgument("backend '" + kind.name + "' needs a probe and a factory");
  kinds_.push_back(std::move(kind));
  return Status::OK();
}

const BackendKind* BackendRegistry::Find(const std::string& name) const {
  for (const BackendKind& k : kinds_) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> names;
  for (const BackendKind& k : kinds_) names.push_back(k.name);
  return names;
}

StatusOr<std::vector<std::unique_ptr<Backend>>> BackendRegistry::Make(
    const std::string& name, const BackendOptions& options) const {
  if (options.cpu_threads < 0)
    return Status::InvalidArgument("--cpu-threads: must be >= 0 (0: all), got " +
                                   std::to_string(options.cpu_threads));
  if (name == "auto") {
    for (const BackendKind& k : kinds_) {
      Status available = k.probe(options);
      if (!available.ok()) {
        spdlog::info("backend auto: not {}: {}", k.name, available.message());
        continue;
      }
      auto made = k.make(options);
      if (made.ok() && !made->empty()) {
        spdlog::info("backend={} (auto: {}; {} device(s))", k.name, k.description, made->size());
        return made;
      }
      spdlog::info("backend auto: not {}: {}", k.name,
                   made.ok() ? std::string("no device") : made.status().ToString());
    }
    return Status::FailedPrecondition("--backend=auto: no backend is available");
  }
  const BackendKind* k = Find(name);
  if (k == nullptr) {
    std::string choices = "auto";
    for (const std::string& n : Names()) choices += ", " + n;
    return Status::InvalidArgument("--backend: unknown backend '" + name + "' (expected " +
                                   choices + ")");
  }
  Status available = k->probe(options);
  if (!available.ok()) return Status::FailedPrecondition("--backend=" + name + ": " + available.message());
  auto made = k->make(options);
  if (!made.ok()) return Status::FailedPrecondition("--backend=" + name + ": " + made.status().message());
  if (made->empty()) return Status::FailedPrecondition("--backend=" + name + ": no device");
  spdlog::info("backend={} (requested with --backend={}; {} device(s))", name, name, made->size());
  return made;
}

namespace {

CudaBackendOptions CudaOptions(const BackendOptions& o) {
  CudaBackendOptions cuda;
  cuda.worker_path = o.worker_path;
  return cuda;
}

BackendRegistry MakeDaemonBackends() {
  BackendRegistry r;
  Status s = r.Register(
      {"cuda", "NVIDIA GPUs, one transposed-worker process per GPU",
       [](const BackendOptions& o) -> Status {
         auto n = CountCudaDevices(CudaOptions(o));
         if (!n.ok()) return n.status();
         if (*n == 0) return Status::FailedPrecondition("no GPU is visible");
         return Status::OK();
       },
       [](const BackendOptions& o) { return MakeCudaBackends(CudaOptions(o)); }});
  if (s.ok()) {
    s = r.Register({"cpu", "the host CPU, in process",
                    [](const BackendOptions&) { return Status::OK(); },
                    [](const BackendOptions& o) -> StatusOr<std::vector<std::unique_ptr<Backend>>> {
                      CpuBackendOptions cpu;
                      cpu.max_threads = o.cpu_threads;
                      cpu.instance_id = o.cpu_instance_id;
                      auto backend = std::make_unique<CpuBackend>(cpu);
                      if (backend->cache_source() == "unknown") {
                        spdlog::warn("cpu: the cache sizes are unknown (no {}, no CPUID cache "
                                     "leaf, no sysconf): this host's device class differs from "
                                     "its fleet's, so it shares no answers with it",
                                     cpu_cache::kSysfsCpu0Cache);
                      } else {
                        spdlog::info("cpu: cache sizes from {}", backend->cache_source());
                      }
                      std::vector<std::unique_ptr<Backend>> out;
                      out.push_back(std::move(backend));
                      return out;
                    }});
  }
  if (!s.ok()) spdlog::critical("backend registry: {}", s.ToString());
  return r;
}

}  // namespace

const BackendRegistry& DaemonBackends() {
  static const BackendRegistry* registry = new BackendRegistry(MakeDaemonBackends());
  return *registry;
}

}  // namespace transposed
