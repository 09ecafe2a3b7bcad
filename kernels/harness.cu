#include "transposed/kernels/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "core/placements.h"
#include "kernels/device_check.cuh"
#include "transposed/kernels/launch.h"

namespace transposed::kernels {
namespace {

Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                          cudaGetErrorString(e) + ")");
}

// 16-byte loads and stores, then the tail: the copy-kernel ceiling.
__global__ void Copy16Kernel(const unsigned char* src, unsigned char* dst, size_t n) {
  const size_t n16 = n / 16;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += stride)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  if (blockIdx.x == 0)
    for (size_t i = n16 * 16 + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

double Timing::median_s() const {
  if (samples_s.empty()) return 0;
  std::vector<double> v = samples_s;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double Timing::min_s() const {
  return samples_s.empty() ? 0 : *std::min_element(samples_s.begin(), samples_s.end());
}

RotatingBuffers::~RotatingBuffers() {
  for (void* p : in_) cudaFree(p);
  for (void* p : out_) cudaFree(p);
  if (ref_) cudaFree(ref_);
  if (counters_) cudaFree(counters_);
}

StatusOr<std::unique_ptr<RotatingBuffers>> RotatingBuffers::Create(const Problem& p,
                                                                   cudaStream_t stream,
                                                                   const HarnessOptions& o) {
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  int dev = 0, l2 = 0;
  TR_RETURN_IF_ERROR(Cuda(cudaGetDevice(&dev), "cudaGetDevice"));
  TR_RETURN_IF_ERROR(Cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "L2 size"));
  size_t free_b = 0, total_b = 0;
  TR_RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  const int64_t in_b = p.in_alloc_bytes(), out_b = p.out_alloc_bytes(), pair_b = in_b + out_b;
  // One pair plus the reference output must fit, with 10% of free memory left over.
  const int64_t need_b = pair_b + (o.reference ? out_b : 0);
  if (static_cast<double>(need_b) > 0.9 * static_cast<double>(free_b))
    return Status::ResourceExhausted(p.ToString() + " needs " + std::to_string(need_b) +
                                     " bytes of buffers, the device has " +
                                     std::to_string(free_b) + " free");
  const int64_t cap = std::min<int64_t>(
      o.max_rotation_bytes, static_cast<int64_t>(o.max_free_fraction * static_cast<double>(free_b)));
  // Strictly more than l2_multiple x L2 (one pair more than fits in it), at least 2 pairs.
  const int64_t want = std::max<int64_t>(2, o.l2_multiple * l2 / pair_b + 1);
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>(want, cap / pair_b));
  std::unique_ptr<RotatingBuffers> b(new RotatingBuffers());
  b->problem_ = p;
  b->l2_bytes_ = l2;
  for (int64_t i = 0; i < n; ++i) {
    void *in = nullptr, *out = nullptr;
    Status s = Cuda(cudaMalloc(&in, in_b), "cudaMalloc(input)");
    if (s.ok()) s = Cuda(cudaMalloc(&out, out_b), "cudaMalloc(output)");
    if (!s.ok()) {
      if (in) cudaFree(in);
      cudaGetLastError();
      return Status::ResourceExhausted(s.message());
    }
    b->in_.push_back(in);
    b->out_.push_back(out);
  }
  if (o.reference) {
    if (!Cuda(cudaMalloc(&b->ref_, out_b), "cudaMalloc(reference)").ok()) {
      b->ref_ = nullptr;
      cudaGetLastError();
      return Status::ResourceExhausted("cudaMalloc(reference) of " + std::to_string(out_b) +
                                       " bytes failed");
    }
    TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&b->counters_, 2 * sizeof(unsigned long long)),
                            "cudaMalloc(check counters)"));
  }
  // Random data everywhere (never time zeros), outputs included.
  for (int64_t i = 0; i < n; ++i) {
    TR_RETURN_IF_ERROR(check::Fill(b->in_[i], in_b, 1000 + 2 * i, stream));
    TR_RETURN_IF_ERROR(check::Fill(b->out_[i], out_b, 1001 + 2 * i, stream));
  }
  TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), "filling buffers"));
  return std::move(b);
}

