// The tune's own contention evidence from its copy ceiling (server/polite.h, issue 26): the
// service on the scripted FakeBackend (no load source, as a GPU without NVML) judges each tune's
// ceiling against the device's idle ceiling at that size, marks a tune whose ceiling fell far
// below it, and feeds that into the device's one busy signal (DeviceLoads: ListDevices, the
// metrics, the log); the idle ceilings survive a restart through the store.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/service.h"
#include "store/store.h"
#include "testing/problems.h"
#include "tuner/fake_backend.h"

namespace transposed {
namespace {

constexpr double kCeilingS = 5e-4;

Problem P(int64_t rows, int64_t cols) { return MakeTestProblem(rows, cols, DType::kF32); }

class PoliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    service_.reset();
    store_.reset();
  }

  // A (re)started service on the test's store whose fake device's ceiling takes `ceiling_s`.
  void Start(double ceiling_s = kCeilingS, double ceiling_drop = 0.5) {
    service_.reset();
    auto fake = std::make_unique<FakeBackend>(
        std::vector<FakeCandidate>{{"fast", {1e-4}}, {"slow", {3e-4}}}, ceiling_s);
    fake_ = fake.get();
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(std::move(fake));
    ServiceOptions o;
    o.tune_budget_seconds = 30;
    o.tune.quick = {0, 1, 0, 1};
    o.tune.final = {0, 1, 0, 1};
    o.polite.ceiling_drop = ceiling_drop;
    o.polite.remeasure_contended = false;  // this test looks at the marks alone
    auto s = TransposeService::Create(std::move(backends), store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(s).value();
  }

  TuneResult Tune(const Problem& p) {
    ConfigRequest r;
    r.problem = p;
    auto a = service_->GetConfig(r);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->source, AnswerSource::kTuned);
    return a.ok() ? a->result : TuneResult{};
  }
  DeviceLoad Load() { return service_->DeviceLoads().at(0); }

  std::unique_ptr<Store> store_;
  FakeBackend* fake_ = nullptr;  // owned by service_
  std::unique_ptr<TransposeService> service_;
};

TEST_F(PoliteTest, ACeilingFarBelowTheIdleOneIsEvidenceOfContention) {
  Start();
  // Idle: the first ceiling of this size becomes the device's idle ceiling.
  const TuneResult idle = Tune(P(256, 512));
  EXPECT_EQ(idle.contention, "");
  EXPECT_GT(Load().tune_ceiling_gbps, 0);
  EXPECT_EQ(Load().idle_ceiling_gbps, 0);  // nothing to judge the first one against
  EXPECT_NE(Load().state, LoadState::kBusy);

  // The copy takes 1.5x as long (a third slower): within --contention-ceiling-drop, no mark.
  fake_->set_ceiling_s(1.5 * kCeilingS);
  const TuneResult slower = Tune(P(128, 1024));
  EXPECT_EQ(slower.contention, "");
  EXPECT_DOUBLE_EQ(Load().idle_ceiling_gbps, idle.ceiling_gbps());

  // 3x as long: a job shares the device. Marked, and the device's signal says so.
  fake_->set_ceiling_s(3 * kCeilingS);
  const TuneResult busy = Tune(P(512, 256));
  EXPECT_NE(busy.contention.find("below the device's idle"), std::string::npos) << busy.contention;
  EXPECT_NE(busy.contention.find("67% below"), std::string::npos) << busy.contention;
  const DeviceLoad l = Load();
  EXPECT_EQ(l.tune_contention, busy.contention);
  EXPECT_DOUBLE_EQ(l.tune_ceiling_gbps, busy.ceiling_gbps());
  EXPECT_DOUBLE_EQ(l.idle_ceiling_gbps, idle.ceiling_gbps());
  // No load source (no NVML): the tune's own evidence stands for it.
  EXPECT_EQ(l.state, LoadState::kBusy);
  // Stored with its mark.
  auto stored = store_->Lookup(busy.device.Fingerprint(), busy.problem);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->contention, busy.contention);
}

TEST_F(PoliteTest, TheIdleCeilingsAreRecalledFromTheStoreAtStart) {
  Start();
  EXPECT_EQ(Tune(P(256, 512)).contention, "");
  // A restart on the same store, with a job on the device from the start.
  Start(3 * kCeilingS);
  const TuneResult busy = Tune(P(512, 256));
  EXPECT_NE(busy.contention.find("below the device's idle"), std::string::npos) << busy.contention;
  EXPECT_GT(Load().idle_ceiling_gbps, 0);
}

TEST_F(PoliteTest, NoJudgementWithoutANearIdleSizeOrWhenTurnedOff) {
  Start();
  EXPECT_EQ(Tune(P(256, 512)).contention, "");
  fake_->set_ceiling_s(3 * kCeilingS);
  // 64x the bytes: no idle size near enough to say what the device reaches there.
  EXPECT_EQ(Tune(P(2048, 4096)).contention, "");
  EXPECT_EQ(Load().idle_ceiling_gbps, 0);
  // --contention-ceiling-drop 0: not judged.
  Start(3 * kCeilingS, 0);
  EXPECT_EQ(Tune(P(512, 256)).contention, "");
}

}  // namespace
}  // namespace transposed
