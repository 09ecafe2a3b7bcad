#include "transposed/kernels/config.h"
#include "transposed/kernels/family.h"
#include "transposed/kernels/pointer_alignment.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "kernels/family_retired.h"
#include "kernels/policy.h"
#include "kernels/skinny_math.h"
#include "kernels/vendor_layout.h"

namespace transposed::kernels {
namespace {

// Every member the table prints, once: the family's rows by element size (in kFamily's order), and
// every name any row (family or retired) prints, for lookups. Built once.
struct Members {
  std::vector<TransposeConfig> by_size[17];
  std::vector<TransposeConfig> all;  // unique configurations: the family's, then the retired
  std::vector<bool> retired;         // parallel to `all`
  std::vector<std::map<std::string, int64_t>> params;  // parallel to `all`: Params()
  std::unordered_map<std::string, size_t> by_name;     // into `all`
  std::map<std::map<std::string, int64_t>, size_t> by_params;  // into `all`
};

const Members& GetMembers() {
  static const Members members = [] {
    Members m;
    auto add = [&m](const TransposeConfig& c, bool retired) {
      if (m.by_name.emplace(c.Name(), m.all.size()).second) {
        m.by_params.emplace(c.Params(), m.all.size());
        m.all.push_back(c);
        m.retired.push_back(retired);
        m.params.push_back(c.Params());
      }
    };
    for (const Policy& p : kFamily) {
      m.by_size[p.elem].push_back(p.Config());
      add(p.Config(), false);
    }
    for (const Policy& p : kRetired) add(p.Config(), true);
    return m;
  }();
  return members;
}

// The keys TransposeConfig::Params() prints (the same for every member).
const std::map<std::string, int64_t>& ParamKeys() {
  static const std::map<std::string, int64_t> keys = TransposeConfig().Params();
  return keys;
}

// The members whose Params() agree with every key of `params`. A map that leaves keys out (one
// stored before the key existed: "realign", "async" and "walk" came later) names the member whose
// left-out parameters are all 0 where several agree on the given ones.
std::vector<const TransposeConfig*> MatchParams(const std::map<std::string, int64_t>& params) {
  const Members& m = GetMembers();
  std::vector<const TransposeConfig*> out;
  if (params.size() == ParamKeys().size()) {  // every key: one lookup (a candidate's map)
    auto it = m.by_params.find(params);
    if (it != m.by_params.end()) out.push_back(&m.all[it->second]);
    return out;
  }
  std::vector<const TransposeConfig*> zero_rest;
  for (size_t i = 0; i < m.all.size(); ++i) {
    bool agree = true, rest_zero = true;
    for (const auto& [k, v] : m.params[i]) {
      auto it = params.find(k);
      if (it == params.end()) {
        rest_zero = rest_zero && v == 0;
      } else if (it->second != v) {
        agree = false;
        break;
      }
    }
    if (!agree) continue;
    out.push_back(&m.all[i]);
    if (rest_zero) zero_rest.push_back(&m.all[i]);
  }
  return out.size() > 1 && zero_rest.size() == 1 ? zero_rest : out;
}

std::string ParamsText(const std::map<std::string, int64_t>& params) {
  std::string s = "{";
  for (const auto& [k, v] : params) s += (s.size() > 1 ? ", " : "") + k + ": " + std::to_string(v);
  return s + "}";
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
      if (walk) n += ".walk" + std::to_string(walk);
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
          {"async", async},
          {"walk", walk}};
}

StatusOr<TransposeConfig> TransposeConfig::FromName(std::string_view name) {
  if (std::optional<TransposeConfig> c = FindMember(name)) return *c;
  return Status::InvalidArgument("config name '" + std::string(name) +
                                 "' is not in the family (no row of kernels/policy.h prints it)");
}

StatusOr<TransposeConfig> TransposeConfig::FromParams(
    const std::map<std::string, int64_t>& params) {
  for (const auto& [k, v] : params) {
    (void)v;
    if (ParamKeys().count(k) == 0)
      return Status::InvalidArgument("unknown config parameter '" + k + "'");
  }
  if (params.count("algorithm") == 0)
    return Status::InvalidArgument("config parameter 'algorithm' missing");
  const std::vector<const TransposeConfig*> match = MatchParams(params);
  if (match.empty())
    return Status::InvalidArgument("no member of the family has the parameters " +
                                   ParamsText(params));
  if (match.size() > 1)
    return Status::InvalidArgument("the parameters " + ParamsText(params) +
                                   " name several members of the family (" + match[0]->Name() +
                                   ", " + match[1]->Name() + ", ...): give every parameter");
  return *match[0];
}

bool TransposeConfig::operator==(const TransposeConfig& o) const {
  return std::tie(algorithm, tile_rows, tile_cols, block_rows, vec_bytes, pad, swizzle, realign,
                  async, walk) == std::tie(o.algorithm, o.tile_rows, o.tile_cols, o.block_rows,
                                           o.vec_bytes, o.pad, o.swizzle, o.realign, o.async,
                                           o.walk);
}

const std::vector<TransposeConfig>& FamilyConfigs(int elem_size) {
  static const std::vector<TransposeConfig> kEmpty;
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8 && elem_size != 16)
    return kEmpty;
  return GetMembers().by_size[elem_size];
}

std::optional<TransposeConfig> FindMember(std::string_view name) {
  const Members& m = GetMembers();
  auto it = m.by_name.find(std::string(name));
  if (it == m.by_name.end()) return std::nullopt;
  return m.all[it->second];
}

std::optional<TransposeConfig> MemberOfParams(const std::map<std::string, int64_t>& params) {
  for (const auto& [k, v] : params) {
    (void)v;
    if (ParamKeys().count(k) == 0) return std::nullopt;
  }
  if (params.count("algorithm") == 0) return std::nullopt;
  const std::vector<const TransposeConfig*> match = MatchParams(params);
  if (match.size() != 1) return std::nullopt;
  return *match[0];
}

bool IsRetired(const TransposeConfig& c) {
  const Members& m = GetMembers();
  auto it = m.by_name.find(c.Name());
  return it != m.by_name.end() && m.retired[it->second] && m.all[it->second] == c;
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
                                   std::to_string(e) + "-byte elements" +
                                   (IsRetired(c) ? " (a retired row: re-tune the problem)" : ""));
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

TransposeConfig NaiveConfig() { return Naive(4).Config(); }
TransposeConfig TextbookTileConfig() { return Tile(4, 32, 32, 8, 0, Pad(0)).Config(); }
TransposeConfig TextbookPaddedTileConfig() { return Tile(4, 32, 32, 8, 0, Pad(1)).Config(); }

}  // namespace transposed::kernels

namespace transposed::kernels {

int PointerAlignment(const TransposeConfig& c, const Problem& p) {
  const int e = p.elem_size();
  return (c.algorithm == Algorithm::kTile && c.vec_bytes > e) ? c.vec_bytes : e;
}

}  // namespace transposed::kernels