int64_t RotatingBuffers::working_set_bytes() const {
  return pairs() * (problem_.in_alloc_bytes() + problem_.out_alloc_bytes());
}

Status RotatingBuffers::PrepareReference(uint64_t seed, cudaStream_t stream) {
  if (!ref_) return Status::FailedPrecondition("buffers made without a reference output");
  const int64_t in_b = problem_.in_alloc_bytes(), out_b = problem_.out_alloc_bytes();
  TR_RETURN_IF_ERROR(check::Fill(in_[0], in_b, seed, stream));
  // Random gaps in the reference: Poison copies them into the output, a check compares them.
  TR_RETURN_IF_ERROR(check::Fill(ref_, out_b, seed ^ 0x9e3779b97f4a7c15ull, stream));
  TR_RETURN_IF_ERROR(LaunchReference(problem_, in_[0], ref_, stream));
  return Cuda(cudaStreamSynchronize(stream), "preparing the reference");
}

Status RotatingBuffers::PoisonOutput(cudaStream_t stream) {
  if (!ref_) return Status::FailedPrecondition("buffers made without a reference output");
  TR_RETURN_IF_ERROR(check::Poison(problem_, out_[0], ref_, stream));
  return Cuda(cudaStreamSynchronize(stream), "poisoning the output");
}

Status RotatingBuffers::PrepareCheck(uint64_t seed, cudaStream_t stream) {
  TR_RETURN_IF_ERROR(PrepareReference(seed, stream));
  return PoisonOutput(stream);
}

Status RotatingBuffers::CompareCheck(cudaStream_t stream, bool nan_equal) {
  if (!ref_) return Status::FailedPrecondition("buffers made without a reference output");
  Status s = check::CompareBytesWith(problem_, out_[0], ref_, problem_.out_alloc_bytes(), stream,
                                     nan_equal, counters_);
  if (s.ok() || s.message().find("mismatching") == std::string::npos) return s;
  return Status::FailedPrecondition("output differs from the reference: " + s.message());
}

StatusOr<int> PlacementSets::Ensure(int wanted, cudaStream_t stream, std::string* fallback) {
  if (wanted <= 1) return 1;
  if (!planned_) {
    planned_ = true;
    const Problem& p = first_->problem();
    size_t free_b = 0, total_b = 0;
    TR_RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
    const PlacementPlan plan =
        PlanPlacements(wanted, p.in_alloc_bytes() + p.out_alloc_bytes(),
                       first_->working_set_bytes(), first_->l2_bytes(),
                       static_cast<int64_t>(free_b));
    if (!plan.fallback.empty() && fallback) *fallback = plan.fallback;
    HarnessOptions timed_only;
    timed_only.reference = false;
    for (int s = 1; s < plan.placements; ++s) {
      // Each set while the earlier are held: other physical memory than theirs.
      auto b = RotatingBuffers::Create(p, stream, timed_only);
      if (!b.ok()) {
        extra_.clear();
        if (b.status().code() != StatusCode::kResourceExhausted) return b.status();
        if (fallback) {
          *fallback = "one buffer placement instead of " + std::to_string(plan.placements) +
                      ": set " + std::to_string(s) + " did not fit (" + b.status().message() + ")";
        }
        break;
      }
      extra_.push_back(std::move(*b));
    }
  }
  return std::min(wanted, sets());
}

EventPool::~EventPool() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

StatusOr<std::unique_ptr<EventPool>> EventPool::Create(int events) {
  std::unique_ptr<EventPool> pool(new EventPool());
  for (int i = 0; i < std::max(2, events); ++i) {
    cudaEvent_t e = nullptr;
    TR_RETURN_IF_ERROR(Cuda(cudaEventCreate(&e), "cudaEventCreate"));
    pool->events_.push_back(e);
  }
  return std::move(pool);
}

