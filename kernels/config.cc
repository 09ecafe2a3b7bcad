#include "transposed/kernels/config.h"
#include "transposed/kernels/pointer_alignment.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "kernels/policy.h"
#include "kernels/tile_math.h"
#include "kernels/vendor_layout.h"

namespace transposed::kernels {
namespace {

TransposeConfig MakeNaive() { return Naive(1).Config(); }
TransposeConfig MakeCopy() { return Copy(1).Config(); }

// Parser helpers: the fields as given (ValidateShape and the canonical-name check judge them).
TransposeConfig MakeTile(int tr, int tc, int br, int vb, int pad, int swz, int realign = 0,
                         int async = 0) {
  TransposeConfig c;
  c.algorithm = Algorithm::kTile;
  c.tile_rows = tr;
  c.tile_cols = tc;
  c.block_rows = br;
  c.vec_bytes = vb;
  c.pad = pad;
  c.swizzle = swz;
  c.realign = realign;
  c.async = async;
  return c;
}

TransposeConfig MakeSkinny(int len, int br) { return Skinny(1, len, br).Config(); }

TransposeConfig MakeCublasGeam() { return CublasGeam(4).Config(); }
TransposeConfig MakeCutensorPermute() { return CutensorPermute(4).Config(); }

// FamilyConfigs, per element size, in kFamily's order.
struct Family {
  std::vector<TransposeConfig> by_size[17];
};

const Family& GetFamily() {
  static const Family family = [] {
    Family f;
    for (const Policy& p : kFamily) f.by_size[p.elem].push_back(p.Config());
    return f;
  }();
  return family;
}

// Parses a non-negative decimal integer that is the whole of `s`.
bool ParseInt(std::string_view s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return false;
  *out = v;
  return true;
}

// Consumes `prefix` followed by an integer from the front of `part`.
bool ParseField(std::string_view part, std::string_view prefix, int* out) {
  if (part.substr(0, prefix.size()) != prefix) return false;
  return ParseInt(part.substr(prefix.size()), out);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

// Whether every parameter field is zero (the members that take no parameters).
bool NoParameters(const TransposeConfig& c) {
  return c.tile_rows == 0 && c.tile_cols == 0 && c.block_rows == 0 && c.vec_bytes == 0 &&
         c.pad == 0 && c.swizzle == 0 && c.realign == 0 && c.async == 0;
}

// The thread count of the members with kernels: 32 x block_rows threads a block.
Status CheckBlockRows(const TransposeConfig& c) {
  if (c.block_rows < 1 || c.block_rows > 32)
    return Status::InvalidArgument("block_rows must be in 1..32, got " +
                                   std::to_string(c.block_rows));
  return Status::OK();
}

// Structural checks shared by FromName and FromParams: canonical values for each algorithm.
Status ValidateShape(const TransposeConfig& c) {
  switch (c.algorithm) {
    case Algorithm::kCublasGeam:
    case Algorithm::kCutensorPermute:
    case Algorithm::kCopy:
      if (!NoParameters(c))
        return Status::InvalidArgument(c.Name() + " takes no parameters");
      return Status::OK();
    case Algorithm::kNaive:
      if (c.tile_rows != 0 || c.tile_cols != 0 || c.vec_bytes != 0 || c.pad != 0 ||
          c.swizzle != 0 || c.realign != 0 || c.async != 0 || c.block_rows != 8)
        return Status::InvalidArgument("naive takes no parameters");
      return Status::OK();
    case Algorithm::kSkinny:
      TR_RETURN_IF_ERROR(CheckBlockRows(c));
      if (c.tile_rows < 16 || c.tile_rows % 16 != 0 || c.tile_cols != 0 || c.vec_bytes != 16 ||
          c.pad != 0 || c.swizzle != 0 || c.realign != 0 || c.async != 0)
        return Status::InvalidArgument(
            "skinny takes a tile length (a positive multiple of 16) and block_rows only");
      return Status::OK();
    case Algorithm::kTile:
      TR_RETURN_IF_ERROR(CheckBlockRows(c));
      if (c.tile_rows < 1 || c.tile_cols < 1 || c.tile_rows > 1024 || c.tile_cols > 1024)
        return Status::InvalidArgument("tile dimensions must be in 1..1024");
      if (c.vec_bytes != 0 && c.vec_bytes != 4 && c.vec_bytes != 8 && c.vec_bytes != 16)
        return Status::InvalidArgument("vec_bytes must be 0, 4, 8 or 16, got " +
                                       std::to_string(c.vec_bytes));
      if (c.swizzle != 0 && c.swizzle != 1)
        return Status::InvalidArgument("swizzle must be 0 or 1");
      if (c.swizzle == 1 && c.pad != 0)
        return Status::InvalidArgument("a swizzled tile has no padding");
      if (c.pad < 0 || c.pad > 64) return Status::InvalidArgument("pad must be in 0..64");
      if (c.realign < 0 || c.realign > 2)
        return Status::InvalidArgument("realign must be 0, 1 or 2");
      if (c.realign != 0 && c.vec_bytes != 16)
        return Status::InvalidArgument("realign needs vec_bytes 16");
      if (c.realign == 2 && c.swizzle != 1)
        return Status::InvalidArgument("realign 2 (packed) needs the swizzled layout");
      if (c.async != 0 && c.async != 2 && c.async != 3)
        return Status::InvalidArgument("async must be 0, 2 or 3");
      if (c.async != 0 && (c.vec_bytes != 16 || c.swizzle != 1 || c.realign != 0))
        return Status::InvalidArgument("async needs vec_bytes 16, swizzle and no realign");
      return Status::OK();
  }
  return Status::InvalidArgument("unknown algorithm " +
                                 std::to_string(static_cast<int>(c.algorithm)));
}

}  // namespace

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kNaive:
      return "naive";
    case Algorithm::kTile:
      return "tile";
    case Algorithm::kSkinny:
      return "skinny";
    case Algorithm::kCublasGeam:
      return "cublas.geam";
    case Algorithm::kCutensorPermute:
      return "cutensor.permute";
    case Algorithm::kCopy:
      return "copy";
  }
  return "unknown";
}

