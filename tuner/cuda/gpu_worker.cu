#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/version.h"
#include "transposed/kernels/config.h"
#include "transposed/kernels/launch.h"
#include "tuner/cuda/gpu_worker.h"
#include "tuner/cuda/worker_constants.h"

namespace transposed::cuda_worker {
namespace {

// Rotation: the timed working set (inputs + outputs) should exceed this many times the L2.
constexpr int64_t kWorkingSetL2Multiple = 2;
// Rotation buffers are capped at min(kMaxRotationBytes, kMaxRotationFreeFraction * free memory).
constexpr int64_t kMaxRotationBytes = int64_t{4} << 30;
constexpr double kMaxRotationFreeFraction = 0.4;
// A timed sample spans back-to-back launches on rotating buffers until it is at least this long
// (estimated from the warm-up), so that tiny kernels are not dominated by event resolution.
constexpr double kMinSampleSeconds = 50e-6;
constexpr int kMaxLaunchesPerSample = 64;
// Samples enqueued between two host synchronisations.
constexpr int kMaxBatchSamples = 256;

// --- device kernels ----------------------------------------------------------------------------

__device__ __forceinline__ uint32_t Hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Fills n bytes with a hash of (seed, position): 16 bytes per thread, then the tail.
__global__ void FillKernel(unsigned char* p, size_t n, uint64_t seed) {
  const size_t n16 = n / 16;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += stride) {
    const uint64_t base = seed * 0x9e3779b97f4a7c15ULL + i * 4;
    uint4 v = make_uint4(Hash32(base), Hash32(base + 1), Hash32(base + 2), Hash32(base + 3));
    reinterpret_cast<uint4*>(p)[i] = v;
  }
  if (blockIdx.x == 0) {
    for (size_t i = n16 * 16 + threadIdx.x; i < n; i += blockDim.x) {
      p[i] = static_cast<unsigned char>(Hash32(seed * 0x9e3779b97f4a7c15ULL + (i << 20)));
    }
  }
}

// dst = ~src over n bytes (the poisoned output: differs from the reference in every bit).
__global__ void NotKernel(const unsigned char* src, unsigned char* dst, size_t n) {
  const size_t n16 = n / 16;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += stride) {
    uint4 v = reinterpret_cast<const uint4*>(src)[i];
    reinterpret_cast<uint4*>(dst)[i] = make_uint4(~v.x, ~v.y, ~v.z, ~v.w);
  }
  if (blockIdx.x == 0) {
    for (size_t i = n16 * 16 + threadIdx.x; i < n; i += blockDim.x) dst[i] = ~src[i];
  }
}

// The ceiling's copy kernel: 16-byte loads and stores, then the tail.
__global__ void Copy16Kernel(const unsigned char* src, unsigned char* dst, size_t n) {
  const size_t n16 = n / 16;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += stride) {
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  }
  if (blockIdx.x == 0) {
    for (size_t i = n16 * 16 + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

// result[0]: mismatching bytes; result[1]: first mismatching byte offset (min).
// Matrix bytes must equal ref; leading-dimension gap bytes must still hold the poison (~ref).
__device__ __forceinline__ void NoteMismatch(unsigned long long* result, size_t offset) {
  atomicAdd(&result[0], 1ULL);
  atomicMin(&result[1], static_cast<unsigned long long>(offset));
}

__global__ void CompareDenseKernel(const unsigned char* ref, const unsigned char* out, size_t n,
                                   unsigned long long* result) {
  const size_t n16 = n / 16;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += stride) {
    uint4 a = reinterpret_cast<const uint4*>(ref)[i];
    uint4 b = reinterpret_cast<const uint4*>(out)[i];
    if (a.x != b.x || a.y != b.y || a.z != b.z || a.w != b.w) {
      for (int k = 0; k < 16; ++k) {
        if (ref[i * 16 + k] != out[i * 16 + k]) NoteMismatch(result, i * 16 + k);
      }
    }
  }
  if (blockIdx.x == 0) {
    for (size_t i = n16 * 16 + threadIdx.x; i < n; i += blockDim.x) {
      if (ref[i] != out[i]) NoteMismatch(result, i);
    }
  }
}

// Output with gaps: matrix b's row j (an input column) holds `rows` elements then out_ld - rows
// gap elements.
__global__ void CompareStridedKernel(const unsigned char* ref, const unsigned char* out, size_t n,
                                     int esize, int64_t rows, int64_t out_ld,
                                     unsigned long long* result) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t row_bytes = static_cast<size_t>(out_ld) * esize;
  const size_t data_bytes = static_cast<size_t>(rows) * esize;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const bool gap = (i % row_bytes) >= data_bytes;
    const unsigned char expect = gap ? static_cast<unsigned char>(~ref[i]) : ref[i];
    if (out[i] != expect) NoteMismatch(result, i);
  }
}

