// The service's shared-store hook (ServiceOptions::shared) with a scripted SharedFlight: a miss
// asks it before tuning; a shared result is stored (origin shared) and answered (source
// shared) without a tune; a lease or an unavailable store tunes here and publishes the winner
// (with the lease, or without one); a failed tune releases the lease; a miss waiting on another
// node's lease holds no device slot and is answered CANCELLED at shutdown; ANSWER_NOW answers at
// once and picks the shared result up when it lands. (The Redis side: fleet_flight_test.)
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "core/device_class.h"
#include "core/mutex.h"
#include "server/device_tuner.h"
#include "server/service.h"
#include "store/store.h"
#include "testing/problems.h"
#include "tuner/fake_backend.h"

namespace transposed {
namespace {

// Holds every Resolve until the test answers it; records publishes and releases.
class ScriptedFlight : public SharedFlight {
 public:
  struct Asked {
    DeviceInfo device;
    Problem problem;
    SharedResolveFn done;
  };
  void Resolve(const DeviceInfo& device, const Problem& problem, SharedResolveFn done) override {
    MutexLock l(&mu);
    asked.push_back({device, problem, std::move(done)});
  }
  void Publish(const TuneResult& result, const std::string& lease) override {
    MutexLock l(&mu);
    published.emplace_back(result, lease);
  }
  void Release(const DeviceInfo&, const Problem&, const std::string& lease) override {
    MutexLock l(&mu);
    released.push_back(lease);
  }
  void Stop() override {
    MutexLock l(&mu);
    stopped = true;
  }
  // Answers the oldest Resolve with `o` (on this thread, as the flight's thread would).
  bool Answer(SharedOutcome o) {
    SharedResolveFn done;
    {
      MutexLock l(&mu);
      if (asked.empty()) return false;
      done = std::move(asked.front().done);
      asked.erase(asked.begin());
    }
    done(std::move(o));
    return true;
  }
  size_t Pending() {
    MutexLock l(&mu);
    return asked.size();
  }
  size_t Published() {
    MutexLock l(&mu);
    return published.size();
  }

  Mutex mu;
  std::vector<Asked> asked GUARDED_BY(mu);
  std::vector<std::pair<TuneResult, std::string>> published GUARDED_BY(mu);
  std::vector<std::string> released GUARDED_BY(mu);
  bool stopped GUARDED_BY(mu) = false;
};

Problem P(int64_t rows, int64_t cols) { return MakeTestProblem(rows, cols, DType::kF32); }

class ServiceSharedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(":memory:");
    ASSERT_TRUE(store.ok());
    store_ = std::move(store).value();
  }
  void Start(std::vector<FakeCandidate> candidates = {{"slow", {4e-3}}, {"fast", {1e-3}}}) {
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(std::make_unique<FakeBackend>(std::move(candidates)));
    device_ = backends[0]->device();
    ServiceOptions o;
    o.tune_budget_seconds = 30;
    o.tune.quick = {0, 1, 0, 1};
    o.tune.final = {0, 1, 0, 1};
    o.max_queued_tunes = 2;
    o.shared = &flight_;
    auto s = TransposeService::Create(std::move(backends), store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(s).value();
  }
  std::future<StatusOr<ConfigAnswer>> Ask(const Problem& p, bool answer_now = false) {
    auto promise = std::make_shared<std::promise<StatusOr<ConfigAnswer>>>();
    ConfigRequest r;
    r.problem = p;
    r.answer_now = answer_now;
    service_->StartGetConfig(r, nullptr, [promise](StatusOr<ConfigAnswer> a) {
      promise->set_value(std::move(a));
    });
    return promise->get_future();
  }
  // The same problem measured on another node of this device's class.
  TuneResult FromAnotherNode(const Problem& p) {
    TuneResult r;
    r.problem = p;
    r.device = device_;
    r.device.uuid = "fake-node-7";
    r.best = Candidate{"fast", {{"index", 1}}};
    r.best_measurement = Measurement::FromSamples({1e-3, 1e-3, 1e-3}, 1, {});
    r.ceiling = Measurement::FromSamples({5e-4, 5e-4, 5e-4}, 1, {});
    r.tried = 2;
    r.valid = 2;
    r.tuned_at_unix_ms = 1700000000000;
    return r;
  }

  ScriptedFlight flight_;
  std::unique_ptr<Store> store_;
  DeviceInfo device_;
  std::unique_ptr<TransposeService> service_;
};

TEST_F(ServiceSharedTest, ASharedResultIsStoredAndAnsweredWithoutATune) {
  Start();
  auto answer = Ask(P(96, 64));
  ASSERT_EQ(flight_.Pending(), 1u) << "a miss asks the shared store before tuning";
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  SharedOutcome found;
  found.kind = SharedOutcome::Kind::kFound;
  found.result = FromAnotherNode(P(96, 64));
  ASSERT_TRUE(flight_.Answer(found));
  auto a = answer.get();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->source, AnswerSource::kShared);
  EXPECT_EQ(a->measured_on.uuid, "fake-node-7");
  EXPECT_EQ(a->result.device.uuid, device_.uuid) << "answered for this daemon's device";
  EXPECT_EQ(service_->counters().tunes_started, 0);
  EXPECT_EQ(flight_.Published(), 0u);
  // Stored locally: the next request is a cache hit, no second question.
  auto again = Ask(P(96, 64)).get();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, AnswerSource::kCache);
  EXPECT_EQ(flight_.Pending(), 0u);
  auto stored = store_->LookupByClass(ClassOf(device_).key, P(96, 64));
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->origin, Origin::kShared);
}