std::string TransposeConfig::Name() const {
  switch (algorithm) {
    case Algorithm::kNaive:
      return "naive";
    case Algorithm::kCublasGeam:
      return "cublas.geam";
    case Algorithm::kCutensorPermute:
      return "cutensor.permute";
    case Algorithm::kCopy:
      return "copy";
    case Algorithm::kSkinny:
      return "skinny.l" + std::to_string(tile_rows) + ".rows" + std::to_string(block_rows);
    case Algorithm::kTile: {
      std::string n = "tile" + std::to_string(tile_rows) + "x" + std::to_string(tile_cols) +
                      ".rows" + std::to_string(block_rows);
      if (vec_bytes) n += ".vec" + std::to_string(vec_bytes);
      if (realign) n += realign == 1 ? std::string(".realign") : ".realign" + std::to_string(realign);
      n += swizzle ? std::string(".swz") : ".pad" + std::to_string(pad);
      if (async) n += ".async" + std::to_string(async);
      return n;
    }
  }
  return "unknown";
}

std::map<std::string, int64_t> TransposeConfig::Params() const {
  return {{"algorithm", static_cast<int64_t>(algorithm)},
          {"tile_rows", tile_rows},
          {"tile_cols", tile_cols},
          {"block_rows", block_rows},
          {"vec_bytes", vec_bytes},
          {"pad", pad},
          {"swizzle", swizzle},
          {"realign", realign},
          {"async", async}};
}

