// DeviceTuner driven on its own: a scripted FakeBackend, an in-memory store, no service and no
// gRPC server.
#include "server/device_tuner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "server/answer_cache.h"
#include "server/polite.h"
#include "store/store.h"
#include "tuner/fake_backend.h"

namespace transposed {
namespace {

using namespace std::chrono_literals;

Problem P(int64_t rows, int64_t cols) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = DType::kF32;
  return p;
}

// One request's answer, handed from the tune thread.
struct Answer {
  std::promise<StatusOr<ConfigAnswer>> promise;
  std::future<StatusOr<ConfigAnswer>> future = promise.get_future();
  std::shared_ptr<Waiter> waiter;

  explicit Answer(ProgressFn progress = nullptr)
      : waiter(std::make_shared<Waiter>(std::move(progress), [this](StatusOr<ConfigAnswer> a) {
          promise.set_value(std::move(a));
        })) {}
  StatusOr<ConfigAnswer> Get() {
    if (future.wait_for(30s) != std::future_status::ready)
      return Status::DeadlineExceeded("no answer within 30 s");
    return future.get();
  }
};

class DeviceTunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    answers_ = std::make_unique<AnswerCache>(store_.get());
    options_.tune_budget_seconds = 30;
    options_.tune.quick = {0, 1, 0, 1};
    options_.tune.final = {0, 1, 0, 1};
    board_ = std::make_unique<LoadBoard>(1, options_.polite);
  }

  // The tuner of device 0 on a FakeBackend with three candidates; not started.
  void Make() {
    std::vector<FakeCandidate> candidates(3);
    candidates[0].name = "slow", candidates[0].times_s = {4e-3};
    candidates[1].name = "fast", candidates[1].times_s = {1e-3};
    candidates[2].name = "medium", candidates[2].times_s = {2e-3};
    auto fake = std::make_unique<FakeBackend>(std::move(candidates));
    fake_ = fake.get();
    TunerContext context;
    context.store = store_.get();
    context.answers = answers_.get();
    context.load_board = board_.get();
    context.options = &options_;
    context.local_index_of = [](const DeviceInfo& d) { return d.uuid == "fake-0" ? 0 : -1; };
    tuner_ = std::make_unique<DeviceTuner>(0, std::move(fake), std::move(context));
    ASSERT_TRUE(store_->UpsertDevice(tuner_->device()).ok());
  }

  TuneOptions Options() const {
    TuneOptions o = options_.tune;
    o.budget_seconds = options_.tune_budget_seconds;
    return o;
  }

  void TearDown() override { tuner_.reset(); }

  ServiceOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<AnswerCache> answers_;
  std::unique_ptr<LoadBoard> board_;
  FakeBackend* fake_ = nullptr;  // owned by tuner_
  std::unique_ptr<DeviceTuner> tuner_;
};

TEST_F(DeviceTunerTest, KnowsItsDevice) {
  Make();
  EXPECT_EQ(tuner_->index(), 0);
  EXPECT_EQ(tuner_->device().index, 0);
  EXPECT_EQ(tuner_->device().uuid, "fake-0");
  EXPECT_EQ(tuner_->fingerprint(), tuner_->device().Fingerprint());
  EXPECT_FALSE(tuner_->device_class().empty());
}

TEST_F(DeviceTunerTest, AMissTunesStoresAndAnswersItsWaiters) {
  Make();
  Answer a, b;
  // Both before the thread starts: the second joins the first's job.
  auto joined = tuner_->Join(P(64, 64), Options(), /*background=*/false, a.waiter);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_FALSE(joined->has_value());
  joined = tuner_->Join(P(64, 64), Options(), /*background=*/false, b.waiter);
  ASSERT_TRUE(joined.ok());
  EXPECT_FALSE(joined->has_value());
  EXPECT_EQ(tuner_->QueueDepth(), 1);
  tuner_->Start();
  for (Answer* answer : {&a, &b}) {
    auto got = answer->Get();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->source, AnswerSource::kTuned);
    EXPECT_EQ(got->result.best.name, "fast");
    EXPECT_EQ(got->device_index, 0);
    EXPECT_EQ(got->measured_on.index, 0);
  }
  EXPECT_EQ(fake_->open_calls(), 1);  // one tune for both
  const TunerCounters c = tuner_->counters();
  EXPECT_EQ(c.started, 1);
  EXPECT_EQ(c.completed, 1);
  EXPECT_EQ(c.failed, 0);
  auto stored = store_->Lookup(tuner_->fingerprint(), P(64, 64));
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ((*stored)->best.name, "fast");
  EXPECT_EQ(tuner_->QueueDepth(), 0);

  // Stored now: a later miss finds it under the tuner's lock and joins nothing.
  Answer late;
  joined = tuner_->Join(P(64, 64), Options(), false, late.waiter);
  ASSERT_TRUE(joined.ok());
  ASSERT_TRUE(joined->has_value());
  EXPECT_EQ((*joined)->best.name, "fast");
  EXPECT_EQ(tuner_->counters().started, 1);
}

