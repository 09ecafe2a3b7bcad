#include "tuner/cpu/host_info.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "tuner/cpu/cpu_cache.h"

namespace transposed {

using cpu_internal::ParseCpuMax;
using cpu_internal::ParseInt;
using cpu_internal::Trim;

namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return Trim(line);
}

// The smallest CPU quota of the cgroup `rel` (a path below `mount`) and its ancestors.
std::optional<int> CgroupQuota(const std::string& mount, std::string rel, bool v2) {
  std::optional<int> best;
  for (;;) {
    const std::string dir = mount + (rel == "/" ? "" : rel);
    std::optional<int> q;
    if (v2) {
      q = ParseCpuMax(ReadFirstLine(dir + "/cpu.max"));
    } else {
      const std::optional<int64_t> quota = ParseInt(ReadFirstLine(dir + "/cpu.cfs_quota_us"));
      const std::optional<int64_t> period = ParseInt(ReadFirstLine(dir + "/cpu.cfs_period_us"));
      if (quota && period && *quota > 0 && *period > 0)
        q = static_cast<int>(std::max<int64_t>(1, *quota / *period));
    }
    if (q) best = best ? std::min(*best, *q) : *q;
    if (rel.empty() || rel == "/") break;
    const size_t slash = rel.find_last_of('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
  return best;
}

}  // namespace

HostInfo ReadHostInfo() {
  HostInfo h;
  const unsigned hc = std::thread::hardware_concurrency();
  h.logical = hc > 0 ? static_cast<int>(hc) : 1;

  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, physical_id = "0";
  std::set<std::pair<std::string, std::string>> cores;
  bool have_model = false;
  while (cpuinfo && std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "model name" && !have_model && !value.empty()) {
      h.model = value;
      have_model = true;
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      cores.insert({physical_id, value});
    }
  }
  h.cores = cores.empty() ? h.logical : static_cast<int>(cores.size());

  // sysfs, else CPUID (the same sizes: a host without /sys keeps its device class), else sysconf.
  const cpu_cache::CacheSizes caches = cpu_cache::Read();
  h.l1d = caches.l1d;
  h.l2 = caches.l2;
  h.l3 = caches.l3;
  h.cache_source = caches.source;

  struct utsname u;
  if (uname(&u) == 0) h.arch = u.machine;
  if (h.arch.empty()) h.arch = "unknown";
  return h;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

UsableCpus ReadUsableCpus() {
  UsableCpus u;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) u.cpus.push_back(c);
  }
  if (u.cpus.empty()) {
    const unsigned hc = std::thread::hardware_concurrency();
    for (unsigned c = 0; c < std::max(1u, hc); ++c) u.cpus.push_back(static_cast<int>(c));
  }
  std::optional<int> quota;
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (cg && std::getline(cg, line)) {
    // "0::/path" (v2) or "4:cpu,cpuacct:/path" (v1).
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string rel = line.substr(b + 1);
    std::optional<int> q;
    if (controllers.empty()) {
      q = CgroupQuota("/sys/fs/cgroup", rel, true);
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      q = CgroupQuota("/sys/fs/cgroup/" + controllers, rel, false);
      if (!q) q = CgroupQuota("/sys/fs/cgroup/cpu", rel, false);
    }
    if (q) quota = quota ? std::min(*quota, *q) : *q;
  }
  u.quota = quota.value_or(0);
  u.count = static_cast<int>(u.cpus.size());
  if (u.quota > 0) u.count = std::min(u.count, u.quota);
  u.count = std::max(1, u.count);
  return u;
}

namespace cpu_internal {

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int> ParseCpuMax(const std::string& s) {
  const std::string t = Trim(s);
  const size_t space = t.find(' ');
  if (space == std::string::npos) return std::nullopt;
  const std::string_view quota = std::string_view(t).substr(0, space);
  const std::optional<int64_t> period = ParseInt(Trim(t.substr(space + 1)));
  if (quota == "max" || !period || *period <= 0) return std::nullopt;
  const std::optional<int64_t> q = ParseInt(quota);
  if (!q || *q <= 0) return std::nullopt;
  return static_cast<int>(std::clamp<int64_t>(*q / *period, 1, 1 << 20));
}

std::optional<int64_t> ParseCacheSize(const std::string& s) {
  std::string t = Trim(s);
  if (t.empty()) return std::nullopt;
  int64_t mult = 1;
  switch (t.back()) {
    case 'K':
    case 'k':
      mult = int64_t{1} << 10;
      break;
    case 'M':
    case 'm':
      mult = int64_t{1} << 20;
      break;
    case 'G':
    case 'g':
      mult = int64_t{1} << 30;
      break;
  }
  if (mult != 1) t.pop_back();
  const std::optional<int64_t> v = ParseInt(t);
  if (!v || *v <= 0 || *v > (int64_t{1} << 40)) return std::nullopt;
  return *v * mult;
}

}  // namespace cpu_internal

}  // namespace transposed
