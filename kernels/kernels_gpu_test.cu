// GPU correctness of the whole family: every configuration valid for a problem, every element
// size, a set of shapes (1x1, 1xN, Nx1, 31x33, 4097x3001, batched, strided, skinny, tile
// multiples with partial tiles). Fresh random input for every run; the output (gaps and a guard
// region after the buffer included) is poisoned with the bitwise NOT of the expected result and
// compared bit-exactly with the reference kernel, which is itself checked against a host loop.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/device_check.cuh"
#include "transposed/kernels/config.h"
#include "transposed/kernels/launch.h"

namespace transposed::kernels {
namespace {

constexpr int64_t kGuard = 256;  // bytes after the output that nothing may write

struct Shape {
  int64_t rows, cols, batch, ld_in, ld_out;
};

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(int64_t bytes) {
    if (cudaMalloc(&p, static_cast<size_t>(bytes)) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
};

uint64_t NextSeed() {
  static uint64_t seed = 0x5eed0000 ^ static_cast<uint64_t>(time(nullptr));
  return ++seed;
}

// Checks the device reference output against a host loop (elements, gaps and guard).
void CheckReferenceOnHost(const Problem& p, const void* d_in, const void* d_exp, int64_t out_bytes,
                          uint64_t pattern_seed) {
  const int e = p.elem_size();
  std::vector<uint8_t> in(p.in_alloc_bytes()), exp(out_bytes);
  ASSERT_EQ(cudaMemcpy(in.data(), d_in, in.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(exp.data(), d_exp, exp.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<uint8_t> want(out_bytes);
  for (int64_t i = 0; i < out_bytes; ++i) want[i] = check::FillByte(pattern_seed, i);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t r = 0; r < p.rows; ++r)
      for (int64_t c = 0; c < p.cols; ++c)
        std::memcpy(&want[((b * p.cols + c) * p.out_ld() + r) * e],
                    &in[((b * p.rows + r) * p.in_ld() + c) * e], e);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < out_bytes; ++i)
    if (want[i] != exp[i] && bad++ == 0) first = i;
  ASSERT_EQ(bad, 0) << "reference kernel disagrees with the host loop for " << p.ToString()
                    << ", first byte " << first;
}

// Runs every configuration valid for `s` at every element size; counts the runs in `runs`.
// `only`, when set, restricts the run to the configurations it accepts. Vendor members run where
// their library is present (and are reported once when it is not).
void RunShape(const Shape& s, int& runs, bool (*only)(const TransposeConfig&) = nullptr,
              const LaunchOptions& options = {}) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (int e : {1, 2, 4, 8, 16}) {
    Problem p;
    p.rows = s.rows;
    p.cols = s.cols;
    p.batch = s.batch;
    p.ld_in = s.ld_in;
    p.ld_out = s.ld_out;
    p.dtype = *DTypeOfSize(e);
    SCOPED_TRACE(p.ToString());
    EXPECT_TRUE(ValidateProblem(p).ok());
    const int64_t in_bytes = p.in_alloc_bytes();
    const int64_t out_bytes = p.out_alloc_bytes() + kGuard;
    DeviceBuffer in(in_bytes), out(out_bytes), exp(out_bytes);
    if (!in.p || !out.p || !exp.p) {
      ADD_FAILURE() << "cudaMalloc failed";
      continue;
    }
    const auto configs = EnumerateConfigs(p);
    EXPECT_FALSE(configs.empty());
    bool host_checked = false;
    for (const TransposeConfig& c : configs) {
      if (only != nullptr && !only(c)) continue;
      if (!VendorAvailable(c)) {
        static bool said = false;
        if (!said) std::printf("skipping %s: %s\n", c.Name().c_str(), VendorDescription(c).c_str());
        said = true;
        continue;
      }
      SCOPED_TRACE(c.Name());
      const uint64_t pattern = NextSeed();
      ASSERT_TRUE(check::Fill(in.p, in_bytes, NextSeed(), stream).ok());
      ASSERT_TRUE(check::Fill(exp.p, out_bytes, pattern, stream).ok());
      ASSERT_TRUE(check::Fill(out.p, out_bytes, pattern, stream).ok());
      Status st = LaunchReference(p, in.p, exp.p, stream);
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (!host_checked) {
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        CheckReferenceOnHost(p, in.p, exp.p, out_bytes, pattern);
        host_checked = true;
      }
      ASSERT_TRUE(check::Poison(p, out.p, exp.p, stream).ok());
      st = Launch(c, p, in.p, out.p, stream, options);
      ASSERT_TRUE(st.ok()) << st.ToString();
      const cudaError_t err = cudaStreamSynchronize(stream);
      ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
      st = check::CompareBytes(p, out.p, exp.p, out_bytes, stream, c.canonicalizes_nan());
      EXPECT_TRUE(st.ok()) << c.Name() << " on " << p.ToString() << ": " << st.ToString();
      ++runs;
    }
  }
  cudaStreamDestroy(stream);
}

void RunShapes(const std::vector<Shape>& shapes,
               bool (*only)(const TransposeConfig&) = nullptr, const LaunchOptions& options = {}) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  int runs = 0;
  for (const Shape& s : shapes) {
    RunShape(s, runs, only, options);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("checked %d (configuration, element size, shape) runs\n", runs);
  EXPECT_GT(runs, 0);
}

// Small shapes covering every path; the compute-sanitizer subset (bench/run_gpu.sh).
TEST(KernelsGpuSmall, AllConfigsSmallShapes) {
  RunShapes({{1, 1, 1, 0, 0},
             {1, 1000, 1, 0, 0},
             {1000, 1, 1, 0, 0},
             {31, 33, 1, 0, 0},
             {96, 160, 3, 0, 0},
             {300, 8, 2, 0, 0},
             {8, 300, 2, 0, 0},
             {5, 70, 1, 0, 0},
             {70, 5, 1, 0, 0},
             {70, 130, 2, 203, 301},
             {136, 272, 1, 288, 144},
             {300, 290, 2, 301, 303},  // interior realigning (shifted) tiles on odd rows
             {301, 7, 2, 0, 0},        // skinny on rows of every alignment (tall, wide, with
             {7, 301, 2, 0, 0},        // a leading-dimension gap): head and tail windows
             {9, 203, 1, 211, 0},
             {300, 40, 2, 0, 0},   // skinny past 16: tall (n = 40), wide, both sides <= 64
             {40, 300, 2, 0, 0},
             {45, 50, 3, 0, 0},
             {1, 777, 5, 0, 0},    // one row or column, batched: the copy member
             {777, 1, 3, 0, 0}});
}

// Persistent double-buffered tiles (async2) with the grid capped at 3 blocks, so that every block
// walks many tiles through both shared buffers, interior and edge tiles mixed, across batch
// entries and strided rows (racecheck covers the buffer reuse).
TEST(KernelsGpuSmall, AsyncTilesWalkManyTilesPerBlock) {
  LaunchOptions three_blocks;
  three_blocks.max_persistent_blocks = 3;
  RunShapes({{96, 160, 3, 0, 0},
             {264, 528, 2, 0, 0},
             {136, 272, 1, 288, 144},
             {300, 200, 3, 272, 336}},
            [](const TransposeConfig& c) { return c.async != 0; }, three_blocks);
}

// Packed realigning tiles (realign 2) on shapes with several full tiles down and across for
// every tile size of the family (up to 256 rows and 256-byte rows): interior tiles with staged
// rows above, the window shared with the tile below, tails before edge tiles, odd leading
// dimensions and batch entries; tiles cut by the matrix edge on the packed path (a few rows or
// columns past a tile boundary, a partial tile below a full one, batch entries whose last tile
// row is partial) and, at the end of the input buffer, on the element path.
TEST(KernelsGpu, PackedRealignTilesManyTiles) {
  RunShapes({{1030, 777, 1, 0, 0},
             {777, 1030, 2, 0, 0},
             {600, 1100, 2, 1103, 605},
             {1300, 530, 1, 531, 1301},
             {313, 798, 3, 0, 0},
             {130, 270, 4, 0, 0},
             {257, 129, 3, 0, 0},
             {383, 515, 2, 521, 389},
             {17, 2000, 3, 0, 0},
             {2000, 17, 3, 0, 0}},
            [](const TransposeConfig& c) { return c.realign == 2; });
}

// Walking packed tiles (walk K): walks of K tiles down tall tile columns, the last walk of a
// column shorter, rows above carried from tile to tile and staged only at each walk's first
// tile, walks that end on the element path near the end of the input buffer, batch entries and
// odd leading dimensions on both sides.
TEST(KernelsGpu, PackedRealignWalksCarryRowsDownManyTiles) {
  RunShapes({{2100, 300, 2, 0, 0},
             {1111, 520, 3, 1117, 1113},
             {4500, 130, 1, 4501, 4503},
             {1030, 777, 1, 0, 0},
             {600, 1100, 2, 1103, 605}},
            [](const TransposeConfig& c) { return c.walk != 0; });
}

// The vendor members must be present on the GPU machines we measure on (the image has cuBLAS);
// AllConfigs* check them on random bit patterns (value-exactly: NaN payloads may change).
TEST(KernelsGpu, CublasGeamIsAvailable) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  auto geam = TransposeConfig::FromName("cublas.geam");
  ASSERT_TRUE(geam.ok());
  std::printf("%s\n", VendorDescription(*geam).c_str());
  EXPECT_TRUE(VendorAvailable(*geam)) << VendorDescription(*geam);
}

// cuTENSOR's permutation where libcutensor (2.x) loads: batched and strided f32/f64 shapes, checked
// value-exactly like every vendor member. None of the GPU machines we use has the library: the
// test then says why and skips.
TEST(KernelsGpuSmall, CutensorPermuteWhereTheLibraryLoads) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const TransposeConfig permute = *TransposeConfig::FromName("cutensor.permute");
  if (!VendorAvailable(permute)) GTEST_SKIP() << "cutensor.permute: " << VendorDescription(permute);
  std::printf("%s\n", VendorDescription(permute).c_str());
  RunShapes({{1, 1, 1, 0, 0},
             {31, 33, 1, 0, 0},
             {96, 160, 7, 0, 0},
             {300, 200, 3, 203, 301},
             {4097, 3001, 1, 0, 0},
             {13, 5000, 2, 5003, 17}},
            [](const TransposeConfig& c) { return c.algorithm == Algorithm::kCutensorPermute; });
}

TEST(KernelsGpu, AllConfigsAllShapes) {
  RunShapes({{1, 1, 1, 0, 0},
             {1, 5000, 1, 0, 0},
             {5000, 1, 1, 0, 0},
             {31, 33, 1, 0, 0},
             {4097, 3001, 1, 0, 0},
             {1008, 1040, 1, 0, 0},
             {2048, 1024, 1, 0, 0},
             {96, 160, 7, 0, 0},
             {100, 260, 5, 0, 0},
             {300, 200, 1, 272, 336},
             {300, 200, 3, 203, 301},
             {70001, 8, 1, 0, 0},
             {8, 70001, 1, 0, 0},
             {3000, 3, 4, 0, 0},
             {13, 5000, 2, 0, 0},
             {20000, 16, 1, 0, 0},
             {4112, 4176, 1, 0, 0},
             {40001, 13, 1, 0, 0},  // skinny: misaligned strided rows, long tiles for short sides
             {11, 40003, 1, 0, 0},
             {90001, 1, 1, 0, 0},
             {3, 50001, 2, 50007, 0},
             {27, 540, 9, 0, 0},  // skinny past 16: batched small matrices, both directions,
             {540, 27, 9, 0, 0},  // 32- and 64-wide kernels, strided long rows
             {64, 3001, 2, 0, 0},
             {3001, 64, 1, 0, 0},
             {17, 5001, 1, 5003, 0},
             {5001, 33, 1, 0, 5007},
             {20, 60, 5, 0, 0},
             {145, 777, 3, 0, 0},  // skinny past 64: 128- and 256-wide kernels
             {777, 200, 2, 0, 0},
             {256, 1001, 1, 0, 0}});
}

TEST(KernelsGpu, LaunchRejectsMisalignedPointersAndBadConfigs) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  Problem p;
  p.rows = 256;
  p.cols = 256;
  p.dtype = DType::kF32;
  DeviceBuffer in(p.in_alloc_bytes() + 64), out(p.out_alloc_bytes() + 64);
  ASSERT_TRUE(in.p && out.p);
  auto vec = TransposeConfig::FromName("tile64x64.rows8.vec16.swz");
  ASSERT_TRUE(vec.ok());
  ASSERT_TRUE(CheckConfig(*vec, p).ok());
  char* in4 = static_cast<char*>(in.p) + 4;
  EXPECT_EQ(Launch(*vec, p, in4, out.p, nullptr).code(), StatusCode::kInvalidArgument);
  // Element-size accesses are fine at 4-byte alignment.
  EXPECT_TRUE(Launch(TextbookPaddedTileConfig(), p, in4, out.p, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Problem odd = p;
  odd.cols = 255;
  EXPECT_EQ(Launch(*vec, odd, in.p, out.p, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch(NaiveConfig(), p, in.p, in.p, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace transposed::kernels
