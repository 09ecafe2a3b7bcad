#include "kernels/vendor.h"

#include <dlfcn.h>

#include <map>
#include <tuple>

#include "kernels/vendor_layout.h"

namespace transposed::kernels::internal {
namespace {

// The cuBLAS v2 API subset we call, by C symbol (no cuBLAS headers needed to build).
using CreateFn = int (*)(void** handle);
using GetPropertyFn = int (*)(int type, int* value);  // MAJOR_VERSION 0, MINOR 1, PATCH 2
using SetStreamFn = int (*)(void* handle, cudaStream_t stream);
template <typename T>
using GeamFn = int (*)(void* handle, int transa, int transb, int m, int n, const T* alpha,
                       const T* a, int lda, const T* beta, const T* b, int ldb, T* c, int ldc);
constexpr int kOpN = 0, kOpT = 1;

class Cublas {
 public:
  static Cublas& Get() {
    static Cublas* const lib = new Cublas();  // never destroyed: handles outlive static teardown
    return *lib;
  }

  bool loaded() const { return loaded_; }
  const std::string& description() const { return description_; }

  Status Geam(const Problem& p, const void* in, void* out, cudaStream_t s) {
    if (!loaded_) return Status::FailedPrecondition("cublas.geam: " + description_);
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();
      return Status::Internal("cublas.geam: cudaGetDevice failed");
    }
    MutexLock lock(&mu_);
    void*& h = handles_[dev];
    if (h == nullptr) {
      const int rc = create_(&h);
      if (rc != 0) {
        h = nullptr;
        return Status::Internal("cublasCreate returned status " + std::to_string(rc));
      }
    }
    int rc = set_stream_(h, s);
    if (rc != 0) return Status::Internal("cublasSetStream returned status " + std::to_string(rc));
    // Row-major rows x cols (ld_in) is column-major cols x rows: C (rows x cols, ldc = ld_out)
    // = alpha * A^T + beta * C with alpha 1, beta 0.
    const int m = static_cast<int>(p.rows), n = static_cast<int>(p.cols);
    const int lda = static_cast<int>(p.in_ld()), ldc = static_cast<int>(p.out_ld());
    switch (p.elem_size()) {
      case 4: {
        static const float one = 1, zero = 0;
        auto* c = static_cast<float*>(out);
        rc = sgeam_(h, kOpT, kOpN, m, n, &one, static_cast<const float*>(in), lda, &zero, c, ldc,
                    c, ldc);
        break;
      }
      case 8: {
        static const double one = 1, zero = 0;
        auto* c = static_cast<double*>(out);
        rc = dgeam_(h, kOpT, kOpN, m, n, &one, static_cast<const double*>(in), lda, &zero, c,
                    ldc, c, ldc);
        break;
      }
      default:
        return Status::InvalidArgument("cublas.geam: no geam for " +
                                       std::to_string(p.elem_size()) + "-byte elements");
    }
    if (rc != 0) return Status::Internal("cublas geam returned status " + std::to_string(rc));
    return Status::OK();
  }

 private:
  Cublas() {
    const char* name = nullptr;
    for (const char* candidate : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      lib_ = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
      if (lib_ != nullptr) {
        name = candidate;
        break;
      }
    }
    if (lib_ == nullptr) {
      description_ = "libcublas not found (libcublas.so.13, .so.12, .so)";
      return;
    }
    create_ = reinterpret_cast<CreateFn>(dlsym(lib_, "cublasCreate_v2"));
    set_stream_ = reinterpret_cast<SetStreamFn>(dlsym(lib_, "cublasSetStream_v2"));
    auto get_property = reinterpret_cast<GetPropertyFn>(dlsym(lib_, "cublasGetProperty"));
    sgeam_ = reinterpret_cast<GeamFn<float>>(dlsym(lib_, "cublasSgeam"));
    dgeam_ = reinterpret_cast<GeamFn<double>>(dlsym(lib_, "cublasDgeam"));
    if (!create_ || !set_stream_ || !sgeam_ || !dgeam_) {
      description_ = std::string(name) + " lacks the geam symbols";
      return;
    }
    int v[3] = {0, 0, 0};
    if (get_property != nullptr)
      for (int i = 0; i < 3; ++i) get_property(i, &v[i]);
    description_ = "cuBLAS " + std::to_string(v[0]) + "." + std::to_string(v[1]) + "." +
                   std::to_string(v[2]) + " (" + name + ")";
    loaded_ = true;
  }

  void* lib_ = nullptr;
  bool loaded_ = false;
  std::string description_;
  CreateFn create_ = nullptr;
  SetStreamFn set_stream_ = nullptr;
  GeamFn<float> sgeam_ = nullptr;
  GeamFn<double> dgeam_ = nullptr;
  Mutex mu_;
  std::map<int, void*> handles_ GUARDED_BY(mu_);  // per device
};

}  // namespace

Status LaunchCublasGeam(const Problem& p, const void* in, void* out, cudaStream_t s,
                        const LaunchOptions&) {
  return Cublas::Get().Geam(p, in, out, s);
}

