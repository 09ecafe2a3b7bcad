#include "tuner/cuda/cuda_engine.h"

#include <unistd.h>

#include <string>
#include <utility>

#include "core/version.h"

#include "transposed/kernels/config.h"
#include "transposed/kernels/launch.h"
#include "tuner/cuda/gpu_measurer.h"
#include "tuner/cuda/nvml_probe.h"
#include "tuner/cuda/worker_constants.h"

namespace transposed::cuda_worker {
namespace {

// NVML ships with the driver under this soname (the unversioned name only with its headers).
constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

class CudaEngine : public worker::Engine {
 public:
  CudaEngine(std::unique_ptr<GpuMeasurer> gpu, bool test_faults)
      : gpu_(std::move(gpu)), test_faults_(test_faults) {}

  StatusOr<DeviceInfo> Describe() override { return gpu_->Describe(); }

  // The kernels/ family of this build. The vendor members (cublas.geam, cutensor.permute)
  // canonicalize NaN payloads (kernels/config.h): offered for value-exact problems only, checked
  // value-exact there (GpuMeasurer::Check), and only where their library loads in this worker
  // (kernels::VendorAvailable; the first ask loads it).
  worker::CandidateFamily Family() override {
    worker::CandidateFamily f;
    f.kernels_library_version = kLibraryVersion;
    for (kernels::Algorithm a : {kernels::Algorithm::kCublasGeam,
                                 kernels::Algorithm::kCutensorPermute}) {
      kernels::TransposeConfig c;
      c.algorithm = a;
      if (kernels::VendorAvailable(c)) f.vendor_available.emplace_back(kernels::AlgorithmName(a));
    }
    if (test_faults_) f.fixed.push_back({kFaultCandidateName, {}});
    return f;
  }

  Status Open(const Problem& p) override { return gpu_->Open(p); }
  Status Close() override { return gpu_->Close(); }
  Status Check(const Candidate& c) override { return gpu_->Check(c); }
  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) override {
    return gpu_->Measure(c, o);
  }
  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) override {
    return gpu_->MeasureCeiling(o);
  }
  // NVML's view of the device (nvml_probe.h), found by the UUID it describes, on the first ask.
  LoadSample Load() override {
    if (!probe_) {
      auto d = gpu_->Describe();
      if (!d.ok()) {
        LoadSample s;
        s.detail = "the device could not be described: " + d.status().message();
        return s;
      }
      probe_ = std::make_unique<NvmlProbe>(kNvmlLibrary, d->uuid, getpid());
    }
    return probe_->Sample();
  }
  bool broken() const override { return gpu_->context_broken(); }
  TimeBreakdown TakePhases() override { return gpu_->TakePhases(); }

 private:
  std::unique_ptr<GpuMeasurer> gpu_;
  const bool test_faults_;
  std::unique_ptr<NvmlProbe> probe_;
};

}  // namespace

StatusOr<std::unique_ptr<worker::Engine>> CreateCudaEngine(int device, bool test_faults) {
  TR_ASSIGN_OR_RETURN(std::unique_ptr<GpuMeasurer> gpu, CreateGpuMeasurer(device, test_faults));
  return std::unique_ptr<worker::Engine>(std::make_unique<CudaEngine>(std::move(gpu), test_faults));
}

}  // namespace transposed::cuda_worker
