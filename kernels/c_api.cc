#include "transposed/kernels/c_api.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>

#include "core/problem.h"
#include "core/status.h"
#include "core/version.h"
#include "transposed/kernels/config.h"
#include "transposed/kernels/pointer_alignment.h"
#if TRANSPOSED_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transposed/kernels/launch.h"
#endif

namespace {

using transposed::Status;

int Report(const Status& s, char* err, size_t err_size) {
  if (err != nullptr && err_size > 0) {
    const std::string& m = s.message();
    const size_t n = m.size() < err_size - 1 ? m.size() : err_size - 1;
    std::memcpy(err, m.data(), n);
    err[n] = '\0';
  }
  return static_cast<int>(s.code());
}

// The problem and configuration from the C arguments, or INVALID_ARGUMENT naming the argument.
Status Parse(const char* variant, const char* dtype, int64_t rows, int64_t cols, int64_t batch,
             int64_t ld_in, int64_t ld_out, transposed::Problem* p,
             transposed::kernels::TransposeConfig* c) {
  if (variant == nullptr) return Status::InvalidArgument("variant: must not be NULL");
  if (dtype == nullptr) return Status::InvalidArgument("dtype: must not be NULL");
  auto t = transposed::ParseDType(dtype);
  if (!t) return Status::InvalidArgument(std::string("dtype: unknown element type '") + dtype + "'");
  p->rows = rows, p->cols = cols, p->batch = batch, p->dtype = *t;
  p->ld_in = ld_in, p->ld_out = ld_out;
  TR_RETURN_IF_ERROR(transposed::ValidateProblem(*p));
  auto config = transposed::kernels::TransposeConfig::FromName(variant);
  if (!config.ok()) return config.status();
  *c = *config;
  return transposed::kernels::CheckConfig(*c, *p);
}

// The message of this thread's last failed transposed_launch_prepared.
thread_local std::string last_error;

int Fail(const Status& s) {
  last_error = s.message();
  return static_cast<int>(s.code());
}

}  // namespace

// Immutable after transposed_prepare: launched from any thread.
struct transposed_prepared {
  transposed::Problem problem;
  std::string name;
  int device = 0;
  int alignment = 1;
#if TRANSPOSED_HAVE_CUDA
  std::optional<transposed::kernels::PreparedLaunch> launch;
#endif
};

