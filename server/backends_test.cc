// The backend registry (server/backends.h): names, probes, "auto", and the daemon's own kinds
// (cuda through a worker executable, here the test-only transposed-fake-worker; cpu).
#include "server/backends.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tuner/fake_backend.h"

namespace transposed {
namespace {

// A kind that makes `devices` fake backends when `available`, and counts its factory calls.
BackendKind Kind(const std::string& name, bool available, int devices, int* made) {
  return {name, "test kind " + name,
          [available](const BackendOptions&) {
            return available ? Status::OK() : Status::FailedPrecondition("not here");
          },
          [devices, made](const BackendOptions&) -> StatusOr<std::vector<std::unique_ptr<Backend>>> {
            ++*made;
            std::vector<std::unique_ptr<Backend>> out;
            for (int i = 0; i < devices; ++i)
              out.push_back(std::make_unique<FakeBackend>(std::vector<FakeCandidate>{}));
            return out;
          }};
}

TEST(BackendRegistryTest, NamesAreUniqueAndAutoIsReserved) {
  BackendRegistry r;
  int made = 0;
  EXPECT_TRUE(r.Register(Kind("a", true, 1, &made)).ok());
  EXPECT_EQ(r.Register(Kind("a", true, 1, &made)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Register(Kind("auto", true, 1, &made)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Register(Kind("", true, 1, &made)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Names(), std::vector<std::string>{"a"});
  EXPECT_NE(r.Find("a"), nullptr);
  EXPECT_EQ(r.Find("b"), nullptr);
}

TEST(BackendRegistryTest, AutoTakesTheFirstAvailableThatMakesADevice) {
  BackendRegistry r;
  int gone = 0, empty = 0, good = 0, later = 0;
  ASSERT_TRUE(r.Register(Kind("gone", false, 1, &gone)).ok());
  ASSERT_TRUE(r.Register(Kind("empty", true, 0, &empty)).ok());
  ASSERT_TRUE(r.Register(Kind("good", true, 2, &good)).ok());
  ASSERT_TRUE(r.Register(Kind("later", true, 1, &later)).ok());
  auto b = r.Make("auto", {});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->size(), 2u);
  EXPECT_EQ(gone, 0);  // its probe failed: never made
  EXPECT_EQ(empty, 1);
  EXPECT_EQ(good, 1);
  EXPECT_EQ(later, 0);
}

TEST(BackendRegistryTest, ANamedKindMustBeAvailable) {
  BackendRegistry r;
  int n = 0;
  ASSERT_TRUE(r.Register(Kind("gone", false, 1, &n)).ok());
  ASSERT_TRUE(r.Register(Kind("empty", true, 0, &n)).ok());
  auto gone = r.Make("gone", {});
  EXPECT_EQ(gone.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(gone.status().message(), "--backend=gone: not here");
  EXPECT_EQ(r.Make("empty", {}).status().code(), StatusCode::kFailedPrecondition);
  auto unknown = r.Make("tpu", {});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("expected auto, gone, empty"), std::string::npos)
      << unknown.status().message();
  EXPECT_EQ(r.Make("auto", {}).status().code(), StatusCode::kFailedPrecondition);
  BackendOptions bad;
  bad.cpu_threads = -1;
  EXPECT_EQ(r.Make("gone", bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(DaemonBackendsTest, CudaThroughAWorkerThenCpu) {
  const BackendRegistry& r = DaemonBackends();
  EXPECT_EQ(r.Names(), (std::vector<std::string>{"cuda", "cpu"}));
  // A worker that is not there: cuda is unavailable, auto falls back to the CPU.
  BackendOptions none;
  none.worker_path = "/nonexistent/transposed-worker";
  none.cpu_threads = 1;
  EXPECT_EQ(r.Make("cuda", none).status().code(), StatusCode::kFailedPrecondition);
  auto cpu = r.Make("auto", none);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_EQ(cpu->size(), 1u);
  EXPECT_EQ((*cpu)[0]->device().backend, "cpu");
  // Any executable serving the worker protocol is a "cuda" worker to the daemon: the test-only
  // fake worker lists one device, so auto picks it.
  BackendOptions fake;
  fake.worker_path = TRANSPOSED_FAKE_WORKER;
  auto gpus = r.Make("auto", fake);
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0]->device().name, "Fake GPU");
}

}  // namespace
}  // namespace transposed