StatusOr<TransposeConfig> TransposeConfig::FromName(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("bad config name '" + std::string(name) + "': " + why);
  };
  if (name == "naive") return MakeNaive();
  if (name == "cublas.geam") return MakeCublasGeam();
  if (name == "cutensor.permute") return MakeCutensorPermute();
  if (name == "copy") return MakeCopy();
  std::vector<std::string_view> parts = Split(name, '.');
  TransposeConfig c;
  if (parts[0] == "skinny") {
    int len = 0, br = 0;
    if (parts.size() != 3 || !ParseField(parts[1], "l", &len) || !ParseField(parts[2], "rows", &br))
      return bad("expected skinny.l<LEN>.rows<N>");
    c = MakeSkinny(len, br);
  } else if (parts[0].substr(0, 4) == "tile") {
    std::string_view dims = parts[0].substr(4);
    size_t x = dims.find('x');
    int tr = 0, tc = 0, br = 0, vb = 0, pad = 0, swz = 0, realign = 0, async = 0;
    if (x == std::string_view::npos || !ParseInt(dims.substr(0, x), &tr) ||
        !ParseInt(dims.substr(x + 1), &tc))
      return bad("expected tile<R>x<C>");
    size_t i = 1;
    if (i >= parts.size() || !ParseField(parts[i], "rows", &br)) return bad("expected .rows<N>");
    ++i;
    if (i < parts.size() && parts[i].substr(0, 3) == "vec") {
      if (!ParseField(parts[i], "vec", &vb) || vb == 0) return bad("bad .vec<BYTES>");
      ++i;
      if (i < parts.size() && parts[i] == "realign") {
        realign = 1;
        ++i;
      } else if (i < parts.size() && parts[i].substr(0, 7) == "realign") {
        if (!ParseField(parts[i], "realign", &realign) || realign < 2) return bad("bad .realign<N>");
        ++i;
      }
    }
    if (i >= parts.size()) return bad("expected .pad<N> or .swz");
    if (parts[i] == "swz") {
      swz = 1;
    } else if (!ParseField(parts[i], "pad", &pad)) {
      return bad("expected .pad<N> or .swz");
    }
    ++i;
    if (i < parts.size() && parts[i].substr(0, 5) == "async") {
      if (!ParseField(parts[i], "async", &async) || async == 0) return bad("bad .async<N>");
      ++i;
    }
    if (i != parts.size()) return bad("trailing fields");
    c = MakeTile(tr, tc, br, vb, pad, swz, realign, async);
  } else {
    return bad("unknown algorithm");
  }
  Status s = ValidateShape(c);
  if (!s.ok()) return bad(s.message());
  if (c.Name() != name) return bad("not in canonical form (expected '" + c.Name() + "')");
  return c;
}

StatusOr<TransposeConfig> TransposeConfig::FromParams(
    const std::map<std::string, int64_t>& params) {
  static const char* const kKeys[] = {"algorithm", "tile_rows", "tile_cols", "block_rows",
                                      "vec_bytes", "pad",       "swizzle",   "realign",
                                      "async"};
  for (const auto& [k, v] : params) {
    // A named copy: C++17 lambdas cannot capture a structured binding (clang refuses).
    const std::string& name = k;
    if (std::find_if(std::begin(kKeys), std::end(kKeys),
                     [&name](const char* key) { return name == key; }) == std::end(kKeys))
      return Status::InvalidArgument("unknown config parameter '" + k + "'");
    if (v < 0 || v > 1 << 20)
      return Status::InvalidArgument("config parameter '" + k +
                                     "' out of range: " + std::to_string(v));
  }
  auto it = params.find("algorithm");
  if (it == params.end()) return Status::InvalidArgument("config parameter 'algorithm' missing");
  TransposeConfig c;
  switch (it->second) {
    case 0:
      c = MakeNaive();
      break;
    case 1:
      c = MakeTile(32, 32, 8, 0, 0, 0);
      break;
    case 2:
      c = MakeSkinny(256, 8);
      break;
    case 3:
      c = MakeCublasGeam();
      break;
    case 4:
      c = MakeCutensorPermute();
      break;
    case 5:
      c = MakeCopy();
      break;
    default:
      return Status::InvalidArgument("unknown algorithm " + std::to_string(it->second));
  }
  auto get = [&](const char* key, int* field) {
    auto f = params.find(key);
    if (f != params.end()) *field = static_cast<int>(f->second);
  };
  get("tile_rows", &c.tile_rows);
  get("tile_cols", &c.tile_cols);
  get("block_rows", &c.block_rows);
  get("vec_bytes", &c.vec_bytes);
  get("pad", &c.pad);
  get("swizzle", &c.swizzle);
  get("realign", &c.realign);
  get("async", &c.async);
  TR_RETURN_IF_ERROR(ValidateShape(c));
  return c;
}

