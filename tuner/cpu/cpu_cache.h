// The CPU's data cache sizes (L1d, L2 and L3 of the cache instances cpu0 uses), part of the CPU
// backend's device identity (attributes l1d_bytes, l2_bytes, l3_bytes: the device class) and of its
// working-set sizing. Where they come from, first that knows:
//   sysfs   /sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}
//   cpuid   x86 CPUID's deterministic cache parameters (leaf 4; AMD/Hygon: 0x8000001D), from which
//           the kernel fills sysfs: the same sizes, so a host without /sys (a chroot, some
//           containers) keeps the device class of its fleet
//   sysconf glibc's _SC_LEVEL*_CACHE_SIZE (other architectures; may count a whole socket's L3)
//   unknown none of them: the sizes are absent (the daemon warns: such a host's device class
//           differs from its fleet's)
//
// Thread-safety: pure functions of the machine; call them from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace transposed::cpu_cache {

struct CacheSizes {
  std::optional<int64_t> l1d, l2, l3;
  std::string source;  // "sysfs", "cpuid", "sysconf" or "unknown"
  bool known() const { return l1d || l2 || l3; }
};

inline constexpr const char* kSysfsCpu0Cache = "/sys/devices/system/cpu/cpu0/cache";

// From a sysfs cache directory (index0, index1, ... below it); nothing known if it is absent.
CacheSizes FromSysfs(const std::string& cpu0_cache_dir);
// From CPUID (x86 only; nothing known elsewhere or without the cache leaf).
CacheSizes FromCpuid();
// From sysconf (nothing known where it answers 0 or -1).
CacheSizes FromSysconf();
// The first of sysfs (at cpu0_cache_dir), cpuid, sysconf that knows any size; else "unknown".
CacheSizes Read(const std::string& cpu0_cache_dir = kSysfsCpu0Cache);

}  // namespace transposed::cpu_cache
