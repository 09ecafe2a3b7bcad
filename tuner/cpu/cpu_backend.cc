#include "tuner/cpu/cpu_backend.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/hash.h"
#include "core/version.h"
#include "tuner/cpu/session.h"

namespace transposed {

namespace {

// The last-level cache assumed where sysfs does not say (VMs often do not). Not the 32 MiB of
// one Zen CCD: on the project's 2-vCPU VM a memcpy of 4 MiB rotating through 64-128 MiB of
// buffers still ran 40% faster than through 192 MiB or more (docs/design/cpu-backend.md), so the
// rotation must exceed what these vCPUs can cache, not what one die has.
constexpr int64_t kDefaultLlcBytes = int64_t{128} << 20;

}  // namespace

CpuBackend::CpuBackend(CpuBackendOptions options) : options_(options) {
  const HostInfo host = ReadHostInfo();
  const UsableCpus usable = ReadUsableCpus();
  max_threads_ = options_.max_threads > 0 ? options_.max_threads : usable.count;
  llc_bytes_ = host.l3 ? *host.l3 : host.l2 ? *host.l2 : kDefaultLlcBytes;
  cache_source_ = host.cache_source;
  pool_ = std::make_shared<ThreadPool>(max_threads_, usable.cpus);
  isas_ = cpu_simd::SupportedIsas();

  auto size_str = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "0"; };
  device_.backend = "cpu";
  device_.index = 0;
  device_.name = host.model;
  device_.memory_bytes = PhysicalMemoryBytes();
  device_.attributes = {
      {"cores", std::to_string(host.cores)},
      {"logical_cpus", std::to_string(host.logical)},
      {"threads_max", std::to_string(max_threads_)},
      {"cpus_usable", std::to_string(usable.count)},
      {"simd", cpu_simd::IsaName(isas_.back())},
      {"l1d_bytes", size_str(host.l1d)},
      {"l2_bytes", size_str(host.l2)},
      {"l3_bytes", size_str(host.l3)},
      {"arch", host.arch},
  };
  Fnv1a64 h;
  h.Add(host.model);
  h.Add(host.arch);
  h.Add(std::to_string(host.cores));
  h.Add(std::to_string(host.logical));
  h.Add(size_str(host.l1d));
  h.Add(size_str(host.l2));
  h.Add(size_str(host.l3));
  device_.uuid = options_.instance_id.empty() ? "cpu-" + h.Hex() : options_.instance_id;
  device_.library_version = kLibraryVersion;
}

CpuBackend::~CpuBackend() = default;

std::vector<Candidate> CpuBackend::Candidates(const Problem& p) const {
  return CpuCandidates(p, max_threads_, isas_, options_.enable_test_faults);
}

StatusOr<std::unique_ptr<Session>> CpuBackend::Open(const Problem& p) {
  TR_RETURN_IF_ERROR(ValidateProblem(p, device_.memory_bytes));
  // Input, output and reference must fit, without the rotating buffers (those adapt).
  const uint64_t footprint =
      static_cast<uint64_t>(p.in_alloc_bytes()) + 2 * static_cast<uint64_t>(p.out_alloc_bytes());
  if (device_.memory_bytes > 0 && footprint > device_.memory_bytes)
    return Status::ResourceExhausted("cpu: " + p.ToString() + " needs " +
                                     std::to_string(footprint) + " bytes, the host has " +
                                     std::to_string(device_.memory_bytes));
  // ...and fit in what is available now (MemAvailable, the cgroup's limit), so that a large
  // problem is refused instead of getting the daemon OOM-killed. The rotating buffers take at most
  // a quarter of what is left.
  uint64_t memory_bytes = device_.memory_bytes;
  if (auto available = ReadAvailableMemory(options_.memory)) {
    if (footprint > available->bytes)
      return Status::ResourceExhausted(
          "cpu: " + p.ToString() + " needs " + std::to_string(footprint) +
          " bytes (input, output and reference), only " + std::to_string(available->bytes) +
          " bytes are available (" + available->source + ")");
    const uint64_t left = available->bytes - footprint;
    memory_bytes = memory_bytes > 0 ? std::min(memory_bytes, left) : left;
  }
  return OpenCpuSession(p, pool_, max_threads_, llc_bytes_, memory_bytes,
                        options_.enable_test_faults);
}

}  // namespace transposed
