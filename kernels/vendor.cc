#include "kernels/vendor.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

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
    std::lock_guard<std::mutex> lock(mu_);
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
  std::mutex mu_;
  std::map<int, void*> handles_;  // per device, guarded by mu_
};

}  // namespace

Status LaunchCublasGeam(const Problem& p, const void* in, void* out, cudaStream_t s,
                        const LaunchOptions&) {
  return Cublas::Get().Geam(p, in, out, s);
}

bool CublasLoaded() { return Cublas::Get().loaded(); }
std::string CublasDescription() { return Cublas::Get().description(); }

}  // namespace transposed::kernels::internal
