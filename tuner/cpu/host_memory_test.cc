#include "tuner/cpu/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tuner/cpu/cpu_backend.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;
using host_memory_internal::ParseBytes;
using host_memory_internal::ParseMemAvailable;
using host_memory_internal::ParseStat;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A fake /proc and /sys/fs/cgroup in a temporary directory.
class FakeHost {
 public:
  FakeHost() {
    dir_ = fs::temp_directory_path() /
           ("host_memory_test." + std::to_string(getpid()) + "." + std::to_string(counter_++));
    fs::create_directories(dir_);
    paths_.meminfo = (dir_ / "meminfo").string();
    paths_.self_cgroup = (dir_ / "cgroup").string();
    paths_.cgroup_root = (dir_ / "sys").string();
  }
  ~FakeHost() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  const HostMemoryPaths& paths() const { return paths_; }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
  HostMemoryPaths paths_;
};

TEST(HostMemoryTest, Parsers) {
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\nMemFree: 5 kB\nMemAvailable:    2048 kB\n"),
            2048u * 1024);
  EXPECT_FALSE(ParseMemAvailable("MemTotal: 100 kB\n"));
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: lots kB\n"));
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: 99999999999999999999999 kB\n"));
  EXPECT_EQ(ParseBytes("1073741824\n"), 1073741824u);
  EXPECT_FALSE(ParseBytes("max\n"));
  EXPECT_FALSE(ParseBytes(""));
  EXPECT_FALSE(ParseBytes("-5"));
  EXPECT_FALSE(ParseBytes("99999999999999999999999"));
  EXPECT_EQ(ParseStat("anon 5\ninactive_file 4096\nactive_file 7\n", "inactive_file"), 4096u);
  EXPECT_EQ(ParseStat("anon 5\n", "inactive_file"), 0u);
}

TEST(HostMemoryTest, MemAvailableWithoutCgroupLimit) {
  FakeHost h;
  h.Write("meminfo", "MemTotal: 16777216 kB\nMemAvailable: 1048576 kB\n");
  h.Write("cgroup", "0::/\n");
  h.Write("sys/memory.max", "max\n");
  h.Write("sys/memory.current", "123\n");
  auto m = ReadAvailableMemory(h.paths());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->bytes, 1024 * kMiB);
  EXPECT_EQ(m->source, "MemAvailable");
}

TEST(HostMemoryTest, CgroupV2LimitOfTheGroupOrAnAncestorWins) {
  FakeHost h;
  h.Write("meminfo", "MemAvailable: 16777216 kB\n");  // 16 GiB free on the host
  h.Write("cgroup", "0::/system.slice/transposed.service\n");
  // The service's own group: 2 GiB limit, 1.9 GiB charged of which 100 MiB is inactive page
  // cache: 200 MiB of headroom.
  h.Write("sys/system.slice/transposed.service/memory.max", std::to_string(2048 * kMiB) + "\n");
  h.Write("sys/system.slice/transposed.service/memory.current",
          std::to_string(1948 * kMiB) + "\n");
  h.Write("sys/system.slice/transposed.service/memory.stat",
          "anon 1\ninactive_file " + std::to_string(100 * kMiB) + "\n");
  h.Write("sys/system.slice/memory.max", "max\n");
  h.Write("sys/system.slice/memory.current", std::to_string(4096 * kMiB) + "\n");
  auto m = ReadAvailableMemory(h.paths());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->bytes, 200 * kMiB);
  EXPECT_EQ(m->source, "cgroup /system.slice/transposed.service memory.max");

  // A tighter parent limit bounds it instead.
  h.Write("sys/system.slice/memory.max", std::to_string(4146 * kMiB) + "\n");
  m = ReadAvailableMemory(h.paths());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->bytes, 50 * kMiB);
  EXPECT_EQ(m->source, "cgroup /system.slice memory.max");

  // Usage above the limit leaves nothing (not a wrapped-around huge number).
  h.Write("sys/system.slice/memory.max", std::to_string(1024 * kMiB) + "\n");
  m = ReadAvailableMemory(h.paths());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->bytes, 0u);
}

TEST(HostMemoryTest, CgroupV1) {
  FakeHost h;
  h.Write("meminfo", "MemAvailable: 16777216 kB\n");
  h.Write("cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n");
  h.Write("sys/memory/docker/abc/memory.limit_in_bytes", std::to_string(512 * kMiB) + "\n");
  h.Write("sys/memory/docker/abc/memory.usage_in_bytes", std::to_string(312 * kMiB) + "\n");
  h.Write("sys/memory/docker/abc/memory.stat",
          "cache 1\ntotal_inactive_file " + std::to_string(12 * kMiB) + "\n");
  h.Write("sys/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  h.Write("sys/memory/memory.usage_in_bytes", std::to_string(9000 * kMiB) + "\n");
  auto m = ReadAvailableMemory(h.paths());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->bytes, 212 * kMiB);
  EXPECT_EQ(m->source, "cgroup /docker/abc memory.limit_in_bytes");
}

TEST(HostMemoryTest, NothingReadableRefusesNothing) {
  FakeHost h;
  EXPECT_FALSE(ReadAvailableMemory(h.paths()));
}

// The CPU backend refuses a problem whose buffers (input, output, reference) exceed the memory
// available, naming both byte counts, and still opens one that fits.
TEST(HostMemoryTest, CpuBackendAdmitsAgainstAvailableMemory) {
  FakeHost h;
  h.Write("meminfo", "MemAvailable: 16777216 kB\n");
  h.Write("cgroup", "0::/small\n");
  h.Write("sys/small/memory.max", std::to_string(96 * kMiB) + "\n");
  h.Write("sys/small/memory.current", std::to_string(32 * kMiB) + "\n");
  CpuBackendOptions o;
  o.max_threads = 1;
  o.memory = h.paths();
  CpuBackend backend(o);

  Problem big;  // 4096 x 4096 f32: 64 MiB in, 64 MiB out, 64 MiB reference
  big.rows = 4096;
  big.cols = 4096;
  big.dtype = DType::kF32;
  auto s = backend.Open(big);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted) << s.status().ToString();
  EXPECT_NE(s.status().message().find(std::to_string(192 * kMiB) + " bytes"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find(std::to_string(64 * kMiB) + " bytes are available"),
            std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("cgroup /small memory.max"), std::string::npos)
      << s.status().message();

  Problem small = big;  // 1 MiB each
  small.rows = 512;
  small.cols = 512;
  auto ok = backend.Open(small);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace transposed
