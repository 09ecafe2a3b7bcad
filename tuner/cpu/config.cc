#include "tuner/cpu/config.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tuner/cpu/host_info.h"

namespace transposed {

using cpu_internal::ParseInt;

namespace {

constexpr int kTiles[] = {8, 16, 32, 64, 128};
// L2 blocks of the SIMD candidates, in micro-tiles (64 x 64 bytes each): 1 (none), 4, 16.
constexpr int kSimdBlocks[] = {1, 4, 16};
// Column-walk blocks of the SIMD candidates: {output run, input run} in bytes.
constexpr std::pair<int, int> kSimdRuns[] = {{256, 512}, {512, 256}, {1024, 512}};
// "cpu.{isa}.b{B}.t{N}[.nt]" or "cpu.{isa}.w{W}.r{R}.t{N}[.nt]"; nullopt if the name is not of
// either form.
std::optional<CpuConfig> ParseSimdName(std::string_view name) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 4 || parts.size() > 6 || parts[0] != "cpu") return std::nullopt;
  CpuConfig c;
  c.kind = CpuConfig::Kind::kSimd;
  bool found = false;
  for (cpu_simd::Isa isa : {cpu_simd::Isa::kBase, cpu_simd::Isa::kAvx2, cpu_simd::Isa::kAvx512}) {
    if (parts[1] == cpu_simd::IsaName(isa)) {
      c.isa = static_cast<int>(isa);
      found = true;
    }
  }
  if (!found) return std::nullopt;
  // A number after a one-letter prefix: "b16" -> 16.
  auto field = [](std::string_view part, char prefix) -> std::optional<int64_t> {
    if (part.size() < 2 || part[0] != prefix) return std::nullopt;
    return ParseInt(part.substr(1));
  };
  size_t next = 3;
  if (const std::optional<int64_t> block = field(parts[2], 'b')) {
    if (*block < 1 || *block > 64) return std::nullopt;
    c.block = static_cast<int>(*block);
  } else {
    const std::optional<int64_t> w = field(parts[2], 'w');
    const std::optional<int64_t> r = parts.size() > 3 ? field(parts[3], 'r') : std::nullopt;
    if (!w || !r || *w < 64 || *r < 64 || *w > kCpuMaxRunBytes || *r > kCpuMaxRunBytes ||
        *w % 64 != 0 || *r % 64 != 0)
      return std::nullopt;
    c.wrun = static_cast<int>(*w);
    c.rrun = static_cast<int>(*r);
    next = 4;
  }
  if (parts.size() <= next) return std::nullopt;
  const std::optional<int64_t> threads = field(parts[next], 't');
  if (!threads || *threads < 1 || *threads > 4096) return std::nullopt;
  c.threads = static_cast<int>(*threads);
  if (parts.size() == next + 2) {
    if (parts[next + 1] != "nt") return std::nullopt;
    c.nt = true;
  } else if (parts.size() != next + 1) {
    return std::nullopt;
  }
  return c;
}

}  // namespace

Candidate CpuConfig::ToCandidate() const {
  Candidate c;
  switch (kind) {
    case Kind::kNaive:
      c.name = "cpu.naive";
      c.params = {{"tile", 0}, {"threads", 1}, {"colwrite", 0}};
      break;
    case Kind::kNaiveColWrite:
      c.name = "cpu.naive.colwrite";
      c.params = {{"tile", 0}, {"threads", 1}, {"colwrite", 1}};
      break;
    case Kind::kTiled:
      c.name = "cpu.tile" + std::to_string(tile) + ".t" + std::to_string(threads);
      c.params = {{"tile", tile}, {"threads", threads}, {"colwrite", 0}};
      break;
    case Kind::kSimd:
      c.name = std::string("cpu.") + cpu_simd::IsaName(static_cast<cpu_simd::Isa>(isa)) +
               (wrun > 0 ? ".w" + std::to_string(wrun) + ".r" + std::to_string(rrun)
                         : ".b" + std::to_string(block)) +
               ".t" + std::to_string(threads) + (nt ? ".nt" : "");
      c.params = {{"isa", isa}, {"threads", threads}, {"nt", nt ? 1 : 0}};
      if (wrun > 0) {
        c.params["wrun"] = wrun;
        c.params["rrun"] = rrun;
      } else {
        c.params["block"] = block;
      }
      break;
    case Kind::kTestSkipLast:
      c.name = "cpu.test.skiplast";
      c.params = {{"test_fault", 1}};
      break;
    case Kind::kTestGapWrite:
      c.name = "cpu.test.gapwrite";
      c.params = {{"test_fault", 2}};
      break;
  }
  return c;
}

