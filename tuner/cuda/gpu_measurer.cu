#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/placements.h"
#include "core/version.h"
#include "transposed/kernels/config.h"
#include "transposed/kernels/harness.h"
#include "transposed/kernels/launch.h"
#include "tuner/cuda/gpu_measurer.h"
#include "tuner/cuda/worker_constants.h"

namespace transposed::cuda_worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Timing and buffers are the shared harness's (transposed/kernels/harness.h), so the numbers the
// daemon stores mean what transpose_bench's numbers mean.
constexpr int kEvents = 257;

// --- device kernels ----------------------------------------------------------------------------

// The deliberately faulting candidate: a store through an address that is never mapped.
__global__ void FaultKernel(int* bad) { *bad = 1; }
// The wrong-output candidates: one byte flipped after a correct transpose.
__global__ void FlipByteKernel(unsigned char* p) { *p = static_cast<unsigned char>(~*p); }

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


// A parsed candidate: the fault kernel, or a configuration prepared once for the open problem
// (checked, looked up, pointers of every buffer pair checked), so that timed launches neither
// validate nor build strings.
struct Parsed {
  enum class Fault { kNone, kIllegalAddress, kWrongOutput, kGapWrite };
  Fault fault = Fault::kNone;
  std::optional<kernels::PreparedLaunch> launch;
};

class GpuMeasurerImpl : public GpuMeasurer {
 public:
  GpuMeasurerImpl(int device, bool faults) : device_(device), faults_(faults) {}
  ~GpuMeasurerImpl() override {
    if (!broken_) {
      sets_.reset();
      buffers_.reset();
      events_.reset();
      if (stream_) cudaStreamDestroy(stream_);
    } else {
      // A broken context cannot free anything; the process exits next.
      (void)sets_.release();
      (void)buffers_.release();
      (void)events_.release();
    }
  }

  Status Init() {
    TR_RETURN_IF_ERROR(Cuda(cudaSetDevice(device_), "cudaSetDevice"));
    TR_RETURN_IF_ERROR(Cuda(cudaFree(nullptr), "creating the CUDA context"));
    TR_RETURN_IF_ERROR(Cuda(cudaGetDeviceProperties(&prop_, device_), "cudaGetDeviceProperties"));
    TR_RETURN_IF_ERROR(
        Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    TR_ASSIGN_OR_RETURN(events_, kernels::EventPool::Create(kEvents));
    sm_clock_khz_ = Attr(cudaDevAttrClockRate);
    mem_clock_khz_ = Attr(cudaDevAttrMemoryClockRate);
    return Status::OK();
  }

  bool context_broken() const override { return broken_; }
  TimeBreakdown TakePhases() override { return std::exchange(phases_, TimeBreakdown()); }

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
    // Vendor members of the family are candidates only where their library loads here.
    // Each library's version is part of the device class (core/device_class.cc).
    const kernels::TransposeConfig geam = *kernels::TransposeConfig::FromName("cublas.geam");
    if (kernels::VendorAvailable(geam)) a["cublas"] = kernels::VendorDescription(geam);
    const kernels::TransposeConfig permute =
        *kernels::TransposeConfig::FromName("cutensor.permute");
    if (kernels::VendorAvailable(permute)) a["cutensor"] = kernels::VendorDescription(permute);
    d.library_version = kLibraryVersion;
    return d;
  }

  Status Open(const Problem& p) override {
    TR_RETURN_IF_ERROR(Usable());
    sets_.reset();
    buffers_.reset();
    TR_RETURN_IF_ERROR(ValidateProblem(p, prop_.totalGlobalMem));
    const Clock::time_point t0 = Clock::now();
    auto b = kernels::RotatingBuffers::Create(p, stream_);
    phases_.Add("worker.open.alloc_fill", SecondsSince(t0));
    if (!b.ok()) return Noticed(b.status());
    buffers_ = std::move(*b);
    sets_ = std::make_unique<kernels::PlacementSets>(buffers_.get());
    rotate_ = 0;
    reference_ready_ = false;
    return Status::OK();
  }

  Status Close() override {
    if (!broken_) {
      sets_.reset();
      buffers_.reset();
    }
    return Usable();
  }

