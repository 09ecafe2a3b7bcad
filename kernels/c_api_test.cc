// The C ABI's prepared launches (c_api.h) on the host: what transposed_prepare refuses, what a
// handle knows, and the pointer checks of transposed_launch_prepared, which run before any CUDA
// call, so this runs without a GPU (CI). The fake pointers are never dereferenced.
#include "transposed/kernels/c_api.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

void* Fake(uintptr_t addr) { return reinterpret_cast<void*>(addr); }

struct Prepared {
  transposed_prepared* h = nullptr;
  int rc = -1;
  char err[512] = "untouched";
  Prepared(const char* variant, const char* dtype, int64_t rows, int64_t cols, int64_t batch = 1,
           int64_t ld_in = 0, int64_t ld_out = 0, int device = 0) {
    rc = transposed_prepare(variant, dtype, rows, cols, batch, ld_in, ld_out, device, &h, err,
                            sizeof(err));
  }
  ~Prepared() { transposed_destroy(h); }
};

TEST(CApiPrepared, PreparesOnceAndKnowsItsVariant) {
  Prepared p("tile64x64.rows8.vec16.swz", "f32", 256, 256);
  ASSERT_EQ(p.rc, 0) << p.err;
  ASSERT_NE(p.h, nullptr);
  EXPECT_STREQ(p.err, "");
  EXPECT_STREQ(transposed_prepared_variant(p.h), "tile64x64.rows8.vec16.swz");
  EXPECT_EQ(transposed_prepared_alignment(p.h), 16);
  EXPECT_EQ(transposed_prepared_alignment(nullptr), 0);
  // Leading dimensions and batches are part of the prepared problem.
  Prepared q("naive", "bf16", 100, 37, 3, 40, 101);
  ASSERT_EQ(q.rc, 0) << q.err;
  EXPECT_STREQ(transposed_prepared_variant(q.h), "naive");
  EXPECT_EQ(transposed_prepared_alignment(q.h), 2);
}

TEST(CApiPrepared, RefusesWhatCannotRunAndLeavesNoHandle) {
  struct Case {
    Prepared p;
    const char* says;
  } cases[] = {
      {{"tile64x64.rows8.vec16.swz", "f33", 256, 256}, "dtype"},
      {{"not-a-variant", "f32", 256, 256}, "not-a-variant"},
      {{"tile1024x1024.rows8.pad0", "f32", 256, 256}, "not in the family"},
      // 16-byte vectors need rows of a multiple of 16 bytes.
      {{"tile64x64.rows8.vec16.swz", "f32", 255, 255}, ""},
      {{"naive", "f32", 0, 256}, "rows"},
      {{"naive", "f32", 256, 256, 1, 100}, "ld_in"},
      {{"naive", "f32", 256, 256, 1, 0, 0, -1}, "device"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.p.rc, 3) << c.says << ": " << c.p.err;
    EXPECT_EQ(c.p.h, nullptr) << c.says;
    EXPECT_NE(std::string(c.p.err).find(c.says), std::string::npos) << c.p.err;
  }
  EXPECT_EQ(transposed_prepare("naive", "f32", 4, 4, 1, 0, 0, 0, nullptr, nullptr, 0), 3);
}

TEST(CApiPrepared, LaunchChecksTheHandleAndPointersBeforeCuda) {
  EXPECT_EQ(transposed_launch_prepared(nullptr, Fake(1 << 20), Fake(1 << 24), nullptr), 3);
  EXPECT_NE(std::string(transposed_last_error()).find("handle"), std::string::npos)
      << transposed_last_error();
  Prepared p("tile64x64.rows8.vec16.swz", "f32", 256, 256);
  ASSERT_EQ(p.rc, 0) << p.err;
  if (!transposed_has_cuda()) {
    EXPECT_EQ(transposed_launch_prepared(p.h, Fake(1 << 20), Fake(1 << 24), nullptr), 12);
    return;
  }
  struct Case {
    void* in;
    void* out;
    const char* says;
  } cases[] = {
      {nullptr, Fake(1 << 24), "null"},
      {Fake((1 << 20) + 4), Fake(1 << 24), "input pointer is not aligned to 16"},
      {Fake(1 << 20), Fake((1 << 24) + 8), "output pointer is not aligned to 16"},
      {Fake(1 << 20), Fake((1 << 20) + 4096), "overlap"},
      {Fake(1 << 20), Fake(1 << 20), "in-place"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(transposed_launch_prepared(p.h, c.in, c.out, nullptr), 3) << c.says;
    EXPECT_NE(std::string(transposed_last_error()).find(c.says), std::string::npos)
        << transposed_last_error();
  }
  transposed_destroy(nullptr);
}

}  // namespace