// The deliberately faulting candidate: a store through an address that is never mapped.
__global__ void FaultKernel(int* bad) { *bad = 1; }

int GridFor(size_t work_items, int block) {
  const size_t blocks = (work_items + block - 1) / block;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(blocks, 65536)));
}

bool IsSticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
      return true;
    default:
      return false;
  }
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += Fmt("\\u%04x", c);
    } else {
      o += c;
    }
  }
  return o;
}

struct Pair {
  unsigned char* in = nullptr;
  unsigned char* out = nullptr;
};

// A parsed candidate: the fault kernel, or a kernel configuration.
struct Parsed {
  bool fault = false;
  kernels::TransposeConfig config;
};

class GpuWorkerImpl : public GpuWorker {
 public:
  GpuWorkerImpl(int device, bool faults) : device_(device), faults_(faults) {}
  ~GpuWorkerImpl() override {
    if (!broken_) {
      FreeBuffers();
      for (cudaEvent_t e : events_) cudaEventDestroy(e);
      if (stream_) cudaStreamDestroy(stream_);
      if (result_) cudaFree(result_);
    }
  }

  Status Init() {
    TR_RETURN_IF_ERROR(Cuda(cudaSetDevice(device_), "cudaSetDevice"));
    TR_RETURN_IF_ERROR(Cuda(cudaFree(nullptr), "creating the CUDA context"));
    TR_RETURN_IF_ERROR(Cuda(cudaGetDeviceProperties(&prop_, device_), "cudaGetDeviceProperties"));
    TR_RETURN_IF_ERROR(
        Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    events_.resize(kMaxBatchSamples + 1);
    for (auto& e : events_) TR_RETURN_IF_ERROR(Cuda(cudaEventCreate(&e), "cudaEventCreate"));
    TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&result_, 2 * sizeof(unsigned long long)), "cudaMalloc"));
    sm_clock_khz_ = Attr(cudaDevAttrClockRate);
    mem_clock_khz_ = Attr(cudaDevAttrMemoryClockRate);
    return Status::OK();
  }

  bool context_broken() const override { return broken_; }

  StatusOr<DeviceInfo> Describe() override {
    TR_RETURN_IF_ERROR(Usable());
    DeviceInfo d;
    d.backend = "cuda";
    d.index = device_;
    const unsigned char* u = reinterpret_cast<const unsigned char*>(prop_.uuid.bytes);
    d.uuid = Fmt("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                 u[14], u[15]);
    d.name = prop_.name;
    d.memory_bytes = prop_.totalGlobalMem;
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    auto& a = d.attributes;
    a["compute_capability"] = Fmt("%d.%d", prop_.major, prop_.minor);
    a["sm_count"] = std::to_string(prop_.multiProcessorCount);
    a["l2_bytes"] = std::to_string(prop_.l2CacheSize);
    a["shared_mem_per_block_optin"] = std::to_string(prop_.sharedMemPerBlockOptin);
    a["memory_bus_width"] = std::to_string(prop_.memoryBusWidth);
    a["memory_clock_khz"] = std::to_string(mem_clock_khz_);
    a["sm_clock_khz"] = std::to_string(sm_clock_khz_);
    a["driver_version"] = std::to_string(driver);
    a["runtime_version"] = std::to_string(runtime);
    d.library_version = kLibraryVersion;
    return d;
  }

  Status Open(const Problem& p) override {
    TR_RETURN_IF_ERROR(Usable());
    FreeBuffers();
    TR_RETURN_IF_ERROR(ValidateProblem(p, prop_.totalGlobalMem));
    size_t free_b = 0, total_b = 0;
    TR_RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
    const int64_t in_b = p.in_alloc_bytes(), out_b = p.out_alloc_bytes();
    const int64_t pair_b = in_b + out_b;
    // One pair plus the reference output must fit, with 10% of free memory left over.
    if (static_cast<double>(pair_b + out_b) > 0.9 * static_cast<double>(free_b)) {
      return Status::ResourceExhausted(
          Fmt("%s needs %lld bytes of buffers, the device has %zu free", p.ToString().c_str(),
              static_cast<long long>(pair_b + out_b), free_b));
    }
    const int64_t cap = std::min<int64_t>(kMaxRotationBytes,
                                          static_cast<int64_t>(kMaxRotationFreeFraction * free_b));
    // Strictly more than kWorkingSetL2Multiple x L2 (one pair more than fits in it).
    const int64_t want = kWorkingSetL2Multiple * prop_.l2CacheSize / pair_b + 1;
    const int64_t n = std::max<int64_t>(1, std::min<int64_t>(want, cap / pair_b));
    problem_ = p;
    for (int64_t i = 0; i < n; ++i) {
      Pair pr;
      Status s = Cuda(cudaMalloc(&pr.in, in_b), "cudaMalloc(input)");
      if (s.ok()) s = Cuda(cudaMalloc(&pr.out, out_b), "cudaMalloc(output)");
      if (!s.ok()) {
        if (pr.in) cudaFree(pr.in);
        FreeBuffers();
        cudaGetLastError();
        return Status::ResourceExhausted(s.message());
      }
      pairs_.push_back(pr);
    }
    Status s = Cuda(cudaMalloc(&ref_, out_b), "cudaMalloc(reference)");
    if (!s.ok()) {
      FreeBuffers();
      cudaGetLastError();
      return Status::ResourceExhausted(s.message());
    }
    // Random data everywhere (never time zeros), outputs included.
    for (size_t i = 0; i < pairs_.size(); ++i) {
      Fill(pairs_[i].in, in_b, 1000 + 2 * i);
      Fill(pairs_[i].out, out_b, 1001 + 2 * i);
    }
    TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "fill kernel launch"));
    TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), "filling buffers"));
    open_ = true;
    rotate_ = 0;
    return Status::OK();
  }

  Status Close() override {
    if (!broken_) FreeBuffers();
    return Usable();
  }

  Status Check(const Candidate& c) override {
    TR_RETURN_IF_ERROR(Ready());
    TR_ASSIGN_OR_RETURN(Parsed parsed, Parse(c));
    const Problem& p = problem_;
    const size_t in_b = p.in_alloc_bytes(), out_b = p.out_alloc_bytes();
    // Fresh input for every check, its reference, then the output poisoned to ~reference.
    Fill(pairs_[0].in, in_b, 0x5eed0000ULL + (++check_seed_));
    TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "fill kernel launch"));
    TR_RETURN_IF_ERROR(kernels::LaunchReference(p, pairs_[0].in, ref_, stream_));
    TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "reference kernel launch"));
    NotKernel<<<GridFor(out_b / 16, 256), 256, 0, stream_>>>(ref_, pairs_[0].out, out_b);
    TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "poison kernel launch"));
    TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), "preparing the check"));
    TR_RETURN_IF_ERROR(LaunchOnce(parsed, c.name, 0));
    TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), ("running " + c.name).c_str()));

    unsigned long long init[2] = {0, ~0ULL};
    TR_RETURN_IF_ERROR(
        Cuda(cudaMemcpyAsync(result_, init, sizeof(init), cudaMemcpyHostToDevice, stream_),
             "cudaMemcpy"));
    if (p.out_ld() == p.rows) {
      CompareDenseKernel<<<GridFor(out_b / 16, 256), 256, 0, stream_>>>(ref_, pairs_[0].out, out_b,
                                                                        result_);
    } else {
      CompareStridedKernel<<<GridFor(out_b, 256), 256, 0, stream_>>>(
          ref_, pairs_[0].out, out_b, p.elem_size(), p.rows, p.out_ld(), result_);
    }
    TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "compare kernel launch"));
    unsigned long long res[2] = {0, 0};
    TR_RETURN_IF_ERROR(Cuda(
        cudaMemcpyAsync(res, result_, sizeof(res), cudaMemcpyDeviceToHost, stream_), "cudaMemcpy"));
    TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), "comparing"));
    if (res[0] == 0) return Status::OK();
    return Status::FailedPrecondition(c.name + ": " + DescribeMismatch(res[1], res[0]));
  }

  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) override {
    TR_RETURN_IF_ERROR(Ready());
    TR_ASSIGN_OR_RETURN(Parsed parsed, Parse(c));
    return Time([&](int pair) { return LaunchOnce(parsed, c.name, pair); }, o,
                "\"kind\":\"kernel\"");
  }

  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) override {
    TR_RETURN_IF_ERROR(Ready());
    const size_t bytes = static_cast<size_t>(problem_.bytes());
    TR_ASSIGN_OR_RETURN(Measurement memcpy_m,
                        Time(
                            [&](int pair) {
                              return Cuda(cudaMemcpyAsync(pairs_[pair].out, pairs_[pair].in, bytes,
                                                          cudaMemcpyDeviceToDevice, stream_),
                                          "cudaMemcpyAsync D2D");
                            },
                            o, "\"kind\":\"ceiling\",\"ceiling_kind\":\"memcpy_d2d\""));
    TR_ASSIGN_OR_RETURN(Measurement copy_m,
                        Time(
                            [&](int pair) {
                              Copy16Kernel<<<GridFor(bytes / 16, 256), 256, 0, stream_>>>(
                                  pairs_[pair].in, pairs_[pair].out, bytes);
                              return Cuda(cudaGetLastError(), "copy16 kernel launch");
                            },
                            o, "\"kind\":\"ceiling\",\"ceiling_kind\":\"copy16_kernel\""));
    const bool memcpy_wins = memcpy_m.median_s <= copy_m.median_s;
    Measurement best = memcpy_wins ? memcpy_m : copy_m;
    // Record both in the winner's method.
    best.method.pop_back();  // the closing brace
    best.method += Fmt(",\"memcpy_d2d_median_s\":%.9g,\"copy16_kernel_median_s\":%.9g}",
                       memcpy_m.median_s, copy_m.median_s);
    return best;
  }

 private:
  int Attr(cudaDeviceAttr a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, device_) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return v;
  }

  // Turns a CUDA error into a Status; marks the context broken on sticky errors.
  Status Cuda(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return Status::OK();
    if (IsSticky(e)) broken_ = true;
    std::string msg = Fmt("%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    if (broken_) msg += "; the CUDA context is broken";
    return Status::Internal(msg);
  }

  Status Usable() const {
    if (broken_) return Status::Internal("the worker's CUDA context is broken");
    return Status::OK();
  }
  Status Ready() const {
    TR_RETURN_IF_ERROR(Usable());
    if (!open_) return Status::FailedPrecondition("no problem is open in the worker");
    return Status::OK();
  }

  void FreeBuffers() {
    for (auto& pr : pairs_) {
      cudaFree(pr.in);
      cudaFree(pr.out);
    }
    pairs_.clear();
    if (ref_) cudaFree(ref_);
    ref_ = nullptr;
    open_ = false;
  }

  void Fill(unsigned char* p, size_t n, uint64_t seed) {
    FillKernel<<<GridFor(n / 16, 256), 256, 0, stream_>>>(p, n, seed);
  }

  StatusOr<Parsed> Parse(const Candidate& c) {
    Parsed r;
    if (c.name == kFaultCandidateName) {
      if (!faults_) {
        return Status::InvalidArgument(c.name + " exists only with --enable-test-faults");
      }
      r.fault = true;
      return r;
    }
    TR_ASSIGN_OR_RETURN(r.config, kernels::TransposeConfig::FromName(c.name));
    TR_RETURN_IF_ERROR(kernels::CheckConfig(r.config, problem_));
    return r;
  }

  Status LaunchOnce(const Parsed& parsed, const std::string& name, int pair) {
    if (parsed.fault) {
      // An address far from any allocation: the store faults with an illegal address.
      FaultKernel<<<1, 1, 0, stream_>>>(reinterpret_cast<int*>(uintptr_t{0x10}));
      return Cuda(cudaGetLastError(), ("launching " + name).c_str());
    }
    Status s = kernels::Launch(parsed.config, problem_, pairs_[pair].in, pairs_[pair].out, stream_);
    if (!s.ok()) {
      // The kernel library may have seen a CUDA error; a sticky one must be noticed.
      Cuda(cudaGetLastError(), "after launch");
      return Status(s.code(), name + ": " + s.message());
    }
    return Cuda(cudaGetLastError(), ("launching " + name).c_str());
  }

  std::string DescribeMismatch(unsigned long long first, unsigned long long count) const {
    const Problem& p = problem_;
    const int64_t es = p.elem_size();
    const int64_t e = static_cast<int64_t>(first) / es;
    const int64_t per_matrix = p.cols * p.out_ld();
    const int64_t b = e / per_matrix, m = e % per_matrix;
    const int64_t j = m / p.out_ld(), i = m % p.out_ld();  // output row j = input column j
    if (i >= p.rows) {
      return Fmt("wrote into the output's leading-dimension gap at byte %llu (%llu bytes wrong)",
                 first, count);
    }
    return Fmt(
        "output differs from the reference at batch %lld, input row %lld, column %lld "
        "(byte %llu; %llu bytes wrong)",
        static_cast<long long>(b), static_cast<long long>(i), static_cast<long long>(j), first,
        count);
  }

  // Times launch(pair) on rotating pairs: warm-up, then samples of k back-to-back launches
  // between two events (k from the warm-up so a sample lasts >= kMinSampleSeconds), until both
  // min_samples and min_seconds (or max_samples). Each sample is its time divided by k.
  StatusOr<Measurement> Time(const std::function<Status(int)>& launch, const MeasureOptions& o,
                             const std::string& kind_json) {
    const int npairs = static_cast<int>(pairs_.size());
    const int warmup = std::max(1, o.warmup);
    TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events_[0], stream_), "cudaEventRecord"));
    for (int w = 0; w < warmup; ++w) TR_RETURN_IF_ERROR(launch(rotate_++ % npairs));
    TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events_[1], stream_), "cudaEventRecord"));
    TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(events_[1]), "warm-up"));
    float warm_ms = 0;
    TR_RETURN_IF_ERROR(Cuda(cudaEventElapsedTime(&warm_ms, events_[0], events_[1]), "elapsed"));
    const double est = std::max(1e-7, warm_ms * 1e-3 / warmup);
    const int k = static_cast<int>(
        std::clamp<double>(std::ceil(kMinSampleSeconds / est), 1, kMaxLaunchesPerSample));
    std::vector<double> samples;
    double total = 0;
    while ((static_cast<int>(samples.size()) < o.min_samples || total < o.min_seconds) &&
           static_cast<int>(samples.size()) < o.max_samples) {
      int need = std::max<int>(o.min_samples - static_cast<int>(samples.size()),
                               static_cast<int>(std::ceil((o.min_seconds - total) / (est * k))));
      need = std::clamp(
          need, 1, std::min(kMaxBatchSamples, o.max_samples - static_cast<int>(samples.size())));
      TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events_[0], stream_), "cudaEventRecord"));
      for (int s = 0; s < need; ++s) {
        for (int l = 0; l < k; ++l) TR_RETURN_IF_ERROR(launch(rotate_++ % npairs));
        TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(events_[s + 1], stream_), "cudaEventRecord"));
      }
      TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(events_[need]), "timed launches"));
      TR_RETURN_IF_ERROR(Cuda(cudaGetLastError(), "timed launches"));
      for (int s = 0; s < need; ++s) {
        float ms = 0;
        TR_RETURN_IF_ERROR(Cuda(cudaEventElapsedTime(&ms, events_[s], events_[s + 1]), "elapsed"));
        const double t = ms * 1e-3 / k;
        samples.push_back(t);
        total += t * k;
      }
    }
    const int64_t ws =
        static_cast<int64_t>(npairs) * (problem_.in_alloc_bytes() + problem_.out_alloc_bytes());
    std::string method =
        Fmt("{\"timer\":\"cuda_event\",%s,\"warmup\":%d,\"samples\":%zu,\"launches_per_sample\":%d,"
            "\"buffers\":%d,\"working_set_bytes\":%lld,\"l2_bytes\":%d,\"sm_clock_khz\":%d,"
            "\"memory_clock_khz\":%d,\"device\":\"%s\"}",
            kind_json.c_str(), warmup, samples.size(), k, npairs, static_cast<long long>(ws),
            prop_.l2CacheSize, sm_clock_khz_, mem_clock_khz_, JsonEscape(prop_.name).c_str());
    return Measurement::FromSamples(std::move(samples), warmup, std::move(method));
  }

  const int device_;
  const bool faults_;
  bool broken_ = false;
  bool open_ = false;
  cudaDeviceProp prop_{};
  int sm_clock_khz_ = 0, mem_clock_khz_ = 0;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  unsigned long long* result_ = nullptr;
  Problem problem_;
  std::vector<Pair> pairs_;
  unsigned char* ref_ = nullptr;
  uint64_t check_seed_ = 0;
  uint64_t rotate_ = 0;
};

}  // namespace

StatusOr<int> CudaDeviceCount() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::Unavailable(
        Fmt("cudaGetDeviceCount: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e)));
  }
  return n;
}

StatusOr<std::unique_ptr<GpuWorker>> CreateGpuWorker(int device, bool enable_test_faults) {
  auto w = std::make_unique<GpuWorkerImpl>(device, enable_test_faults);
  TR_RETURN_IF_ERROR(w->Init());
  return std::unique_ptr<GpuWorker>(std::move(w));
}

}  // namespace transposed::cuda_worker
