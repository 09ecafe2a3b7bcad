#include "tuner/cpu/cpu_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "tuner/cpu/cpu_backend.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace transposed::cpu_cache {
namespace {

std::string FirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// Level (1-3) and type ("Data", "Instruction", "Unified") of one cache into `c`.
void Note(CacheSizes* c, int level, const std::string& type, std::optional<int64_t> size) {
  if (!size) return;
  if (level == 1 && type == "Data") c->l1d = size;
  if (level == 2 && type != "Instruction") c->l2 = size;
  if (level == 3 && type != "Instruction") c->l3 = size;
}

}  // namespace

CacheSizes FromSysfs(const std::string& dir) {
  CacheSizes c;
  c.source = "sysfs";
  for (int idx = 0; idx < 16; ++idx) {
    const std::string d = dir + "/index" + std::to_string(idx) + "/";
    const std::string level = FirstLine(d + "level");
    if (level.empty()) break;
    Note(&c, std::atoi(level.c_str()), FirstLine(d + "type"),
         cpu_internal::ParseCacheSize(FirstLine(d + "size")));
  }
  return c;
}

CacheSizes FromCpuid() {
  CacheSizes c;
  c.source = "cpuid";
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return c;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &cx, 4);
  unsigned leaf = 4;
  if (std::strcmp(vendor, "AuthenticAMD") == 0 || std::strcmp(vendor, "HygonGenuine") == 0) {
    // The cache topology leaf exists with the TopologyExtensions bit (0x80000001 ECX bit 22).
    if (__get_cpuid_max(0x80000000, nullptr) < 0x8000001D) return c;
    __cpuid(0x80000001, a, b, cx, d);
    if (!(cx & (1u << 22))) return c;
    leaf = 0x8000001D;
  } else if (max_leaf < 4) {
    return c;
  }
  for (unsigned i = 0; i < 16; ++i) {
    __cpuid_count(leaf, i, a, b, cx, d);
    const unsigned type = a & 0x1f;  // 0: no more caches; 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    const int level = static_cast<int>((a >> 5) & 0x7);
    const int64_t ways = ((b >> 22) & 0x3ff) + 1;
    const int64_t partitions = ((b >> 12) & 0x3ff) + 1;
    const int64_t line = (b & 0xfff) + 1;
    const int64_t sets = static_cast<int64_t>(cx) + 1;
    Note(&c, level, type == 1 ? "Data" : type == 2 ? "Instruction" : "Unified",
         ways * partitions * line * sets);
  }
#endif
  return c;
}

CacheSizes FromSysconf() {
  CacheSizes c;
  c.source = "sysconf";
  auto get = [](int name) -> std::optional<int64_t> {
    const long v = sysconf(name);
    return v > 0 ? std::optional<int64_t>(v) : std::nullopt;
  };
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  c.l1d = get(_SC_LEVEL1_DCACHE_SIZE);
  c.l2 = get(_SC_LEVEL2_CACHE_SIZE);
  c.l3 = get(_SC_LEVEL3_CACHE_SIZE);
#endif
  return c;
}

CacheSizes Read(const std::string& cpu0_cache_dir) {
  for (CacheSizes c : {FromSysfs(cpu0_cache_dir), FromCpuid(), FromSysconf()})
    if (c.known()) return c;
  CacheSizes unknown;
  unknown.source = "unknown";
  return unknown;
}

}  // namespace transposed::cpu_cache