TEST_F(ServiceSharedTest, TheLeaseHolderTunesAndPublishesWithItsLease) {
  Start();
  auto answer = Ask(P(96, 64));
  auto joined = Ask(P(96, 64));  // joins the job: one question for both
  ASSERT_EQ(flight_.Pending(), 1u);
  SharedOutcome leased;
  leased.kind = SharedOutcome::Kind::kLeased;
  leased.lease = "token-1";
  ASSERT_TRUE(flight_.Answer(leased));
  auto a = answer.get();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->source, AnswerSource::kTuned);
  EXPECT_EQ(a->result.best.name, "fast");
  ASSERT_TRUE(joined.get().ok());
  EXPECT_EQ(service_->counters().tunes_started, 1);
  MutexLock l(&flight_.mu);
  ASSERT_EQ(flight_.published.size(), 1u);
  EXPECT_EQ(flight_.published[0].second, "token-1");
  EXPECT_EQ(flight_.published[0].first.best.name, "fast");
  EXPECT_EQ(flight_.published[0].first.device.uuid, device_.uuid);
}

TEST_F(ServiceSharedTest, AnUnavailableStoreTunesLocallyAndStillOffersTheWinner) {
  Start();
  auto answer = Ask(P(96, 64));
  SharedOutcome down;
  down.kind = SharedOutcome::Kind::kUnavailable;
  down.reason = "shared store unavailable: connection refused";
  ASSERT_TRUE(flight_.Answer(down));
  auto a = answer.get();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->source, AnswerSource::kTuned);
  MutexLock l(&flight_.mu);
  ASSERT_EQ(flight_.published.size(), 1u);
  EXPECT_EQ(flight_.published[0].second, "") << "no lease";
}

TEST_F(ServiceSharedTest, AFailedTuneReleasesTheLease) {
  FakeCandidate broken{"broken", {1e-3}};
  broken.check_status = Status::Internal("wrong output");
  Start({broken});
  auto answer = Ask(P(96, 64));
  SharedOutcome leased;
  leased.kind = SharedOutcome::Kind::kLeased;
  leased.lease = "token-2";
  ASSERT_TRUE(flight_.Answer(leased));
  EXPECT_FALSE(answer.get().ok());
  MutexLock l(&flight_.mu);
  EXPECT_TRUE(flight_.published.empty());
  ASSERT_EQ(flight_.released.size(), 1u);
  EXPECT_EQ(flight_.released[0], "token-2");
}

TEST_F(ServiceSharedTest, AWaitingMissHoldsNoDeviceSlotAndIsCancelledAtShutdown) {
  Start();
  auto waiting = Ask(P(96, 64));
  ASSERT_EQ(flight_.Pending(), 1u);
  EXPECT_EQ(service_->QueueDepths()[0], 0) << "the device is free for other work meanwhile";
  service_->Shutdown();
  auto a = waiting.get();
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kCancelled);
  MutexLock l(&flight_.mu);
  EXPECT_TRUE(flight_.stopped);
}

// A miss that waits for the class holds no place in the device's queue (a job's shape list would
// fill it with waits: issue 33); the waits are bounded apart, 32 per place.
TEST_F(ServiceSharedTest, MissesWaitingForTheClassHoldNoQueuePlaceAndAreBoundedApart) {
  Start();  // max_queued_tunes 2: at most 64 waiting
  constexpr int kBound = 2 * DeviceTuner::kWaitingPerQueueSlot;
  std::vector<std::future<StatusOr<ConfigAnswer>>> waiting;
  for (int i = 0; i < kBound; ++i) waiting.push_back(Ask(P(96, 64 + 8 * i)));
  EXPECT_EQ(flight_.Pending(), static_cast<size_t>(kBound)) << "far more than 2 wait";
  auto over = Ask(P(96, 64 + 8 * kBound)).get();
  ASSERT_FALSE(over.ok()) << "one more while the bound wait: memory stays bounded";
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("wait for the class"), std::string::npos)
      << over.status().message();
  SharedOutcome found;
  found.kind = SharedOutcome::Kind::kFound;
  found.result = FromAnotherNode(P(96, 64));
  ASSERT_TRUE(flight_.Answer(found));
  ASSERT_TRUE(waiting.front().get().ok());
  auto again = Ask(P(96, 64 + 8 * (kBound + 1)));  // room again
  EXPECT_EQ(flight_.Pending(), static_cast<size_t>(kBound));
  service_->Shutdown();
  for (size_t i = 1; i < waiting.size(); ++i)
    EXPECT_EQ(waiting[i].get().status().code(), StatusCode::kCancelled);
  EXPECT_EQ(again.get().status().code(), StatusCode::kCancelled);
}

TEST_F(ServiceSharedTest, AnswerNowAnswersAtOnceAndPicksTheSharedResultUp) {
  Start();
  auto now = Ask(P(96, 64), /*answer_now=*/true).get();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->source, AnswerSource::kHeuristic);
  ASSERT_EQ(flight_.Pending(), 1u) << "the background tune asks the class first";
  SharedOutcome found;
  found.kind = SharedOutcome::Kind::kFound;
  found.result = FromAnotherNode(P(96, 64));
  ASSERT_TRUE(flight_.Answer(found));
  auto later = Ask(P(96, 64), /*answer_now=*/true).get();
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->source, AnswerSource::kCache);
  EXPECT_EQ(later->measured_on.uuid, "fake-node-7");
  EXPECT_EQ(service_->counters().tunes_started, 0);
}

}  // namespace
}  // namespace transposed