  // The reference output is computed once per open problem and reused by every check; only the
  // output is poisoned again before each one. A check that fails on a reused reference is run
  // once more on fresh input, so a candidate that scribbled on the shared buffers cannot make a
  // later one fail.
  Status Check(const Candidate& c) override {
    TR_RETURN_IF_ERROR(Ready());
    const Clock::time_point t = Clock::now();
    TR_ASSIGN_OR_RETURN(Parsed parsed, Parse(c));
    phases_.Add("worker.check.parse", SecondsSince(t));
    // The check the open problem asks for: bit-exact, or value-exact (NaNs equal whatever their
    // payloads) for a member that canonicalizes NaNs on a value-exact problem. A member that does
    // not meet the problem's exactness fails outright (CandidateConfigs never offers it).
    const Exactness exactness = buffers_->problem().Normalized().exactness;
    if (parsed.launch && !parsed.launch->config().meets(exactness)) {
      return Status::FailedPrecondition(c.name +
                                        ": canonicalizes NaNs, and the problem asks for a "
                                        "bit-exact transpose (exactness value admits it)");
    }
    const bool nan_equal = parsed.launch && parsed.launch->config().canonicalizes_nan() &&
                           exactness == Exactness::kValue;
    const bool reused = reference_ready_;
    Status s = CheckOnce(parsed, c, nan_equal);
    if (!s.ok() && reused && !broken_) s = CheckOnce(parsed, c, nan_equal);
    return s;
  }

