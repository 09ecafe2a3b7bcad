/* transposed C ABI: launch a configuration of the transpose family from any language.
 *
 * A small C interface over kernels::Launch for callers that cannot use C++ (the Python package
 * loads libtransposed_launch.so with ctypes, so no Python ABI is baked into the library). The
 * configuration is named by the variant name the daemon answers with
 * ("tile64x64.rows8.vec16.pad1"), the problem by its fields as in core/problem.h, the element
 * type by its name ("f32", "bf16", ...). Every function returns 0 on success or a gRPC-style
 * status code (3 INVALID_ARGUMENT, 12 UNIMPLEMENTED, 13 INTERNAL) and writes a NUL-terminated
 * message into err (at most err_size bytes, truncated; err may be NULL). Nothing aborts.
 *
 * Prepared launches: transposed_prepare parses the variant, validates the problem and finds the
 * kernel once, into a handle; transposed_launch_prepared then only checks the two pointers and
 * launches (no string parsing, no allocation; a cudaSetDevice only when the calling thread's
 * current device is another one): what a caller that launches one problem many times (the
 * Python package, per device, problem and variant) uses. Its error message, on failure, is
 * read with transposed_last_error (per thread), so a launch passes no buffer.
 *
 * Thread-safe: no shared mutable state (CUDA's rules for streams apply); a handle is immutable
 * after transposed_prepare and may be launched from any number of threads at once, and must not
 * be destroyed while a launch of it is running.
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

/* An immutable prepared launch: the problem, the configuration and its kernel, for one device. */
typedef struct transposed_prepared transposed_prepared;

/* Parses `variant`, validates the problem (as transposed_check) and finds the kernel, for CUDA
 * device `device` (an ordinal of this process, >= 0; not touched here: host-only, so it runs
 * without a GPU). On success *handle is a new handle (free it with transposed_destroy); on
 * failure *handle is NULL. A vendor member (cublas.geam) whose library does not load here is
 * refused (9 FAILED_PRECONDITION). */
TRANSPOSED_C_API int transposed_prepare(const char* variant, const char* dtype, int64_t rows,
                                        int64_t cols, int64_t batch, int64_t ld_in, int64_t ld_out,
                                        int device, transposed_prepared** handle, char* err,
                                        size_t err_size);

/* Launches a prepared handle on `stream` (a cudaStream_t of the handle's device; 0: the legacy
 * default stream), asynchronously, after checking in/out (not NULL, aligned for the kernel, not
 * overlapping). Returns 0, or a status code with the message in transposed_last_error(). No
 * allocation and no synchronization on success, so it may be captured into a CUDA graph. */
TRANSPOSED_C_API int transposed_launch_prepared(const transposed_prepared* handle, const void* in,
                                                void* out, void* stream);

/* The message of the calling thread's last failed transposed_launch_prepared ("" if none); valid
 * until that thread's next call into this library. */
TRANSPOSED_C_API const char* transposed_last_error(void);

/* The variant name of a handle, as the library spells it (NUL-terminated, owned by the handle). */
TRANSPOSED_C_API const char* transposed_prepared_variant(const transposed_prepared* handle);

/* The byte alignment transposed_launch_prepared wants of both pointers (the element size, or the
 * vector width of a vectorized kernel: 4, 8 or 16); 0 for NULL. A caller with a slice that starts
 * elsewhere runs another variant. */
TRANSPOSED_C_API int transposed_prepared_alignment(const transposed_prepared* handle);

/* Frees a handle (NULL is ignored). */
TRANSPOSED_C_API void transposed_destroy(transposed_prepared* handle);

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
