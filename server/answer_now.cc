#include "server/answer_now.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "transposed/kernels/family.h"

namespace transposed {
namespace {

double Log2Ratio(double a, double b) { return std::fabs(std::log2(a / b)); }

int64_t Param(const Candidate& c, const char* key, int64_t otherwise) {
  auto it = c.params.find(key);
  return it == c.params.end() ? otherwise : it->second;
}

}  // namespace

std::string ShapeClass(const Problem& p) {
  if (p.cols <= 16 && p.rows > 16) return "tall-skinny";
  if (p.rows <= 16 && p.cols > 16) return "wide-skinny";
  return "tiled";
}

double ShapeDistance(const Problem& a, const Problem& b) {
  if (a.elem_size() != b.elem_size() || ShapeClass(a) != ShapeClass(b))
    return std::numeric_limits<double>::infinity();
  double d = Log2Ratio(static_cast<double>(a.rows), static_cast<double>(b.rows)) +
             Log2Ratio(static_cast<double>(a.cols), static_cast<double>(b.cols)) +
             Log2Ratio(static_cast<double>(a.batch), static_cast<double>(b.batch));
  if (a.dense() != b.dense()) d += 1;
  return d;
}

std::optional<size_t> NearestEntry(const Problem& p, const std::vector<TuneResult>& stored,
                                   const std::vector<Candidate>& valid) {
  std::optional<size_t> best;
  double best_d = std::numeric_limits<double>::infinity();
  const bool bit_exact = p.Normalized().exactness == Exactness::kBit;
  for (size_t i = 0; i < stored.size(); ++i) {
    // A value-exact entry's winner is never an answer to a bit-exact problem (a bit-exact one is
    // an answer to either).
    if (bit_exact && stored[i].problem.Normalized().exactness != Exactness::kBit) continue;
    const double d = ShapeDistance(p, stored[i].problem);
    if (!(d < best_d)) continue;
    const std::string& name = stored[i].best.name;
    if (std::none_of(valid.begin(), valid.end(),
                     [&](const Candidate& c) { return c.name == name; }))
      continue;
    best_d = d;
    best = i;
  }
  return best;
}

Candidate HeuristicCandidate(const Problem& p, const std::vector<Candidate>& valid) {
  const Candidate* pick = nullptr;
  double best = std::numeric_limits<double>::infinity();
  auto consider = [&](const Candidate& c, double score) {
    if (score < best) best = score, pick = &c;
  };
  for (const Candidate& c : valid) {
    if (Param(c, "test_fault", 0) != 0) continue;
    // The CUDA family's member this candidate runs, if it is one (kernels' host lookup).
    const std::optional<kernels::Algorithm> cuda = kernels::FamilyAlgorithm(c.params);
    if (cuda == kernels::Algorithm::kCopy) {
      consider(c, -2);  // CUDA copy: offered only where the layout does not change, a copy's speed
    } else if (cuda == kernels::Algorithm::kSkinny && ShapeClass(p) != "tiled") {
      consider(c, -1);  // CUDA skinny: the first one, before any tile
    } else if (cuda == kernels::Algorithm::kTile) {
      const double tile_bytes = static_cast<double>(Param(c, "tile_rows", 32) *
                                                    Param(c, "tile_cols", 32) * p.elem_size());
      const double score = (Param(c, "vec_bytes", 0) == 16 ? 0 : 4) +
                           (Param(c, "swizzle", 0) == 1 ? 0 : 0.5) +
                           (Param(c, "realign", 0) + Param(c, "async", 0) != 0 ? 2 : 0) +
                           0.25 * Log2Ratio(static_cast<double>(Param(c, "block_rows", 8)), 8) +
                           Log2Ratio(tile_bytes, 16384);
      consider(c, score);
    } else if (!cuda && c.params.count("isa") != 0) {
      // CPU SIMD: the widest ISA, all threads, the 1024 x 512-byte column walk (else 4 micro-
      // tiles a side), streaming stores where offered (docs/cpu-backend.md: the usual winners).
      const double threads = static_cast<double>(std::max<int64_t>(1, Param(c, "threads", 1)));
      const double layout =
          c.params.count("wrun") != 0
              ? -0.1 + 0.25 * Log2Ratio(static_cast<double>(std::max<int64_t>(64, Param(c, "wrun", 1024))), 1024) +
                    0.25 * Log2Ratio(static_cast<double>(std::max<int64_t>(64, Param(c, "rrun", 512))), 512)
              : 0.25 * Log2Ratio(static_cast<double>(std::max<int64_t>(1, Param(c, "block", 4))), 4);
      consider(c, 5 - static_cast<double>(Param(c, "isa", 0)) - 0.01 * std::log2(threads) +
                      layout - 0.05 * static_cast<double>(Param(c, "nt", 0)));
    } else if (!cuda && Param(c, "tile", 0) > 0) {
      // CPU: tile 32, then the most threads.
      const double threads = static_cast<double>(std::max<int64_t>(1, Param(c, "threads", 1)));
      consider(c, 10 + Log2Ratio(static_cast<double>(Param(c, "tile", 32)), 32) -
                      0.01 * std::log2(threads));
    }
  }
  if (pick == nullptr) {
    for (const Candidate& c : valid)
      if (Param(c, "test_fault", 0) == 0) return c;
    return valid.front();
  }
  return *pick;
}

}  // namespace transposed
