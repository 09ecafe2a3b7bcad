// The CPU cache sizes without /sys (tuner/cpu/cpu_cache.h): sysfs parsing, and on x86 that CPUID gives
// the sizes sysfs gives, so a host without /sys keeps its device class.
#include "tuner/cpu/cpu_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace transposed::cpu_cache {
namespace {

namespace fs = std::filesystem;

void WriteIndex(const fs::path& dir, int idx, const char* level, const char* type,
                const char* size) {
  const fs::path d = dir / ("index" + std::to_string(idx));
  fs::create_directories(d);
  std::ofstream(d / "level") << level << "\n";
  std::ofstream(d / "type") << type << "\n";
  std::ofstream(d / "size") << size << "\n";
}

TEST(CpuCacheTest, ReadsSysfsLevelsAndTypes) {
  const fs::path dir = fs::temp_directory_path() / ("cpu_cache_test." + std::to_string(getpid()));
  fs::remove_all(dir);
  WriteIndex(dir, 0, "1", "Data", "48K");
  WriteIndex(dir, 1, "1", "Instruction", "32K");
  WriteIndex(dir, 2, "2", "Unified", "2048K");
  WriteIndex(dir, 3, "3", "Unified", "105M");
  const CacheSizes c = FromSysfs(dir.string());
  fs::remove_all(dir);
  EXPECT_EQ(c.source, "sysfs");
  EXPECT_EQ(c.l1d, 48 * 1024);
  EXPECT_EQ(c.l2, 2048 * 1024);
  EXPECT_EQ(c.l3, int64_t{105} << 20);
}

TEST(CpuCacheTest, WithoutSysfsTheSizesComeFromCpuidOrSysconf) {
  const CacheSizes none = FromSysfs("/nonexistent/cpu0/cache");
  EXPECT_FALSE(none.known());
  const CacheSizes c = Read("/nonexistent/cpu0/cache");
#if defined(__x86_64__)
  // Every x86-64 CPU we run on has a CPUID cache leaf.
  EXPECT_EQ(c.source, "cpuid");
  EXPECT_TRUE(c.l1d && c.l2) << c.source;
#endif
  if (c.known()) EXPECT_NE(c.source, "unknown");
}

TEST(CpuCacheTest, CpuidGivesTheSizesSysfsGives) {
  const CacheSizes sys = FromSysfs(kSysfsCpu0Cache);
  const CacheSizes cpuid = FromCpuid();
  if (!sys.known() || !cpuid.known()) GTEST_SKIP() << "no sysfs cache directory or no CPUID leaf";
  // The kernel fills sysfs from the same CPUID leaf: the device class must not change.
  EXPECT_EQ(sys.l1d, cpuid.l1d);
  EXPECT_EQ(sys.l2, cpuid.l2);
  EXPECT_EQ(sys.l3, cpuid.l3);
}

}  // namespace
}  // namespace transposed::cpu_cache
