// The device class key (core/device_class.h): what shares tuned results and what never does.
#include "core/device_class.h"

#include <gtest/gtest.h>

namespace transposed {
namespace {

DeviceInfo H100(const std::string& uuid) {
  DeviceInfo d;
  d.backend = "cuda";
  d.uuid = uuid;
  d.name = "NVIDIA H100 80GB HBM3";
  d.memory_bytes = 85045477376ULL;
  d.attributes = {{"compute_capability", "9.0"},   {"sm_count", "132"},
                  {"l2_bytes", "52428800"},        {"memory_clock_khz", "2619000"},
                  {"memory_bus_width", "5120"},    {"sm_clock_khz", "1980000"},
                  {"driver_version", "12080"},     {"runtime_version", "12080"},
                  {"shared_mem_per_block_optin", "232448"}};
  d.library_version = "0.1.0+k0123456789";
  return d;
}

// An H200 has the same compute capability, SM count and L2 as an H100 SXM: only the name, the
// memory size and the memory clock tell them apart.
DeviceInfo H200(const std::string& uuid) {
  DeviceInfo d = H100(uuid);
  d.name = "NVIDIA H200";
  d.memory_bytes = 150754820096ULL;
  d.attributes["memory_clock_khz"] = "3201000";
  return d;
}

TEST(DeviceClass, TwoCardsOfOneModelShareTheirClass) {
  const DeviceInfo a = H100("GPU-aaaaaaaa-0000-0000-0000-000000000001");
  DeviceInfo b = H100("GPU-bbbbbbbb-0000-0000-0000-000000000002");
  b.index = 3;
  b.attributes["sm_clock_khz"] = "1755000";  // not part of the class
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());  // two instances...
  EXPECT_EQ(ClassOf(a).key, ClassOf(b).key);    // ...of one class
  EXPECT_TRUE(SameClass(a, b));
  EXPECT_EQ(ClassOf(a).key.size(), 16u);
}

TEST(DeviceClass, AnH100IsNeverAnH200) {
  const DeviceInfo h100 = H100("GPU-1");
  const DeviceInfo h200 = H200("GPU-1");  // even with the same UUID
  EXPECT_NE(ClassOf(h100).key, ClassOf(h200).key);
  EXPECT_FALSE(SameClass(h100, h200));
  // Each distinguishing field alone is enough.
  DeviceInfo renamed = H100("GPU-1");
  renamed.name = "NVIDIA H200";
  EXPECT_NE(ClassOf(h100).key, ClassOf(renamed).key);
  DeviceInfo bigger = H100("GPU-1");
  bigger.memory_bytes = h200.memory_bytes;
  EXPECT_NE(ClassOf(h100).key, ClassOf(bigger).key);
  DeviceInfo faster = H100("GPU-1");
  faster.attributes["memory_clock_khz"] = "3201000";
  EXPECT_NE(ClassOf(h100).key, ClassOf(faster).key);
}

TEST(DeviceClass, EveryListedFieldSplitsTheClass) {
  const DeviceInfo base = H100("GPU-1");
  for (const char* k : {"compute_capability", "sm_count", "l2_bytes", "memory_clock_khz",
                        "memory_bus_width", "runtime_version", "cublas", "cutensor"}) {
    DeviceInfo d = base;
    d.attributes[k] += "1";
    EXPECT_NE(ClassOf(base).key, ClassOf(d).key) << k;
  }
  // A node whose worker loads no cuBLAS never gets a winner measured where cublas.geam ran.
  DeviceInfo with_cublas = base;
  with_cublas.attributes["cublas"] = "cuBLAS 13.1.0 (libcublas.so.13)";
  DeviceInfo without = with_cublas;
  without.attributes.erase("cublas");
  EXPECT_NE(ClassOf(with_cublas).key, ClassOf(without).key);
  // Likewise cuTENSOR (cutensor.permute), and its version.
  DeviceInfo with_cutensor = base;
  with_cutensor.attributes["cutensor"] = "cuTENSOR 2.3.1 (libcutensor.so.2)";
  DeviceInfo no_cutensor = with_cutensor;
  no_cutensor.attributes.erase("cutensor");
  EXPECT_NE(ClassOf(with_cutensor).key, ClassOf(no_cutensor).key);
  DeviceInfo other_cutensor = with_cutensor;
  other_cutensor.attributes["cutensor"] = "cuTENSOR 2.5.0 (libcutensor.so.2)";
  EXPECT_NE(ClassOf(with_cutensor).key, ClassOf(other_cutensor).key);
  // Without one, no field at all: the classes of nodes that never had cuTENSOR are unchanged.
  EXPECT_EQ(ClassOf(base).fields.count("cutensor"), 0u);
  DeviceInfo empty_cutensor = base;
  empty_cutensor.attributes["cutensor"] = "";
  EXPECT_EQ(ClassOf(base).key, ClassOf(empty_cutensor).key);
  DeviceInfo lib = base;
  lib.library_version = "0.1.0+kffffffffff";
  EXPECT_EQ(ClassOf(base).key, ClassOf(lib).key) << "an upgrade keeps the class";
  EXPECT_EQ(ClassOf(base).fields.count("library_version"), 0u);
  DeviceInfo cpu = base;
  cpu.backend = "cpu";
  EXPECT_NE(ClassOf(base).key, ClassOf(cpu).key);
}

TEST(DeviceClass, ADriverPatchKeepsTheClassANewCudaLevelDoesNot) {
  const DeviceInfo base = H100("GPU-1");  // driver_version 12080: CUDA 12.8
  DeviceInfo patched = base;
  patched.attributes["driver_version"] = "12090";  // a newer driver of the same major
  EXPECT_EQ(ClassOf(base).key, ClassOf(patched).key);
  EXPECT_EQ(ClassOf(base).fields.at("driver_major"), "12");
  DeviceInfo major = base;
  major.attributes["driver_version"] = "13000";
  EXPECT_NE(ClassOf(base).key, ClassOf(major).key);
  DeviceInfo odd = base;
  odd.attributes["driver_version"] = "580.159.04";  // not a number: kept whole, never merged
  EXPECT_EQ(ClassOf(odd).fields.at("driver_major"), "580.159.04");
}

TEST(DeviceClass, CpuClassIsModelCoresAndCaches) {
  DeviceInfo a;
  a.backend = "cpu";
  a.uuid = "node-a";
  a.name = "AMD EPYC 7B13";
  a.memory_bytes = 64ULL << 30;
  a.attributes = {{"cores", "8"},          {"logical_cpus", "16"},     {"threads_max", "16"},
                  {"l1d_bytes", "32768"},  {"l2_bytes", "524288"},     {"l3_bytes", "33554432"},
                  {"arch", "x86_64"}};
  a.library_version = "0.1.0+k0123456789";
  DeviceInfo b = a;
  b.uuid = "node-b";
  b.memory_bytes = 63ULL << 30;  // RAM is not part of a CPU's class
  EXPECT_EQ(ClassOf(a).key, ClassOf(b).key);
  for (const char* k : {"cores", "logical_cpus", "threads_max", "l1d_bytes", "l2_bytes",
                        "l3_bytes", "arch"}) {
    DeviceInfo c = a;
    c.attributes[k] += "0";
    EXPECT_NE(ClassOf(a).key, ClassOf(c).key) << k;
  }
  DeviceInfo other = a;
  other.name = "Intel Xeon Platinum 8480+";
  EXPECT_NE(ClassOf(a).key, ClassOf(other).key);
}

TEST(DeviceClass, UnknownBackendsKeepEveryAttribute) {
  DeviceInfo a;
  a.backend = "rocm";
  a.name = "MI300X";
  a.uuid = "1";
  a.attributes = {{"x", "1"}};
  DeviceInfo b = a;
  b.uuid = "2";
  EXPECT_EQ(ClassOf(a).key, ClassOf(b).key);
  b.attributes["x"] = "2";
  EXPECT_NE(ClassOf(a).key, ClassOf(b).key);
}

}  // namespace
}  // namespace transposed