bool TransposeConfig::operator==(const TransposeConfig& o) const {
  return std::tie(algorithm, tile_rows, tile_cols, block_rows, vec_bytes, pad, swizzle, realign,
                  async) == std::tie(o.algorithm, o.tile_rows, o.tile_cols, o.block_rows,
                                     o.vec_bytes, o.pad, o.swizzle, o.realign, o.async);
}

const std::vector<TransposeConfig>& FamilyConfigs(int elem_size) {
  static const std::vector<TransposeConfig> kEmpty;
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8 && elem_size != 16)
    return kEmpty;
  return GetFamily().by_size[elem_size];
}

bool SameLayoutTransposed(const Problem& p) {
  return (p.rows == 1 || p.cols == 1) && p.in_ld() == p.cols && p.out_ld() == p.rows;
}

bool SkinnyIsTall(const Problem& p) {
  const bool tall = p.cols <= kSkinnyMaxSide && p.in_ld() == p.cols;
  const bool wide = p.rows <= kSkinnyMaxSide && p.out_ld() == p.rows;
  return tall && (p.cols <= 16 || !wide || p.cols <= p.rows);
}

int64_t SkinnySharedBytes(const TransposeConfig& c, const Problem& p) {
  if (c.algorithm != Algorithm::kSkinny) return 0;
  const int64_t n = SkinnyIsTall(p) ? p.cols : p.rows;
  return SkinnySharedFor(SkinnyTileLength(c.tile_rows, n, SkinnyIsTall(p)) * n * p.elem_size());
}

