// The host as the CPU backend describes it: its CPU model, cores, caches and architecture
// (/proc/cpuinfo, tuner/cpu/cpu_cache.h, uname), its physical memory, and the CPUs this process
// may use (its affinity mask, limited by its cgroup's CPU quota). Also the parsers of the /sys and
// cgroup texts, exposed for tests.
//
// Thread-safety: the functions keep no state; each reads the files again when called.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace transposed {

// What the device description and the fingerprint of a CPU backend are made of.
struct HostInfo {
  std::string model = "unknown cpu";
  int logical = 1;
  int cores = 1;
  std::optional<int64_t> l1d, l2, l3;
  std::string cache_source;  // cpu_cache::CacheSizes::source
  std::string arch;
};
HostInfo ReadHostInfo();
// Physical memory in bytes (sysconf); 0 when unknown.
uint64_t PhysicalMemoryBytes();

// The CPUs this process may run on: its affinity mask (sched_getaffinity), limited by the cgroup
// CPU quota of its cgroup and the cgroup's ancestors (cgroup v2 cpu.max, or v1 cfs quota/period).
struct UsableCpus {
  std::vector<int> cpus;  // the affinity mask, lowest first; never empty
  int count = 1;          // min(cpus.size(), quota), at least 1
  int quota = 0;          // whole CPUs the cgroup quota allows; 0: unlimited
};
UsableCpus ReadUsableCpus();

namespace cpu_internal {

// s without leading and trailing blanks.
std::string Trim(std::string s);
// A whole decimal integer (also the numbers in candidate names, tuner/cpu/config.cc); nullopt if
// s is anything else.
std::optional<int64_t> ParseInt(std::string_view s);
// Parses a sysfs cache size ("32K", "1024K", "32M", "512"); nullopt if malformed.
std::optional<int64_t> ParseCacheSize(const std::string& s);
// Parses a cgroup v2 cpu.max ("max 100000", "150000 100000"): the whole CPUs the quota allows
// (at least 1); nullopt if unlimited or malformed.
std::optional<int> ParseCpuMax(const std::string& s);

}  // namespace cpu_internal

}  // namespace transposed
