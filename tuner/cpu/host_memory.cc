#include "tuner/cpu/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace transposed {
namespace host_memory_internal {

std::optional<uint64_t> ParseBytes(const std::string& text) {
  size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::nullopt;
  size_t e = text.find_last_not_of(" \t\r\n");
  const std::string t = text.substr(b, e - b + 1);
  if (t.empty() || t.size() > 20 || t.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  try {
    return static_cast<uint64_t>(std::stoull(t));
  } catch (...) {
    return std::nullopt;  // out of range
  }
}

std::optional<uint64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::string number, unit;
    fields >> number >> unit;
    auto v = ParseBytes(number);
    if (!v) return std::nullopt;
    if (unit == "kB") {
      if (*v > UINT64_MAX / 1024) return std::nullopt;
      return *v * 1024;
    }
    return unit.empty() ? v : std::nullopt;
  }
  return std::nullopt;
}

uint64_t ParseStat(const std::string& stat, const std::string& key) {
  std::istringstream in(stat);
  std::string k, v;
  while (in >> k >> v)
    if (k == key) return ParseBytes(v).value_or(0);
  return 0;
}

}  // namespace host_memory_internal

namespace {

using host_memory_internal::ParseBytes;
using host_memory_internal::ParseStat;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The smallest headroom (limit - usage + reclaimable page cache) of the cgroup `rel` below
// `mount` and its ancestors; nullopt when none has a limit.
std::optional<AvailableMemory> CgroupHeadroom(const std::string& mount, std::string rel, bool v2) {
  std::optional<AvailableMemory> best;
  for (;;) {
    const std::string dir = mount + (rel == "/" ? "" : rel);
    std::optional<uint64_t> limit, usage;
    uint64_t reclaimable = 0;
    if (v2) {
      limit = ParseBytes(ReadAll(dir + "/memory.max"));
      usage = ParseBytes(ReadAll(dir + "/memory.current"));
      reclaimable = ParseStat(ReadAll(dir + "/memory.stat"), "inactive_file");
    } else {
      limit = ParseBytes(ReadAll(dir + "/memory.limit_in_bytes"));
      usage = ParseBytes(ReadAll(dir + "/memory.usage_in_bytes"));
      reclaimable = ParseStat(ReadAll(dir + "/memory.stat"), "total_inactive_file");
      // v1 reports "no limit" as a huge page-aligned number.
      if (limit && *limit >= (uint64_t{1} << 62)) limit.reset();
    }
    if (limit && usage) {
      const uint64_t used = *usage - std::min(*usage, reclaimable);
      const uint64_t headroom = *limit - std::min(*limit, used);
      if (!best || headroom < best->bytes)
        best = AvailableMemory{headroom, std::string("cgroup ") + (rel.empty() ? "/" : rel) +
                                             (v2 ? " memory.max" : " memory.limit_in_bytes")};
    }
    if (rel.empty() || rel == "/") break;
    const size_t slash = rel.find_last_of('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
  return best;
}

}  // namespace

std::optional<AvailableMemory> ReadAvailableMemory(const HostMemoryPaths& paths) {
  std::optional<AvailableMemory> best;
  if (auto m = host_memory_internal::ParseMemAvailable(ReadAll(paths.meminfo)))
    best = AvailableMemory{*m, "MemAvailable"};
  std::istringstream cg(ReadAll(paths.self_cgroup));
  std::string line;
  while (std::getline(cg, line)) {
    // "0::/path" (v2) or "4:memory:/path" (v1).
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string rel = line.substr(b + 1);
    std::optional<AvailableMemory> h;
    if (controllers.empty()) {
      h = CgroupHeadroom(paths.cgroup_root, rel, true);
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      h = CgroupHeadroom(paths.cgroup_root + "/memory", rel, false);
    }
    if (h && (!best || h->bytes < best->bytes)) best = h;
  }
  return best;
}

}  // namespace transposed