StatusOr<Timing> TimeLaunches(const std::function<Status(int pair)>& launch, int pairs,
                              uint64_t* rotate, cudaStream_t stream, const EventPool& events,
                              const TimingOptions& o) {
  if (pairs < 1) return Status::InvalidArgument("no buffers to time on");
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const Clock::time_point warm_start = Clock::now();
  const int warmup = std::max(1, o.warmup);
  TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events[0], stream), "cudaEventRecord"));
  for (int w = 0; w < warmup; ++w) TR_RETURN_IF_ERROR(launch((*rotate)++ % pairs));
  TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events[1], stream), "cudaEventRecord"));
  TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(events[1]), "warm-up"));
  float warm_ms = 0;
  TR_RETURN_IF_ERROR(Cuda(cudaEventElapsedTime(&warm_ms, events[0], events[1]), "elapsed"));
  const double est = std::max(1e-7, warm_ms * 1e-3 / warmup);
  const int k = static_cast<int>(std::clamp<double>(std::ceil(o.min_sample_seconds / est), 1,
                                                    std::max(1, o.max_launches_per_sample)));
  Timing t;
  t.warmup = warmup;
  t.launches_per_sample = k;
  t.warmup_wall_s = since(warm_start);
  if (o.cutoff_s > 0 && est >= o.cutoff_s && est >= o.min_sample_seconds) {
    // Screened: the warm-up's launches, each long enough to be timed alone, are the sample.
    t.screened = true;
    t.warmup = 0;
    t.launches_per_sample = warmup;
    t.samples_s.push_back(est);
    t.timed_s = est * warmup;
    return t;
  }
  const Clock::time_point samples_start = Clock::now();
  const int batch_cap = events.size() - 1;
  double total = 0;
  while ((static_cast<int>(t.samples_s.size()) < o.min_samples || total < o.min_seconds) &&
         static_cast<int>(t.samples_s.size()) < o.max_samples) {
    const int have = static_cast<int>(t.samples_s.size());
    int need = std::max<int>(o.min_samples - have,
                             static_cast<int>(std::ceil((o.min_seconds - total) / (est * k))));
    need = std::clamp(need, 1, std::min(batch_cap, o.max_samples - have));
    TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events[0], stream), "cudaEventRecord"));
    for (int s = 0; s < need; ++s) {
      for (int l = 0; l < k; ++l) TR_RETURN_IF_ERROR(launch((*rotate)++ % pairs));
      TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events[s + 1], stream), "cudaEventRecord"));
    }
    TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(events[need]), "timed launches"));
    TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "timed launches"));
    for (int s = 0; s < need; ++s) {
      float ms = 0;
      TR_RETURN_IF_ERROR(Cuda(cudaEventElapsedTime(&ms, events[s], events[s + 1]), "elapsed"));
      const double x = ms * 1e-3 / k;
      t.samples_s.push_back(x);
      total += x * k;
    }
  }
  t.samples_wall_s = since(samples_start);
  t.timed_s = total;
  return t;
}

Status LaunchMemcpy(const RotatingBuffers& b, int pair, cudaStream_t stream) {
  const cudaError_t e =
      cudaMemcpyAsync(b.out(pair), b.in(pair), static_cast<size_t>(b.problem().bytes()),
                      cudaMemcpyDeviceToDevice, stream);
  return e == cudaSuccess ? Status::OK() : Cuda(e, "cudaMemcpyAsync D2D");
}

Status LaunchCopy16(const RotatingBuffers& b, int pair, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(b.problem().bytes());
  const size_t blocks = std::max<size_t>(1, std::min<size_t>((bytes / 16 + 255) / 256, 65536));
  Copy16Kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const unsigned char*>(b.in(pair)), static_cast<unsigned char*>(b.out(pair)),
      bytes);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::OK() : Cuda(e, "copy16 kernel launch");
}

}  // namespace transposed::kernels