TEST_F(DeviceTunerTest, TheQueueIsBoundedAndJoiningIsAlwaysPossible) {
  options_.max_queued_tunes = 1;
  Make();
  Answer a, b, c;
  ASSERT_TRUE(tuner_->Join(P(8, 8), Options(), false, a.waiter).ok());
  auto refused = tuner_->Join(P(16, 16), Options(), false, b.waiter);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-queued-tunes"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(tuner_->Join(P(8, 8), Options(), false, c.waiter).ok());  // joins
  const Status forced = tuner_->QueueForced(P(16, 16), Options(), b.waiter);
  EXPECT_EQ(forced.code(), StatusCode::kResourceExhausted);
  tuner_->Start();
  EXPECT_TRUE(a.Get().ok());
  EXPECT_TRUE(c.Get().ok());
}

TEST_F(DeviceTunerTest, AForcedTuneRunsThoughStoredAndAMissJoinsIt) {
  Make();
  tuner_->Start();
  Answer first;
  ASSERT_TRUE(tuner_->Join(P(32, 32), Options(), false, first.waiter).ok());
  ASSERT_TRUE(first.Get().ok());
  EXPECT_EQ(fake_->open_calls(), 1);

  tuner_->Stop();  // nothing held; the thread ends
  tuner_->Join();
  // A fresh tuner (its thread not started): the forced tune waits in its queue.
  Make();
  int progress = 0;
  Answer forced([&progress](const CandidateResult&, int, int) { ++progress; });
  ASSERT_TRUE(tuner_->QueueForced(P(32, 32), Options(), forced.waiter).ok());
  Answer miss;
  auto joined = tuner_->Join(P(32, 32), Options(), false, miss.waiter);
  ASSERT_TRUE(joined.ok());
  EXPECT_FALSE(joined->has_value()) << "the miss should join the forced tune in flight";
  tuner_->Start();
  auto a = forced.Get();
  auto b = miss.Get();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->source, AnswerSource::kTuned);
  EXPECT_EQ(a->result.tune_seconds, b->result.tune_seconds);  // the same tune
  EXPECT_GT(progress, 0);
  EXPECT_EQ(tuner_->counters().started, 1);
}

TEST_F(DeviceTunerTest, AJobACallerWaitsForRunsBeforeABackgroundOne) {
  Make();
  auto queued = tuner_->QueueBackground(P(8, 8));
  ASSERT_TRUE(queued.ok());
  EXPECT_FALSE(queued->has_value());
  // In flight: queued once only.
  ASSERT_TRUE(tuner_->QueueBackground(P(8, 8)).ok());
  EXPECT_EQ(tuner_->QueueDepth(), 1);
  int started_when_answered = -1;
  DeviceTuner* tuner = tuner_.get();
  auto urgent = std::make_shared<Waiter>(nullptr, [&, tuner](StatusOr<ConfigAnswer> a) {
    EXPECT_TRUE(a.ok());
    // Answered on the tune thread before it takes the next job.
    started_when_answered = static_cast<int>(tuner->counters().started);
  });
  ASSERT_TRUE(tuner_->Join(P(16, 16), Options(), false, urgent).ok());
  tuner_->Start();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (tuner_->counters().completed < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(tuner_->counters().completed, 2);
  EXPECT_EQ(started_when_answered, 1);
  auto stored = store_->Lookup(tuner_->fingerprint(), P(8, 8));
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->has_value()) << "the background tune is stored";
}

TEST_F(DeviceTunerTest, StopHandsBackWhatItHeldAndRefusesNewWork) {
  Make();
  Answer a;
  ASSERT_TRUE(tuner_->Join(P(8, 8), Options(), false, a.waiter).ok());
  ASSERT_TRUE(tuner_->QueueBackground(P(16, 16)).ok());
  std::vector<std::shared_ptr<TuneJob>> held = tuner_->Stop();
  EXPECT_EQ(held.size(), 4u);  // each queued job, again from the flight
  for (auto& job : held)
    for (auto& w : job->Finish()) w->Answer(Status::Cancelled("stopped"));
  auto got = a.Get();
  EXPECT_EQ(got.status().code(), StatusCode::kCancelled);
  Answer b;
  EXPECT_EQ(tuner_->Join(P(8, 8), Options(), false, b.waiter).status().code(),
            StatusCode::kCancelled);
  EXPECT_EQ(tuner_->QueueBackground(P(8, 8)).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(tuner_->QueueForced(P(8, 8), Options(), b.waiter).code(), StatusCode::kCancelled);
  EXPECT_TRUE(tuner_->Stop().empty());
  tuner_->Start();  // stopped: starts nothing
  tuner_->Join();
  EXPECT_EQ(fake_->open_calls(), 0);
}

TEST_F(DeviceTunerTest, ATuneThatFailsIsCountedAndAnswered) {
  Make();
  fake_->set_open_status(Status::Internal("the device fell off the bus"));
  tuner_->Start();
  Answer a;
  ASSERT_TRUE(tuner_->Join(P(8, 8), Options(), false, a.waiter).ok());
  auto got = a.Get();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("fell off the bus"), std::string::npos)
      << got.status().ToString();
  EXPECT_EQ(tuner_->counters().failed, 1);
  EXPECT_EQ(tuner_->counters().completed, 0);
}

}  // namespace
}  // namespace transposed
