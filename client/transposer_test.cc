// Transposer's host behaviour (no GPU needed): one ask per problem, provisional answers asked
// again, failures not cached, answers that cannot run refused, pointers checked before CUDA.
// The asks are counted by an Ask function that answers like the daemon; the pointers are fake
// and never dereferenced.
#include "client/transposer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "transposed/kernels/pointer_alignment.h"

namespace transposed {
namespace {

void* Fake(uintptr_t addr) { return reinterpret_cast<void*>(addr); }

Problem Make(int64_t rows, int64_t cols, DType t = DType::kF32) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = t;
  return p;
}

// Answers every problem with `variant` (backend `backend`, source `source`), counting asks.
struct FakeDaemon {
  std::string variant = "tile32x32.rows8.pad1";
  std::string backend = "cuda";
  v1::Source source = v1::SOURCE_CACHE;
  Status fail;
  std::atomic<int> asks{0};
  std::atomic<int> last_policy{-1};
  Transposer::Ask Ask() {
    return [this](const Problem& p, v1::CachePolicy policy) -> StatusOr<v1::Answer> {
      ++asks;
      last_policy = policy;
      if (!fail.ok()) return fail;
      v1::Answer a;
      a.mutable_variant()->set_name(variant);
      a.mutable_variant()->set_backend(backend);
      a.set_source(source);
      a.set_gbps(1000);
      *a.mutable_problem() = ProblemToProto(p);
      return a;
    };
  }
};

TEST(Transposer, AsksOncePerProblem) {
  FakeDaemon d;
  auto t = Transposer::WithAsk(d.Ask(), 0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto a = (*t)->Prepare(Make(100, 70));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->launch.config().Name(), "tile32x32.rows8.pad1");
  EXPECT_TRUE((*a)->final);
  EXPECT_EQ(d.last_policy, v1::ANSWER_NOW);
  for (int i = 0; i < 100; ++i) {
    auto again = (*t)->Prepare(Make(100, 70));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->get(), a->get());
  }
  EXPECT_EQ(d.asks, 1);
  ASSERT_TRUE((*t)->Prepare(Make(70, 100)).ok());
  Problem strided = Make(100, 70);
  strided.ld_in = 80;
  ASSERT_TRUE((*t)->Prepare(strided).ok());
  EXPECT_EQ(d.asks, 3);
  EXPECT_EQ((*t)->asks(), 3);
}

TEST(Transposer, AsksAgainForAProvisionalAnswerOnly) {
  FakeDaemon d;
  d.source = v1::SOURCE_HEURISTIC;
  Transposer::Options o;
  o.refresh_seconds = 0.05;
  o.policy = v1::CACHE_ONLY;
  auto t = Transposer::WithAsk(d.Ask(), 0, o);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Prepare(Make(100, 70)).ok());
  ASSERT_TRUE((*t)->Prepare(Make(100, 70)).ok());
  EXPECT_EQ(d.asks, 1);  // within the refresh period
  EXPECT_EQ(d.last_policy, v1::CACHE_ONLY);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  d.source = v1::SOURCE_TUNED;
  d.variant = "naive";
  auto tuned = (*t)->Prepare(Make(100, 70));
  ASSERT_TRUE(tuned.ok());
  EXPECT_EQ(d.asks, 2);
  EXPECT_TRUE((*tuned)->final);
  EXPECT_EQ((*tuned)->launch.config().Name(), "naive");
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  ASSERT_TRUE((*t)->Prepare(Make(100, 70)).ok());
  EXPECT_EQ(d.asks, 2);  // final: never again
}

TEST(Transposer, KeepsAProvisionalPlanWhenTheDaemonGoesAway) {
  FakeDaemon d;
  d.source = v1::SOURCE_NEAREST;
  Transposer::Options o;
  o.refresh_seconds = 0.05;
  auto t = Transposer::WithAsk(d.Ask(), 0, o);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Prepare(Make(100, 70)).ok());
  d.fail = Status::Unavailable("connection refused");
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  auto kept = (*t)->Prepare(Make(100, 70));
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(d.asks, 2);
  ASSERT_TRUE((*t)->Prepare(Make(100, 70)).ok());
  EXPECT_EQ(d.asks, 2);  // not asked on every call while it is away
  // A problem never answered gets the error, and it is not cached.
  EXPECT_EQ((*t)->Prepare(Make(7, 9)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ((*t)->Prepare(Make(7, 9)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(d.asks, 4);
}

TEST(Transposer, RefusesWhatCannotRunHere) {
  FakeDaemon d;
  auto t = Transposer::WithAsk(d.Ask(), 0);
  ASSERT_TRUE(t.ok());
  // A bad problem is refused before any ask.
  Problem bad = Make(0, 70);
  EXPECT_EQ((*t)->Prepare(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.asks, 0);
  // A CPU daemon's answer.
  d.backend = "cpu";
  d.variant = "cpu.avx512.w1024.r512.t2.nt";
  Status s = (*t)->Prepare(Make(100, 70)).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("'cpu'"), std::string::npos) << s.message();
  // A variant that does not fit the problem (16-byte vectors on rows of 255 x 4 bytes).
  d.backend = "cuda";
  d.variant = "tile64x64.rows8.vec16.swz";
  EXPECT_EQ((*t)->Prepare(Make(255, 255)).status().code(), StatusCode::kInvalidArgument);
  d.variant = "no-such-kernel";
  EXPECT_EQ((*t)->Prepare(Make(100, 70)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.asks, 3);
  EXPECT_EQ(Transposer::WithAsk(nullptr, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Transposer::WithAsk(d.Ask(), -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Transposer::ForSelector(nullptr, DeviceByIndex(0), 0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Transposer, ChecksPointersBeforeAnyCudaCall) {
  FakeDaemon d;
  d.variant = "tile64x64.rows8.vec16.swz";
  auto t = Transposer::WithAsk(d.Ask(), 0);
  ASSERT_TRUE(t.ok());
  const Problem p = Make(256, 256);
  auto plan = (*t)->Prepare(p);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(kernels::PointerAlignment((*plan)->launch.config(), p), 16);
  Status s = (*t)->Transpose(p, Fake((1 << 20) + 4), Fake(1 << 24), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("aligned"), std::string::npos) << s.message();
  EXPECT_EQ((*t)->Transpose(p, Fake(1 << 20), Fake((1 << 20) + 64), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*t)->Transpose(p, nullptr, Fake(1 << 24), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d.asks, 1);
}

TEST(Transposer, BoundsItsPlansAndServesManyThreads) {
  FakeDaemon d;
  Transposer::Options o;
  o.max_plans = 4;
  auto t = Transposer::WithAsk(d.Ask(), 0, o);
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k)
        if (!(*t)->Prepare(Make(64 + (k + i) % 3, 32)).ok()) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  // 3 problems, at most one concurrent miss per thread each.
  EXPECT_LE(d.asks, 3 * 8);
  const int before = d.asks;
  for (int r = 0; r < 10; ++r) ASSERT_TRUE((*t)->Prepare(Make(500 + r, 32)).ok());
  EXPECT_EQ(d.asks, before + 10);  // past max_plans the cache restarts, it does not grow
}

}  // namespace
}  // namespace transposed
