#include "core/problem.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace transposed {
namespace {

struct DTypeEntry {
  DType type;
  const char* name;
  int size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kF16, "f16", 2},  {DType::kBF16, "bf16", 2}, {DType::kF32, "f32", 4},
    {DType::kF64, "f64", 8},  {DType::kI8, "i8", 1},     {DType::kU8, "u8", 1},
    {DType::kI16, "i16", 2},  {DType::kI32, "i32", 4},   {DType::kI64, "i64", 8},
    {DType::kC64, "c64", 8},  {DType::kC128, "c128", 16},
};

struct Alias {
  const char* alias;
  DType type;
};
constexpr Alias kAliases[] = {
    {"half", DType::kF16},        {"float16", DType::kF16},    {"bfloat16", DType::kBF16},
    {"float", DType::kF32},       {"float32", DType::kF32},    {"double", DType::kF64},
    {"float64", DType::kF64},     {"int8", DType::kI8},        {"uint8", DType::kU8},
    {"int16", DType::kI16},       {"int32", DType::kI32},      {"int64", DType::kI64},
    {"complex64", DType::kC64},   {"complex128", DType::kC128},
};

// a * b, or nullopt on overflow (both non-negative).
std::optional<int64_t> Mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace

std::string_view DTypeName(DType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.name;
  return "unknown";
}

std::optional<DType> ParseDType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& e : kDTypes)
    if (lower == e.name) return e.type;
  for (const auto& a : kAliases)
    if (lower == a.alias) return a.type;
  return std::nullopt;
}

int DTypeSize(DType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.size;
  return 0;
}

std::optional<DType> DTypeOfSize(int bytes) {
  switch (bytes) {
    case 1:
      return DType::kU8;
    case 2:
      return DType::kBF16;
    case 4:
      return DType::kF32;
    case 8:
      return DType::kF64;
    case 16:
      return DType::kC128;
    default:
      return std::nullopt;
  }
}

const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> v;
    for (const auto& e : kDTypes) v.push_back(e.type);
    return v;
  }();
  return all;
}

std::string_view ExactnessName(Exactness e) { return e == Exactness::kValue ? "value" : "bit"; }

std::optional<Exactness> ParseExactness(std::string_view name) {
  if (name == "bit") return Exactness::kBit;
  if (name == "value") return Exactness::kValue;
  return std::nullopt;
}

bool ValueExactMatters(DType t) { return t == DType::kF32 || t == DType::kF64; }

int64_t Problem::in_alloc_bytes() const {
  // Last row of the last matrix needs only `cols` elements.
  return ((batch * rows - 1) * in_ld() + cols) * elem_size();
}

int64_t Problem::out_alloc_bytes() const {
  return ((batch * cols - 1) * out_ld() + rows) * elem_size();
}

Problem Problem::Normalized() const {
  Problem p = *this;
  if (p.ld_in == p.cols) p.ld_in = 0;
  if (p.ld_out == p.rows) p.ld_out = 0;
  if (!ValueExactMatters(p.dtype)) p.exactness = Exactness::kBit;
  return p;
}

std::string Problem::Key() const {
  Problem n = Normalized();
  return std::to_string(n.rows) + "x" + std::to_string(n.cols) + ".b" + std::to_string(n.batch) +
         "." + std::string(DTypeName(n.dtype)) + ".ldi" + std::to_string(n.ld_in) + ".ldo" +
         std::to_string(n.ld_out) + (n.exactness == Exactness::kValue ? ".value" : "");
}

std::string Problem::ToString() const {
  Problem n = Normalized();
  std::string s;
  if (n.batch != 1) s += std::to_string(n.batch) + "x";
  s += std::to_string(n.rows) + "x" + std::to_string(n.cols) + " " + std::string(DTypeName(n.dtype));
  if (n.ld_in) s += " ld_in=" + std::to_string(n.ld_in);
  if (n.ld_out) s += " ld_out=" + std::to_string(n.ld_out);
  if (n.exactness == Exactness::kValue) s += " value-exact";
  return s;
}

bool Problem::operator==(const Problem& o) const {
  Problem a = Normalized(), b = o.Normalized();
  return a.rows == b.rows && a.cols == b.cols && a.batch == b.batch && a.dtype == b.dtype &&
         a.ld_in == b.ld_in && a.ld_out == b.ld_out && a.exactness == b.exactness;
}

Status ValidateProblem(const Problem& p, uint64_t device_memory_bytes) {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v < 1)
      return Status::InvalidArgument(std::string(field) + ": must be >= 1, got " + std::to_string(v));
    return Status::OK();
  };
  TR_RETURN_IF_ERROR(positive("rows", p.rows));
  TR_RETURN_IF_ERROR(positive("cols", p.cols));
  TR_RETURN_IF_ERROR(positive("batch", p.batch));
  if (DTypeSize(p.dtype) == 0) return Status::InvalidArgument("dtype: unknown element type");
  if (p.exactness != Exactness::kBit && p.exactness != Exactness::kValue)
    return Status::InvalidArgument("exactness: unknown value " +
                                   std::to_string(static_cast<int>(p.exactness)) +
                                   " (expected bit or value)");
  if (p.ld_in != 0 && p.ld_in < p.cols)
    return Status::InvalidArgument("ld_in: must be 0 (dense) or >= cols (" + std::to_string(p.cols) +
                                   "), got " + std::to_string(p.ld_in));
  if (p.ld_out != 0 && p.ld_out < p.rows)
    return Status::InvalidArgument("ld_out: must be 0 (dense) or >= rows (" +
                                   std::to_string(p.rows) + "), got " + std::to_string(p.ld_out));
  // Every size a kernel or an allocation computes must fit in int64 (bytes, with ld gaps).
  const int64_t es = DTypeSize(p.dtype);
  auto br = Mul(p.batch, p.rows);
  auto bc = Mul(p.batch, p.cols);
  if (!br || !bc) return Status::InvalidArgument("batch: batch x rows x cols overflows int64");
  auto in_elems = Mul(*br, p.in_ld());
  auto out_elems = Mul(*bc, p.out_ld());
  auto elems = Mul(*br, p.cols);
  if (!in_elems || !out_elems || !elems || !Mul(*in_elems, es) || !Mul(*out_elems, es) ||
      !Mul(*elems, es)) {
    return Status::InvalidArgument("rows, cols: the byte count of " + p.ToString() +
                                   " overflows int64");
  }
  const int64_t total = *Mul(*in_elems, es) + *Mul(*out_elems, es);
  if (total < 0) return Status::InvalidArgument("rows, cols: the byte count overflows int64");
  if (device_memory_bytes > 0 && static_cast<uint64_t>(total) > device_memory_bytes) {
    return Status::ResourceExhausted(
        "rows, cols: input plus output need " + std::to_string(total) + " bytes, more than the " +
        std::to_string(device_memory_bytes) + " bytes the device can hold");
  }
  return Status::OK();
}

double EffectiveGBps(int64_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return 2.0 * static_cast<double>(bytes) / seconds / 1e9;
}

OutputByte LocateOutputByte(const Problem& p, int64_t byte_offset) {
  OutputByte out;
  const int64_t per_matrix = p.cols * p.out_ld();
  out.element = byte_offset / p.elem_size();
  out.batch = per_matrix > 0 ? out.element / per_matrix : 0;
  const int64_t m = per_matrix > 0 ? out.element % per_matrix : 0;
  out.out_row = m / p.out_ld();
  out.out_col = m % p.out_ld();
  out.in_gap = out.out_col >= p.rows || byte_offset >= p.out_alloc_bytes();
  return out;
}

}  // namespace transposed