extern "C" {

int transposed_c_api_version(void) { return TRANSPOSED_C_API_VERSION; }

const char* transposed_library_version(void) { return transposed::kLibraryVersion; }

int transposed_has_cuda(void) {
#if TRANSPOSED_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

int transposed_check(const char* variant, const char* dtype, int64_t rows, int64_t cols,
                     int64_t batch, int64_t ld_in, int64_t ld_out, char* err, size_t err_size) {
  transposed::Problem p;
  transposed::kernels::TransposeConfig c;
  return Report(Parse(variant, dtype, rows, cols, batch, ld_in, ld_out, &p, &c), err, err_size);
}

int transposed_launch(const char* variant, const char* dtype, int64_t rows, int64_t cols,
                      int64_t batch, int64_t ld_in, int64_t ld_out, const void* in, void* out,
                      int device, void* stream, char* err, size_t err_size) {
  transposed::Problem p;
  transposed::kernels::TransposeConfig c;
  Status s = Parse(variant, dtype, rows, cols, batch, ld_in, ld_out, &p, &c);
  if (!s.ok()) return Report(s, err, err_size);
#if TRANSPOSED_HAVE_CUDA
  // This library has its own CUDA runtime (cudart_static): select the caller's device in it.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) {
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
      return Report(Status::InvalidArgument("device: cudaSetDevice(" + std::to_string(device) +
                                            "): " + cudaGetErrorString(e)),
                    err, err_size);
  }
  return Report(transposed::kernels::Launch(c, p, in, out, static_cast<cudaStream_t>(stream)),
                err, err_size);
#else
  (void)in, (void)out, (void)device, (void)stream;
  return Report(Status::Unimplemented("libtransposed_launch was built without CUDA"), err,
                err_size);
#endif
}

int transposed_prepare(const char* variant, const char* dtype, int64_t rows, int64_t cols,
                       int64_t batch, int64_t ld_in, int64_t ld_out, int device,
                       transposed_prepared** handle, char* err, size_t err_size) {
  if (handle == nullptr)
    return Report(Status::InvalidArgument("handle: must not be NULL"), err, err_size);
  *handle = nullptr;
  if (device < 0)
    return Report(Status::InvalidArgument("device: must be a CUDA device ordinal >= 0, got " +
                                          std::to_string(device)),
                  err, err_size);
  transposed::Problem p;
  transposed::kernels::TransposeConfig c;
  Status s = Parse(variant, dtype, rows, cols, batch, ld_in, ld_out, &p, &c);
  if (!s.ok()) return Report(s, err, err_size);
  auto* h = new (std::nothrow) transposed_prepared();
  if (h == nullptr) return Report(Status::ResourceExhausted("out of host memory"), err, err_size);
  h->problem = p;
  h->name = c.Name();
  h->device = device;
#if TRANSPOSED_HAVE_CUDA
  auto l = transposed::kernels::PreparedLaunch::Prepare(c, p);
  if (!l.ok()) {
    delete h;
    return Report(l.status(), err, err_size);
  }
  h->launch.emplace(std::move(*l));
#endif
  h->alignment = transposed::kernels::PointerAlignment(c, p);
  *handle = h;
  return Report(Status::OK(), err, err_size);
}

int transposed_launch_prepared(const transposed_prepared* h, const void* in, void* out,
                               void* stream) {
  if (h == nullptr) return Fail(Status::InvalidArgument("handle: must not be NULL"));
#if TRANSPOSED_HAVE_CUDA
  Status s = h->launch->CheckPointers(in, out);
  if (!s.ok()) return Fail(s);
  // This library has its own CUDA runtime (cudart_static): select the handle's device in it when
  // the calling thread's current one is another.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != h->device) {
    const cudaError_t e = cudaSetDevice(h->device);
    if (e != cudaSuccess)
      return Fail(Status::InvalidArgument("device: cudaSetDevice(" + std::to_string(h->device) +
                                          "): " + cudaGetErrorString(e)));
  }
  s = h->launch->Run(in, out, static_cast<cudaStream_t>(stream));
  if (!s.ok()) return Fail(s);
  return 0;
#else
  (void)in, (void)out, (void)stream;
  return Fail(Status::Unimplemented("libtransposed_launch was built without CUDA"));
#endif
}

const char* transposed_last_error(void) { return last_error.c_str(); }

const char* transposed_prepared_variant(const transposed_prepared* h) {
  return h == nullptr ? "" : h->name.c_str();
}

int transposed_prepared_alignment(const transposed_prepared* h) {
  return h == nullptr ? 0 : h->alignment;
}

void transposed_destroy(transposed_prepared* h) { delete h; }

int transposed_pointer_device(const void* ptr, int* device, char* err, size_t err_size) {
  if (device == nullptr) return Report(Status::InvalidArgument("device: must not be NULL"), err, err_size);
#if TRANSPOSED_HAVE_CUDA
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
  if (e != cudaSuccess)
    return Report(Status::InvalidArgument(std::string("ptr: cudaPointerGetAttributes: ") +
                                          cudaGetErrorString(e)),
                  err, err_size);
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return Report(Status::InvalidArgument("ptr: not a CUDA device pointer"), err, err_size);
  *device = attr.device;
  return Report(Status::OK(), err, err_size);
#else
  (void)ptr;
  return Report(Status::Unimplemented("libtransposed_launch was built without CUDA"), err,
                err_size);
#endif
}

int transposed_device_uuid(int device, char* uuid, size_t uuid_size, char* err, size_t err_size) {
  if (uuid == nullptr || uuid_size < 41)
    return Report(Status::InvalidArgument("uuid: needs a buffer of at least 41 bytes"), err,
                  err_size);
#if TRANSPOSED_HAVE_CUDA
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess)
    return Report(Status::InvalidArgument("device: cudaGetDeviceProperties(" +
                                          std::to_string(device) + "): " + cudaGetErrorString(e)),
                  err, err_size);
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, uuid_size,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return Report(Status::OK(), err, err_size);
#else
  (void)device;
  return Report(Status::Unimplemented("libtransposed_launch was built without CUDA"), err,
                err_size);
#endif
}

}  // extern "C"
