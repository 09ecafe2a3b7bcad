#include "client/transposer.h"

#include <functional>
#include <utility>

#include "transposed/kernels/config.h"

namespace transposed {
namespace {

using Clock = std::chrono::steady_clock;

bool IsFinal(v1::Source s) {
  return s == v1::SOURCE_CACHE || s == v1::SOURCE_TUNED || s == v1::SOURCE_PEER ||
         s == v1::SOURCE_SHARED;
}

Status Cuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::OK();
  return Status::InvalidArgument(what + ": " + cudaGetErrorString(e));
}

}  // namespace

size_t Transposer::ProblemHash::operator()(const Problem& p) const {
  size_t h = std::hash<int64_t>()(p.rows);
  const auto mix = [&h](int64_t v) {
    h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(p.cols);
  mix(p.batch);
  mix(p.in_ld());  // Problem::operator== compares normalized problems (0 = dense)
  mix(p.out_ld());
  mix(static_cast<int64_t>(p.dtype));
  return h;
}

Transposer::Transposer(Ask ask, int cuda_device, Options options)
    : ask_(std::move(ask)), cuda_device_(cuda_device), options_(options) {}

StatusOr<std::unique_ptr<Transposer>> Transposer::WithAsk(Ask ask, int cuda_device,
                                                          Options options) {
  if (!ask) return Status::InvalidArgument("ask: must not be empty");
  if (cuda_device < 0)
    return Status::InvalidArgument("cuda_device: must be >= 0, got " +
                                   std::to_string(cuda_device));
  if (options.max_plans < 1) return Status::InvalidArgument("max_plans: must be >= 1");
  if (!(options.refresh_seconds >= 0))
    return Status::InvalidArgument("refresh_seconds: must be >= 0");
  return std::unique_ptr<Transposer>(new Transposer(std::move(ask), cuda_device, options));
}

StatusOr<std::unique_ptr<Transposer>> Transposer::ForSelector(Client* client,
                                                              const v1::DeviceSelector& device,
                                                              int cuda_device, Options options) {
  if (client == nullptr) return Status::InvalidArgument("client: must not be null");
  return WithAsk(
      [client, device](const Problem& p, v1::CachePolicy policy) {
        return client->GetConfig(p, device, policy);
      },
      cuda_device, options);
}

StatusOr<std::unique_ptr<Transposer>> Transposer::ForDevice(Client* client, int cuda_device,
                                                            Options options) {
  cudaDeviceProp prop{};
  TR_RETURN_IF_ERROR(Cuda(cudaGetDeviceProperties(&prop, cuda_device),
                          "cuda_device: cudaGetDeviceProperties(" +
                              std::to_string(cuda_device) + ")"));
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return ForSelector(client, DeviceByUuid(uuid), cuda_device, options);
}

int64_t Transposer::asks() const {
  MutexLock lock(&mu_);
  return asks_;
}

StatusOr<std::shared_ptr<const Transposer::Plan>> Transposer::AskAndPrepare(const Problem& p) {
  StatusOr<v1::Answer> answer = ask_(p, options_.policy);
  {
    MutexLock lock(&mu_);
    ++asks_;
  }
  if (!answer.ok()) return answer.status();
  if (answer->variant().backend() != "cuda")
    return Status::FailedPrecondition(
        "the daemon answered " + p.ToString() + " with a '" + answer->variant().backend() +
        "' configuration (" + answer->variant().name() + "); a Transposer needs a CUDA device");
  TR_ASSIGN_OR_RETURN(kernels::TransposeConfig config,
                      kernels::TransposeConfig::FromName(answer->variant().name()));
  TR_ASSIGN_OR_RETURN(kernels::PreparedLaunch launch,
                      kernels::PreparedLaunch::Prepare(config, p));
  auto plan = std::make_shared<Plan>(Plan{*std::move(answer), std::move(launch), false,
                                          Clock::now()});
  plan->final = IsFinal(plan->answer.source());
  MutexLock lock(&mu_);
  if (plans_.size() >= options_.max_plans) plans_.clear();
  plans_[p] = plan;
  return std::shared_ptr<const Plan>(std::move(plan));
}

StatusOr<std::shared_ptr<const Transposer::Plan>> Transposer::Prepare(const Problem& p) {
  std::shared_ptr<const Plan> plan;
  {
    MutexLock lock(&mu_);
    auto it = plans_.find(p);
    if (it != plans_.end()) plan = it->second;
  }
  if (plan != nullptr &&
      (plan->final || std::chrono::duration<double>(Clock::now() - plan->asked).count() <
                          options_.refresh_seconds))
    return plan;
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  StatusOr<std::shared_ptr<const Plan>> fresh = AskAndPrepare(p);
  if (fresh.ok() || plan == nullptr) return fresh;
  // The provisional plan still runs: keep it, and ask again after another refresh period rather
  // than on every call while the daemon cannot answer.
  auto again = std::make_shared<Plan>(*plan);
  again->asked = Clock::now();
  MutexLock lock(&mu_);
  plans_[p] = again;
  return std::shared_ptr<const Plan>(std::move(again));
}

Status Transposer::Transpose(const Problem& p, const void* in, void* out, cudaStream_t stream) {
  TR_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, Prepare(p));
  TR_RETURN_IF_ERROR(plan->launch.CheckPointers(in, out));
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != cuda_device_)
    TR_RETURN_IF_ERROR(
        Cuda(cudaSetDevice(cuda_device_), "cudaSetDevice(" + std::to_string(cuda_device_) + ")"));
  return plan->launch.Run(in, out, stream);
}

}  // namespace transposed