Status CheckConfig(const TransposeConfig& c, const Problem& p) {
  TR_RETURN_IF_ERROR(ValidateProblem(p));
  const int e = p.elem_size();
  const auto& fam = FamilyConfigs(e);
  if (std::find(fam.begin(), fam.end(), c) == fam.end())
    return Status::InvalidArgument("config " + c.Name() + " is not in the family for " +
                                   std::to_string(e) + "-byte elements");
  switch (c.algorithm) {
    case Algorithm::kNaive:
      return Status::OK();
    case Algorithm::kCopy:
      if (!SameLayoutTransposed(p))
        return Status::InvalidArgument(
            c.Name() + ": only where input and output have the same layout (one row or one " +
            "column, both sides dense); " + p.ToString() + " has not");
      return Status::OK();
    case Algorithm::kCublasGeam: {
      constexpr int64_t kIntMax = 2147483647;
      if (p.dtype != DType::kF32 && p.dtype != DType::kF64)
        return Status::InvalidArgument(c.Name() + ": offered for f32 and f64 only (geam's " +
                                       "arithmetic would change " +
                                       std::string(DTypeName(p.dtype)) + " bit patterns)");
      if (p.batch != 1)
        return Status::InvalidArgument(c.Name() + ": one matrix per call (batch " +
                                       std::to_string(p.batch) + ")");
      if (p.rows > kIntMax || p.cols > kIntMax || p.in_ld() > kIntMax || p.out_ld() > kIntMax)
        return Status::InvalidArgument(c.Name() + ": dimensions must be below 2^31");
      return Status::OK();
    }
    case Algorithm::kCutensorPermute: {
      // Batches and leading dimensions are strides of its tensors; the dtype decides.
      auto layout = CutensorLayoutFor(p);
      if (!layout.ok()) return Status::InvalidArgument(c.Name() + ": " + layout.status().message());
      return Status::OK();
    }
    case Algorithm::kTile: {
      // Realigning configs read and write aligned windows: any leading dimension; offered only
      // where some row is misaligned (elsewhere the plain 16-byte tiles do the same, faster).
      if (c.realign) {
        if ((p.in_ld() * e) % 16 == 0 && (p.out_ld() * e) % 16 == 0)
          return Status::InvalidArgument(c.Name() + ": every row is 16-byte aligned (leading " +
                                         "dimensions " + std::to_string(p.in_ld()) + " and " +
                                         std::to_string(p.out_ld()) +
                                         "); the plain 16-byte tiles apply");
        return Status::OK();
      }
      if (c.vec_bytes == 0 || c.vec_bytes <= e) return Status::OK();
      if ((p.in_ld() * e) % c.vec_bytes != 0)
        return Status::InvalidArgument(c.Name() + ": input leading dimension " +
                                       std::to_string(p.in_ld()) + " x " + std::to_string(e) +
                                       " bytes is not a multiple of " +
                                       std::to_string(c.vec_bytes) + " bytes");
      if ((p.out_ld() * e) % c.vec_bytes != 0)
        return Status::InvalidArgument(c.Name() + ": output leading dimension " +
                                       std::to_string(p.out_ld()) + " x " + std::to_string(e) +
                                       " bytes is not a multiple of " +
                                       std::to_string(c.vec_bytes) + " bytes");
      return Status::OK();
    }
    case Algorithm::kSkinny: {
      const bool tall = SkinnyIsTall(p);
      const bool wide = p.rows <= kSkinnyMaxSide && p.out_ld() == p.rows;
      if (!tall && !wide)
        return Status::InvalidArgument(
            c.Name() + ": skinny needs cols <= " + std::to_string(kSkinnyMaxSide) +
            " with dense input rows, or rows <= " + std::to_string(kSkinnyMaxSide) +
            " with dense output rows");
      const int64_t n = tall ? p.cols : p.rows;
      const int64_t smem = SkinnySharedFor(SkinnyTileLength(c.tile_rows, n, tall) * n * e);
      if (smem > 48 * 1024)
        return Status::InvalidArgument(c.Name() + ": needs " + std::to_string(smem) +
                                       " bytes of shared memory, over 48 KiB");
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown algorithm");
}

std::vector<TransposeConfig> EnumerateConfigs(const Problem& p) {
  std::vector<TransposeConfig> out;
  if (!ValidateProblem(p).ok()) return out;
  for (const TransposeConfig& c : FamilyConfigs(p.elem_size()))
    if (CheckConfig(c, p).ok()) out.push_back(c);
  return out;
}

std::vector<TransposeConfig> CandidateConfigs(const Problem& p) {
  const Exactness e = p.Normalized().exactness;
  std::vector<TransposeConfig> out;
  for (const TransposeConfig& c : EnumerateConfigs(p))
    if (c.meets(e)) out.push_back(c);
  return out;
}

TransposeConfig NaiveConfig() { return MakeNaive(); }
TransposeConfig TextbookTileConfig() { return MakeTile(32, 32, 8, 0, 0, 0); }
TransposeConfig TextbookPaddedTileConfig() { return MakeTile(32, 32, 8, 0, 1, 0); }

}  // namespace transposed::kernels

namespace transposed::kernels {

int PointerAlignment(const TransposeConfig& c, const Problem& p) {
  const int e = p.elem_size();
  return (c.algorithm == Algorithm::kTile && c.vec_bytes > e) ? c.vec_bytes : e;
}

}  // namespace transposed::kernels