bool CublasLoaded() { return Cublas::Get().loaded(); }
std::string CublasDescription() { return Cublas::Get().description(); }

// ---- cuTENSOR (kernels/cutensor_api.h) ----

namespace ct = cutensor_api;
static_assert(kCudaR32F == CUDA_R_32F && kCudaR64F == CUDA_R_64F,
              "vendor_layout.h's cudaDataType_t values are library_types.h's");

namespace {

template <typename Fn>
void Resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr && missing->empty()) *missing = name;
}

}  // namespace

CutensorSymbols LoadCutensor(const std::vector<std::string>& sonames) {
  CutensorSymbols s;
  std::string name, tried;
  for (const std::string& candidate : sonames) {
    s.lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (s.lib != nullptr) {
      name = candidate;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  if (s.lib == nullptr) {
    s.description = "libcutensor not found (" + tried + ")";
    return s;
  }
  std::string missing;
  ct::GetVersionFn get_version = nullptr;
  Resolve(s.lib, "cutensorGetVersion", &get_version, &missing);
  if (get_version == nullptr) {
    s.description = name + " lacks cutensorGetVersion";
    return s;
  }
  s.version = get_version();
  const std::string refusal = CutensorVersionRefusal(s.version);
  if (!refusal.empty()) {
    s.description = name + ": " + refusal;
    return s;
  }
  Resolve(s.lib, "cutensorGetErrorString", &s.error_string, &missing);
  Resolve(s.lib, "cutensorCreate", &s.create, &missing);
  Resolve(s.lib, "cutensorDestroy", &s.destroy, &missing);
  Resolve(s.lib, "cutensorCreateTensorDescriptor", &s.create_tensor, &missing);
  Resolve(s.lib, "cutensorDestroyTensorDescriptor", &s.destroy_tensor, &missing);
  Resolve(s.lib, "cutensorCreatePermutation", &s.create_permutation, &missing);
  Resolve(s.lib, "cutensorDestroyOperationDescriptor", &s.destroy_operation, &missing);
  Resolve(s.lib, "cutensorCreatePlanPreference", &s.create_preference, &missing);
  Resolve(s.lib, "cutensorDestroyPlanPreference", &s.destroy_preference, &missing);
  Resolve(s.lib, "cutensorCreatePlan", &s.create_plan, &missing);
  Resolve(s.lib, "cutensorDestroyPlan", &s.destroy_plan, &missing);
  Resolve(s.lib, "cutensorPermute", &s.permute, &missing);
  // Exported variables: dlsym gives the address of the descriptor pointer.
  ct::cutensorComputeDescriptor_t* c32 = nullptr;
  ct::cutensorComputeDescriptor_t* c64 = nullptr;
  Resolve(s.lib, "CUTENSOR_COMPUTE_DESC_32F", &c32, &missing);
  Resolve(s.lib, "CUTENSOR_COMPUTE_DESC_64F", &c64, &missing);
  if (!missing.empty()) {
    s.description = name + " (cuTENSOR " + CutensorVersionString(s.version) + ") lacks " + missing;
    return s;
  }
  s.compute_32f = *c32;
  s.compute_64f = *c64;
  s.description = "cuTENSOR " + CutensorVersionString(s.version) + " (" + name + ")";
  s.loaded = true;
  return s;
}

CutensorPermuter::CutensorPermuter(CutensorSymbols s) : s_(std::move(s)) {}

CutensorPermuter::~CutensorPermuter() {
  MutexLock lock(&mu_);
  Clear();
  for (auto& [dev, h] : handles_)
    if (h != nullptr) s_.destroy(h);
  handles_.clear();
  if (s_.lib != nullptr) dlclose(s_.lib);
}

size_t CutensorPermuter::plans() const {
  MutexLock lock(&mu_);
  return plans_.size();
}

Status CutensorPermuter::Permute(int device, const Problem& p, const void* in, void* out,
                                 cudaStream_t stream) {
  if (!s_.loaded) return Status::FailedPrecondition("cutensor.permute: " + s_.description);
  const uint32_t align =
      CutensorAlignment(reinterpret_cast<uintptr_t>(in), reinterpret_cast<uintptr_t>(out));
  const PlanKey key{
      device, static_cast<int>(p.dtype), p.rows, p.cols, p.batch, p.in_ld(), p.out_ld(), align};
  MutexLock lock(&mu_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    TR_ASSIGN_OR_RETURN(CutensorPermuteLayout layout, CutensorLayoutFor(p));
    ct::cutensorHandle_t& h = handles_[device];
    if (h == nullptr) {
      const ct::cutensorStatus_t rc = s_.create(&h);
      if (rc != ct::kStatusSuccess) {
        h = nullptr;
        return Error("cutensorCreate", rc);
      }
    }
    if (plans_.size() >= kCutensorMaxPlans) Clear();
    PlanEntry e;
    e.handle = h;
    Status made = MakePlan(h, layout, align, &e);
    if (!made.ok()) {
      Destroy(e);
      return made;
    }
    it = plans_.emplace(key, e).first;
  }
  const PlanEntry& e = it->second;
  const ct::cutensorStatus_t rc = s_.permute(e.handle, e.plan, e.alpha, in, out, stream);
  if (rc != ct::kStatusSuccess) return Error("cutensorPermute", rc);
  return Status::OK();
}

Status CutensorPermuter::Error(const char* what, int rc) const {
  const char* why = s_.error_string != nullptr ? s_.error_string(rc) : nullptr;
  return Status::Internal(std::string(what) + " returned status " + std::to_string(rc) +
                          (why != nullptr ? std::string(" (") + why + ")" : std::string()));
}

Status CutensorPermuter::MakePlan(ct::cutensorHandle_t h, const CutensorPermuteLayout& l,
                                  uint32_t align, PlanEntry* e) {
  static const float kOneF = 1;
  static const double kOneD = 1;
  const auto type = static_cast<cudaDataType_t>(l.data_type);
  const bool f64 = l.data_type == kCudaR64F;
  e->alpha = f64 ? static_cast<const void*>(&kOneD) : static_cast<const void*>(&kOneF);
  ct::cutensorStatus_t rc =
      s_.create_tensor(h, &e->a, l.modes, l.extent_a, l.stride_a, type, align);
  if (rc != ct::kStatusSuccess) return Error("cutensorCreateTensorDescriptor (A)", rc);
  rc = s_.create_tensor(h, &e->b, l.modes, l.extent_b, l.stride_b, type, align);
  if (rc != ct::kStatusSuccess) return Error("cutensorCreateTensorDescriptor (B)", rc);
  rc = s_.create_permutation(h, &e->op, e->a, l.mode_a, ct::kOpIdentity, e->b, l.mode_b,
                             f64 ? s_.compute_64f : s_.compute_32f);
  if (rc != ct::kStatusSuccess) return Error("cutensorCreatePermutation", rc);
  rc = s_.create_preference(h, &e->pref, ct::kAlgoDefault, ct::kJitModeNone);
  if (rc != ct::kStatusSuccess) return Error("cutensorCreatePlanPreference", rc);
  // Workspace limit 0, as NVIDIA's permutation sample does: cutensorPermute takes no workspace.
  rc = s_.create_plan(h, &e->plan, e->op, e->pref, 0);
  if (rc != ct::kStatusSuccess) return Error("cutensorCreatePlan", rc);
  return Status::OK();
}

void CutensorPermuter::Destroy(const PlanEntry& e) {
  if (e.plan) s_.destroy_plan(e.plan);
  if (e.pref) s_.destroy_preference(e.pref);
  if (e.op) s_.destroy_operation(e.op);
  if (e.b) s_.destroy_tensor(e.b);
  if (e.a) s_.destroy_tensor(e.a);
}

void CutensorPermuter::Clear() {
  for (auto& [k, e] : plans_) Destroy(e);
  plans_.clear();
}

namespace {

// The process's cuTENSOR: libcutensor.so.2 (or an unversioned libcutensor.so of the 2.x API).
// Never destroyed: handles and plans outlive static teardown.
CutensorPermuter& ProcessCutensor() {
  static CutensorPermuter* const lib =
      new CutensorPermuter(LoadCutensor({"libcutensor.so.2", "libcutensor.so"}));
  return *lib;
}

}  // namespace

Status LaunchCutensorPermute(const Problem& p, const void* in, void* out, cudaStream_t s,
                             const LaunchOptions&) {
  CutensorPermuter& t = ProcessCutensor();
  if (!t.loaded()) return Status::FailedPrecondition("cutensor.permute: " + t.description());
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return Status::Internal("cutensor.permute: cudaGetDevice failed");
  }
  return t.Permute(dev, p, in, out, s);
}

bool CutensorLoaded() { return ProcessCutensor().loaded(); }
std::string CutensorDescription() { return ProcessCutensor().description(); }

CutensorProbe ProbeCutensor(const std::vector<std::string>& sonames) {
  CutensorSymbols s = LoadCutensor(sonames);
  if (s.lib != nullptr) dlclose(s.lib);
  return {s.loaded, s.description};
}

std::string CutensorVersionString(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string CutensorVersionRefusal(size_t v) {
  if (v >= cutensor_api::kMinVersion) return "";
  if (v >= 20000) {
    return "cuTENSOR " + CutensorVersionString(v) + " is older than 2.2.0 (cutensorGetVersion " +
           std::to_string(v) + " < " + std::to_string(cutensor_api::kMinVersion) +
           "); cutensor.permute's reading of the compute descriptors is checked against 2.2 and "
           "later only";
  }
  return "cuTENSOR " + CutensorVersionString(v) + " is older than 2.0.0 (cutensorGetVersion " +
         std::to_string(v) + " < " + std::to_string(cutensor_api::kMinVersion) +
         "); cutensor.permute calls the 2.x API, whose functions have other signatures in 1.x";
}

}  // namespace transposed::kernels::internal
