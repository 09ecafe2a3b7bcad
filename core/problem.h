// Problem: one transpose request, independent of any device or kernel.
//
// A problem transposes `batch` row-major matrices of `rows` x `cols` elements of `dtype` into
// `batch` row-major matrices of `cols` x `rows`. Input row i starts at element i * ld_in of its
// matrix (ld_in >= cols, 0 means dense = cols); output row j starts at j * ld_out (ld_out >= rows,
// 0 means dense = rows). Matrix b of the input starts at b * rows * ld_in, of the output at
// b * cols * ld_out. Only the element size matters to the kernels; the dtype is kept for the
// cache key and for humans. `exactness` says what the output must preserve (see Exactness).
// Plain value type; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace transposed {

enum class DType { kF16, kBF16, kF32, kF64, kI8, kU8, kI16, kI32, kI64, kC64, kC128 };

// "f16", "bf16", "f32", "f64", "i8", "u8", "i16", "i32", "i64", "c64", "c128".
std::string_view DTypeName(DType t);
// Accepts the names above (case-insensitive) and a few aliases ("float32", "half", "int8"...).
std::optional<DType> ParseDType(std::string_view name);
// Bytes per element: 1, 2, 4, 8 or 16.
int DTypeSize(DType t);
const std::vector<DType>& AllDTypes();

// What a transpose's output must preserve of its input.
//   kBit    every output byte equals the input byte it comes from (the default).
//   kValue  every element that is not a NaN is bit-identical; a NaN stays a NaN but its payload
//           and its signaling bit may change. This admits members that compute 1.0 * a (cuBLAS
//           geam, kernels/config.h canonicalizes_nan()), which may be faster.
// Only dtypes with such a member tell the two apart (ValueExactMatters); for every other dtype a
// value-exact problem is the same problem as the bit-exact one (Normalized(), Key()).
enum class Exactness { kBit = 0, kValue = 1 };
// "bit", "value".
std::string_view ExactnessName(Exactness e);
// Inverse of ExactnessName (exact spelling).
std::optional<Exactness> ParseExactness(std::string_view name);
// Whether kValue differs from kBit for a dtype: f32 and f64, the dtypes of the family's members
// that canonicalize NaNs (cublas.geam). Integer, complex and 16-bit dtypes: false.
bool ValueExactMatters(DType t);
// The one dtype that stands for an element size where only the size matters (tests, benchmark
// draws): 1 u8, 2 bf16, 4 f32, 8 f64, 16 c128; nullopt for any other size.
std::optional<DType> DTypeOfSize(int bytes);

struct Problem {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t batch = 1;
  DType dtype = DType::kF32;
  int64_t ld_in = 0;   // 0: dense (cols)
  int64_t ld_out = 0;  // 0: dense (rows)
  Exactness exactness = Exactness::kBit;

  int elem_size() const { return DTypeSize(dtype); }
  int64_t in_ld() const { return ld_in ? ld_in : cols; }
  int64_t out_ld() const { return ld_out ? ld_out : rows; }
  int64_t elements() const { return batch * rows * cols; }
  // Bytes of the matrix proper (what a transpose must read, and write): batch*rows*cols*esize.
  int64_t bytes() const { return elements() * elem_size(); }
  // Footprint of the input and output buffers including leading-dimension gaps, in bytes.
  int64_t in_alloc_bytes() const;
  int64_t out_alloc_bytes() const;
  bool dense() const { return in_ld() == cols && out_ld() == rows; }

  // Dense leading dimensions written as 0 and kValue as kBit where the dtype does not tell them
  // apart (ValueExactMatters), so that equivalent problems share a cache key.
  Problem Normalized() const;
  // Stable cache key, e.g. "4096x4096.b1.f32.ldi0.ldo0" (of the normalized problem); a value-exact
  // problem ends in ".value" ("4096x4096.b1.f32.ldi0.ldo0.value"), so it is cached apart.
  std::string Key() const;
  // Human-readable, e.g. "4096x4096 f32", "256x512x384 f16 ld_in=400", "4097x3001 f32 value-exact".
  std::string ToString() const;

  bool operator==(const Problem& o) const;
};

// Where one byte of a problem's output buffer lies. Output matrix `batch` holds `cols` rows of
// out_ld() elements; output row `out_row` is input column out_row, and output column `out_col`
// is input row out_col. `in_gap` when the byte is in a leading-dimension gap (out_col >= rows)
// or past the buffer's end.
struct OutputByte {
  int64_t batch = 0;
  int64_t out_row = 0;
  int64_t out_col = 0;
  int64_t element = 0;  // element index in the whole output buffer
  bool in_gap = false;
};
OutputByte LocateOutputByte(const Problem& p, int64_t byte_offset);

// Checks fields one by one and names the first bad field in the message:
// rows/cols/batch must be >= 1; ld_in must be 0 or >= cols; ld_out 0 or >= rows; element counts
// and byte counts must not overflow int64 (INVALID_ARGUMENT). If device_memory_bytes > 0, the
// input plus output buffers must fit in it (RESOURCE_EXHAUSTED).
Status ValidateProblem(const Problem& p, uint64_t device_memory_bytes = 0);

// Effective bandwidth in GB/s (1e9 B/s) of moving `bytes` in and out once in `seconds`:
// 2 * bytes / seconds / 1e9.
double EffectiveGBps(int64_t bytes, double seconds);

}  // namespace transposed