StatusOr<CpuConfig> CpuConfig::FromCandidate(const Candidate& c) {
  CpuConfig config;
  const std::string_view name = c.name;
  auto unknown = [&] {
    return Status::InvalidArgument("cpu: unknown candidate \"" + c.name + "\"");
  };
  if (name == "cpu.naive") {
    config.kind = Kind::kNaive;
  } else if (name == "cpu.naive.colwrite") {
    config.kind = Kind::kNaiveColWrite;
  } else if (name == "cpu.test.skiplast") {
    config.kind = Kind::kTestSkipLast;
  } else if (name == "cpu.test.gapwrite") {
    config.kind = Kind::kTestGapWrite;
  } else if (std::optional<CpuConfig> simd = ParseSimdName(name)) {
    config = *simd;
  } else {
    const std::string_view prefix = "cpu.tile";
    if (name.substr(0, prefix.size()) != prefix) return unknown();
    const std::string_view rest = name.substr(prefix.size());
    const size_t dot = rest.find(".t");
    if (dot == std::string_view::npos) return unknown();
    const std::optional<int64_t> tile = ParseInt(rest.substr(0, dot));
    const std::optional<int64_t> threads = ParseInt(rest.substr(dot + 2));
    if (!tile || !threads || *threads < 1 || *threads > 4096) return unknown();
    if (std::find(std::begin(kTiles), std::end(kTiles), *tile) == std::end(kTiles))
      return unknown();
    config.kind = Kind::kTiled;
    config.tile = static_cast<int>(*tile);
    config.threads = static_cast<int>(*threads);
  }
  // Only the canonical spelling ("cpu.tile32.t1", not "cpu.tile032.t01"): one variant, one name
  // in the cache.
  if (config.ToCandidate().name != c.name) return unknown();
  if (!c.params.empty() && c.params != config.ToCandidate().params)
    return Status::InvalidArgument("cpu: the params of \"" + c.name + "\" do not match its name");
  return config;
}

std::vector<Candidate> CpuCandidates(const Problem& p, int max_threads,
                                     const std::vector<cpu_simd::Isa>& isas, bool test_faults) {
  std::vector<Candidate> out;
  const bool valid = ValidateProblem(p).ok();
  const bool parallel = valid && p.bytes() >= kCpuMinParallelBytes && max_threads > 1;
  const int all = parallel ? max_threads : 1;
  const cpu_simd::Isa best = isas.back();

  // SIMD: the best level on all threads, in every square blocking smaller than the matrix (only
  // b4 for parallel problems, see below) and in each column-walk shape whose block is smaller
  // than the matrix; streaming stores
  // where the output rows allow them and the output is at least kCpuMinStreamingBytes (the timed
  // runs are of cold caches: from there on streaming stores may win, the tuner decides). For
  // parallel problems also one single-threaded and (where the CPU has a wider level) one
  // base-level candidate, for comparison.
  CpuConfig c;
  c.kind = CpuConfig::Kind::kSimd;
  c.isa = static_cast<int>(best);
  c.threads = all;
  const bool nt = valid && (p.out_ld() * p.elem_size()) % 64 == 0 &&
                  p.out_alloc_bytes() >= kCpuMinStreamingBytes;
  auto push = [&] {
    c.nt = false;
    out.push_back(c.ToCandidate());
    if (nt) {
      c.nt = true;
      out.push_back(c.ToCandidate());
    }
  };
  const int64_t micro = valid ? cpu_simd::MicroEdge(best, p.elem_size()) : 1;
  int64_t covered = 0;  // the previous block's edge in elements
  for (int block : kSimdBlocks) {
    // A block as large as the matrix walks it like the previous one: skip the duplicate.
    if (valid && covered >= std::max(p.rows, p.cols)) break;
    covered = micro * block;
    // Parallel problems: neither row by row (b1: each output line is written alone) nor b16 (its
    // 1024-byte-square blocks are what the column walks do better); they never won there, and
    // fewer candidates keep a 64 MiB tune quick.
    if (parallel && block != 4) continue;
    c.block = block;
    push();
  }
  c.block = 1;
  bool whole = false;  // a previous shape's block already covers the whole matrix
  for (const auto& [wrun, rrun] : kSimdRuns) {
    const bool covers =
        valid && p.rows * p.elem_size() <= wrun && p.cols * p.elem_size() <= rrun;
    if (covers && whole) continue;
    whole = whole || covers;
    c.wrun = wrun;
    c.rrun = rrun;
    push();
  }
  c.wrun = 0;
  c.rrun = 0;
  c.nt = false;
  c.block = kSimdBlocks[1];
  if (parallel) {
    c.threads = 1;
    out.push_back(c.ToCandidate());
    c.threads = all;
  }
  if (parallel && best != cpu_simd::Isa::kBase) {
    c.isa = static_cast<int>(cpu_simd::Isa::kBase);
    out.push_back(c.ToCandidate());
  }

  // Portable scalar blocks (every size, or 32 and 64 on parallel problems) and the naive loops,
  // for problems small enough to time them quickly: above kCpuMaxNaiveBytes the scalar blocks are
  // 10 to 30 times slower than the SIMD ones and each of their runs costs as much tune time as a
  // dozen SIMD runs.
  if (!valid || p.bytes() <= kCpuMaxNaiveBytes) {
    c = CpuConfig{};
    c.kind = CpuConfig::Kind::kTiled;
    c.threads = all;
    for (int tile : kTiles) {
      if (parallel && tile != 32 && tile != 64) continue;
      c.tile = tile;
      out.push_back(c.ToCandidate());
    }
    c = CpuConfig{};
    c.kind = CpuConfig::Kind::kNaive;
    out.push_back(c.ToCandidate());
    c.kind = CpuConfig::Kind::kNaiveColWrite;
    out.push_back(c.ToCandidate());
  }
  if (test_faults) {
    CpuConfig t;
    t.kind = CpuConfig::Kind::kTestSkipLast;
    out.push_back(t.ToCandidate());
    if (p.out_ld() > p.rows) {
      t.kind = CpuConfig::Kind::kTestGapWrite;
      out.push_back(t.ToCandidate());
    }
  }
  return out;
}

}  // namespace transposed
