/* transposed C ABI: launch a configuration of the transpose family from any language.
 *
 * A small C interface over kernels::Launch for callers that cannot use C++ (the Python package
 * loads libtransposed_launch.so with ctypes, so no Python ABI is baked into the library). The
 * configuration is named by the variant name the daemon answers with
 * ("tile64x64.rows8.vec16.pad1"), the problem by its fields as in core/problem.h, the element
 * type by its name ("f32", "bf16", ...). Every function returns 0 on success or a gRPC-style
 * status code (3 INVALID_ARGUMENT, 12 UNIMPLEMENTED, 13 INTERNAL) and writes a NUL-terminated
 * message into err (at most err_size bytes, truncated; err may be NULL). Nothing aborts.
 * Thread-safe: no shared mutable state (CUDA's rules for streams apply).
 */
#ifndef TRANSPOSED_KERNELS_C_API_H_
#define TRANSPOSED_KERNELS_C_API_H_

#include <stddef.h>
#include <stdint.h>

#if defined(TRANSPOSED_C_API_BUILD)
#define TRANSPOSED_C_API __attribute__((visibility("default")))
#else
#define TRANSPOSED_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of this interface; bumped on any incompatible change. */
#define TRANSPOSED_C_API_VERSION 1
TRANSPOSED_C_API int transposed_c_api_version(void);

/* The kernel library version (as the daemon reports it in Device.library_version). */
TRANSPOSED_C_API const char* transposed_library_version(void);

/* 1 when the library was built with CUDA (transposed_launch can run), 0 otherwise. */
TRANSPOSED_C_API int transposed_has_cuda(void);

/* Host-only check that `variant` is a configuration of the family valid for the problem
 * (dtype, rows, cols, batch >= 1, ld_in / ld_out in elements, 0 = dense). */
TRANSPOSED_C_API int transposed_check(const char* variant, const char* dtype, int64_t rows, int64_t cols,
                     int64_t batch, int64_t ld_in, int64_t ld_out, char* err, size_t err_size);

/* Launches `variant` on CUDA device `device` (an ordinal of this process) and `stream` (a
 * cudaStream_t; 0 for the legacy default stream), asynchronously. in/out are device pointers laid
 * out as core/problem.h says. Returns once the launch is queued; execution errors surface at the
 * caller's next synchronization. */
TRANSPOSED_C_API int transposed_launch(const char* variant, const char* dtype, int64_t rows, int64_t cols,
                      int64_t batch, int64_t ld_in, int64_t ld_out, const void* in, void* out,
                      int device, void* stream, char* err, size_t err_size);

/* The CUDA device ordinal (of this process) that holds device pointer `ptr`. */
TRANSPOSED_C_API int transposed_pointer_device(const void* ptr, int* device, char* err,
                                               size_t err_size);

/* The UUID of CUDA device `device` as the daemon lists it ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-
 * xxxxxxxxxxxx"), NUL-terminated into uuid (uuid_size >= 41). */
TRANSPOSED_C_API int transposed_device_uuid(int device, char* uuid, size_t uuid_size, char* err,
                                            size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* TRANSPOSED_KERNELS_C_API_H_ */