  // Over o.placements buffer sets where the open problem is big enough (core/placements.h):
  // the sets first (so that the candidate's pointers are checked on every one), then the timing.
  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) override {
    TR_RETURN_IF_ERROR(Ready());
    TR_ASSIGN_OR_RETURN(const int sets, Sets(o.placements));
    const Clock::time_point t = Clock::now();
    TR_ASSIGN_OR_RETURN(Parsed parsed, Parse(c));
    phases_.Add("worker.measure.parse", SecondsSince(t));
    return OverSets(sets, o, [&](const kernels::RotatingBuffers& b, const MeasureOptions& share) {
      return Time(
          b, [&](int pair) { return LaunchOnce(parsed, c.name, b, pair); }, share, "transpose",
          "worker.measure");
    });
  }

  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) override {
    TR_RETURN_IF_ERROR(Ready());
    TR_ASSIGN_OR_RETURN(const int sets, Sets(o.placements));
    TR_ASSIGN_OR_RETURN(
        Measurement memcpy_m,
        OverSets(sets, o, [&](const kernels::RotatingBuffers& b, const MeasureOptions& share) {
          return Time(
              b, [&](int pair) { return kernels::LaunchMemcpy(b, pair, stream_); }, share,
              "memcpy_d2d", "worker.ceiling");
        }));
    TR_ASSIGN_OR_RETURN(
        Measurement copy_m,
        OverSets(sets, o, [&](const kernels::RotatingBuffers& b, const MeasureOptions& share) {
          return Time(
              b, [&](int pair) { return kernels::LaunchCopy16(b, pair, stream_); }, share,
              "copy16_kernel", "worker.ceiling");
        }));
    const bool memcpy_wins = memcpy_m.median_s <= copy_m.median_s;
    Measurement best = memcpy_wins ? memcpy_m : copy_m;
    // Record both in the winner's method.
    best.method.alternatives_median_s = {{"memcpy_d2d", memcpy_m.median_s},
                                         {"copy16_kernel", copy_m.median_s}};
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

  // A failure reported by the harness or the kernel library may hide a sticky CUDA error: look.
  Status Noticed(Status s) {
    if (s.ok()) return s;
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess && IsSticky(e)) {
      broken_ = true;
      return Status::Internal(s.message() + "; the CUDA context is broken");
    }
    return s;
  }

  Status Usable() const {
    if (broken_) return Status::Internal("the worker's CUDA context is broken");
    return Status::OK();
  }
  Status Ready() const {
    TR_RETURN_IF_ERROR(Usable());
    if (!buffers_) return Status::FailedPrecondition("no problem is open in the worker");
    return Status::OK();
  }

  StatusOr<Parsed> Parse(const Candidate& c) {
    Parsed r;
    for (auto [name, fault] : {std::pair{kFaultCandidateName, Parsed::Fault::kIllegalAddress},
                               std::pair{kWrongOutputCandidateName, Parsed::Fault::kWrongOutput},
                               std::pair{kGapWriteCandidateName, Parsed::Fault::kGapWrite}}) {
      if (c.name != name) continue;
      if (!faults_) {
        return Status::InvalidArgument(c.name + " exists only in transposed-worker-faults");
      }
      r.fault = fault;
      return r;
    }
    TR_ASSIGN_OR_RETURN(kernels::TransposeConfig config,
                        kernels::TransposeConfig::FromName(c.name));
    TR_ASSIGN_OR_RETURN(kernels::PreparedLaunch l,
                        kernels::PreparedLaunch::Prepare(config, buffers_->problem()));
    for (int s = 0; s < sets_->sets(); ++s) {
      const kernels::RotatingBuffers& b = sets_->set(s);
      for (int i = 0; i < b.pairs(); ++i) TR_RETURN_IF_ERROR(l.CheckPointers(b.in(i), b.out(i)));
    }
    r.launch = std::move(l);
    return r;
  }

  Status LaunchOnce(const Parsed& parsed, const std::string& name,
                    const kernels::RotatingBuffers& b, int pair) {
    if (parsed.fault == Parsed::Fault::kIllegalAddress) {
      // An address far from any allocation: the store faults with an illegal address.
      FaultKernel<<<1, 1, 0, stream_>>>(reinterpret_cast<int*>(uintptr_t{0x10}));
      return Cuda(cudaGetLastError(), ("launching " + name).c_str());
    }
    if (parsed.fault != Parsed::Fault::kNone) {
      const Problem& p = b.problem();
      TR_RETURN_IF_ERROR(kernels::LaunchReference(p, b.in(pair), b.out(pair), stream_));
      // The middle element's first byte, or the first gap byte after output row 0.
      int64_t at = (p.out_alloc_bytes() / p.elem_size() / 2) * p.elem_size();
      if (parsed.fault == Parsed::Fault::kGapWrite && p.out_ld() > p.rows)
        at = p.rows * p.elem_size();
      FlipByteKernel<<<1, 1, 0, stream_>>>(static_cast<unsigned char*>(b.out(pair)) + at);
      return Cuda(cudaGetLastError(), ("launching " + name).c_str());
    }
    Status s = parsed.launch->Run(b.in(pair), b.out(pair), stream_);
    if (!s.ok()) {
      // The kernel library may have seen a CUDA error; a sticky one must be noticed.
      Cuda(cudaGetLastError(), "after launch");
      return Status(s.code(), name + ": " + s.message());
    }
    const cudaError_t e = cudaGetLastError();  // no string unless it failed
    return e == cudaSuccess ? Status::OK() : Cuda(e, ("launching " + name).c_str());
  }

  // One check: the reference (unless ready), the output poisoned, one launch, the comparison.
  Status CheckOnce(const Parsed& parsed, const Candidate& c, bool nan_equal) {
    Clock::time_point t = Clock::now();
    if (!reference_ready_) {
      TR_RETURN_IF_ERROR(
          Noticed(buffers_->PrepareReference(0x5eed0000ULL + (++check_seed_), stream_)));
      phases_.Add("worker.check.reference", SecondsSince(t));
      t = Clock::now();
    }
    reference_ready_ = false;  // until this check passes
    TR_RETURN_IF_ERROR(Noticed(buffers_->PoisonOutput(stream_)));
    phases_.Add("worker.check.poison", SecondsSince(t));
    t = Clock::now();
    TR_RETURN_IF_ERROR(LaunchOnce(parsed, c.name, *buffers_, 0));
    TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), ("running " + c.name).c_str()));
    phases_.Add("worker.check.launch", SecondsSince(t));
    t = Clock::now();
    Status s = Noticed(buffers_->CompareCheck(stream_, nan_equal));
    phases_.Add("worker.check.compare", SecondsSince(t));
    if (s.code() == StatusCode::kFailedPrecondition)
      return Status::FailedPrecondition(c.name + ": " + s.message());
    if (s.ok()) reference_ready_ = true;
    return s;
  }

  // The buffer sets a measurement asking for `wanted` placements uses (kernels::PlacementSets:
  // planned on the open problem's first such ask, the extra sets allocated then). A fallback to
  // one set is said once per problem on stderr (the daemon's log).
  StatusOr<int> Sets(int wanted) {
    if (wanted <= 1 || sets_->planned()) return std::min(std::max(1, wanted), sets_->sets());
    const Clock::time_point t = Clock::now();
    std::string fallback;
    auto n = sets_->Ensure(wanted, stream_, &fallback);
    if (!n.ok()) return Noticed(n.status());
    phases_.Add("worker.placements.alloc_fill", SecondsSince(t));
    if (!fallback.empty()) {
      std::fprintf(stderr, "worker: %s: %s\n", buffers_->problem().ToString().c_str(),
                   fallback.c_str());
      std::fflush(stderr);
    }
    return *n;
  }

  // One measurement over `sets` buffer sets: time(set, options) on each with its share of the
  // options, combined by the rule of core/placements.h (the median of the sets' medians).
  StatusOr<Measurement> OverSets(
      int sets, const MeasureOptions& o,
      const std::function<StatusOr<Measurement>(const kernels::RotatingBuffers&,
                                                const MeasureOptions&)>& time) {
    if (sets <= 1) return time(*buffers_, o);
    const MeasureOptions share = PlacementShare(o, sets);
    std::vector<Measurement> per_set;
    for (int s = 0; s < sets; ++s) {
      TR_ASSIGN_OR_RETURN(Measurement m, time(sets_->set(s), share));
      per_set.push_back(std::move(m));
    }
    return CombinePlacements(per_set);
  }

  // Times launch(pair) with the shared harness (kernels::TimeLaunches) and records the method;
  // the harness's warm-up and sample wall times, and the device time of the samples, go to
  // phase.warmup, phase.samples and phase.timed.
  StatusOr<Measurement> Time(const kernels::RotatingBuffers& b,
                             const std::function<Status(int)>& launch, const MeasureOptions& o,
                             const char* op, const std::string& phase) {
    kernels::TimingOptions t;
    t.warmup = o.warmup;
    t.min_samples = o.min_samples;
    t.min_seconds = o.min_seconds;
    t.max_samples = o.max_samples;
    t.cutoff_s = o.cutoff_s;  // the quick pass's screening (the measurement then has 1 sample)
    auto timing = kernels::TimeLaunches(launch, b.pairs(), &rotate_, stream_, *events_, t);
    if (!timing.ok()) return Noticed(timing.status());
    phases_.Add(phase + ".warmup", timing->warmup_wall_s);
    phases_.Add(phase + ".samples", timing->samples_wall_s);
    phases_.Add(phase + ".timed", timing->timed_s, static_cast<int>(timing->samples_s.size()));
    if (timing->screened) phases_.Add(phase + ".screened", 0);
    MeasureMethod method;
    method.timer = "cuda_event";  // the shared harness, transposed/kernels/harness.h
    method.op = op;
    method.launches_per_sample = timing->launches_per_sample;
    method.buffers = b.pairs();
    method.working_set_bytes = b.working_set_bytes();
    method.cache_bytes = b.l2_bytes();
    method.placements = 1;
    method.sm_clock_khz = sm_clock_khz_;
    method.memory_clock_khz = mem_clock_khz_;
    return Measurement::FromSamples(std::move(timing->samples_s), timing->warmup,
                                    std::move(method));
  }

  const int device_;
  const bool faults_;
  bool broken_ = false;
  cudaDeviceProp prop_{};
  int sm_clock_khz_ = 0, mem_clock_khz_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kernels::EventPool> events_;
  std::unique_ptr<kernels::RotatingBuffers> buffers_;
  // buffers_ and, for measurements over several placements, the extra sets (destroyed first).
  std::unique_ptr<kernels::PlacementSets> sets_;
  uint64_t check_seed_ = 0;
  bool reference_ready_ = false;  // buffers_ holds a reference output of pair 0's input
  uint64_t rotate_ = 0;
  TimeBreakdown phases_;  // since the last TakePhases
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

StatusOr<std::unique_ptr<GpuMeasurer>> CreateGpuMeasurer(int device, bool enable_test_faults) {
  auto w = std::make_unique<GpuMeasurerImpl>(device, enable_test_faults);
  TR_RETURN_IF_ERROR(w->Init());
  return std::unique_ptr<GpuMeasurer>(std::move(w));
}

}  // namespace transposed::cuda_worker
