// Host memory admission: how many bytes this process may still allocate before the kernel (or
// its memory cgroup) reclaims or OOM-kills, so that a problem is refused with RESOURCE_EXHAUSTED
// instead of taking the daemon down.
//
// Available = MemAvailable of /proc/meminfo, lowered by the memory limit of the process's cgroup
// and of each ancestor: cgroup v2 memory.max - memory.current + inactive_file (memory.stat; page
// cache the kernel drops before it OOM-kills), or cgroup v1 memory.limit_in_bytes -
// memory.usage_in_bytes + total_inactive_file. The files are read on every call (a few small
// reads: the figure changes as other processes run).
//
// Thread-safety: free functions without shared state; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace transposed {

// Where the figures are read. The defaults are the real files; tests point them at fixtures.
struct HostMemoryPaths {
  std::string meminfo = "/proc/meminfo";
  std::string self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
};

struct AvailableMemory {
  uint64_t bytes = 0;
  std::string source;  // what bounds it: "MemAvailable" or "cgroup <path> memory.max"
};

// nullopt when neither /proc/meminfo nor a cgroup limit can be read (then nothing is refused).
std::optional<AvailableMemory> ReadAvailableMemory(const HostMemoryPaths& paths = {});

namespace host_memory_internal {
// "MemAvailable:   123 kB" in a /proc/meminfo text, in bytes.
std::optional<uint64_t> ParseMemAvailable(const std::string& meminfo);
// A cgroup limit or usage file ("max" or a decimal byte count): nullopt for "max" or garbage.
std::optional<uint64_t> ParseBytes(const std::string& text);
// The value of `key` in a memory.stat text ("inactive_file 4096" lines); 0 when absent.
uint64_t ParseStat(const std::string& stat, const std::string& key);
}  // namespace host_memory_internal

}  // namespace transposed
