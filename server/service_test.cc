#include "server/service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "server/tune_many.h"
#include "store/entry_validation.h"
#include "store/store.h"
#include "tuner/fake_backend.h"

namespace transposed {
namespace {

using namespace std::chrono_literals;

// What every TrackingBackend of a test shares: open sessions (to prove tunes never overlap) and a
// gate that holds every Check until released (to keep a tune "running" as long as a test needs).
struct Tracker {
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;
  int active = 0;
  int max_active = 0;
  int opens = 0;

  void Hold() {
    std::lock_guard<std::mutex> l(mu);
    held = true;
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu);
    held = false;
    cv.notify_all();
  }
  // Waits until at least `n` sessions are open; false after 10 s.
  bool WaitActive(int n) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 10s, [&] { return active >= n; });
  }
  int Get(int Tracker::*field) {
    std::lock_guard<std::mutex> l(mu);
    return this->*field;
  }
};

class TrackingSession : public Session {
 public:
  TrackingSession(std::unique_ptr<Session> inner, std::shared_ptr<Tracker> t)
      : inner_(std::move(inner)), t_(std::move(t)) {
    std::lock_guard<std::mutex> l(t_->mu);
    ++t_->active;
    t_->max_active = std::max(t_->max_active, t_->active);
    t_->cv.notify_all();
  }
  ~TrackingSession() override {
    std::lock_guard<std::mutex> l(t_->mu);
    --t_->active;
    t_->cv.notify_all();
  }
  Status Check(const Candidate& c) override {
    {
      std::unique_lock<std::mutex> l(t_->mu);
      t_->cv.wait(l, [&] { return !t_->held; });
    }
    return inner_->Check(c);
  }
  StatusOr<Measurement> Measure(const Candidate& c, const MeasureOptions& o) override {
    return inner_->Measure(c, o);
  }
  StatusOr<Measurement> MeasureCeiling(const MeasureOptions& o) override {
    return inner_->MeasureCeiling(o);
  }

 private:
  std::unique_ptr<Session> inner_;
  std::shared_ptr<Tracker> t_;
};

class TrackingBackend : public Backend {
 public:
  TrackingBackend(std::unique_ptr<FakeBackend> inner, std::shared_ptr<Tracker> t)
      : inner_(std::move(inner)), t_(std::move(t)) {}
  const DeviceInfo& device() const override { return inner_->device(); }
  std::vector<Candidate> Candidates(const Problem& p) const override {
    return inner_->Candidates(p);
  }
  StatusOr<std::unique_ptr<Session>> Open(const Problem& p) override {
    {
      std::lock_guard<std::mutex> l(t_->mu);
      ++t_->opens;
    }
    TR_ASSIGN_OR_RETURN(auto s, inner_->Open(p));
    return std::unique_ptr<Session>(new TrackingSession(std::move(s), t_));
  }

 private:
  std::unique_ptr<FakeBackend> inner_;
  std::shared_ptr<Tracker> t_;
};

std::vector<FakeCandidate> ThreeCandidates(double check_sleep_s = 0) {
  std::vector<FakeCandidate> c = {{"slow", {4e-3}}, {"fast", {1e-3}}, {"medium", {2e-3}}};
  for (auto& f : c) f.check_sleep_s = check_sleep_s;
  return c;
}

std::unique_ptr<Backend> MakeTracked(std::shared_ptr<Tracker> t,
                                     std::vector<FakeCandidate> candidates,
                                     const std::string& uuid = "fake-0") {
  auto fake = std::make_unique<FakeBackend>(std::move(candidates));
  fake->mutable_device().uuid = uuid;
  return std::make_unique<TrackingBackend>(std::move(fake), std::move(t));
}

Problem P(int64_t rows, int64_t cols, DType dtype = DType::kF32) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = dtype;
  return p;
}

ConfigRequest Req(const Problem& p, bool cache_only = false) {
  ConfigRequest r;
  r.problem = p;
  r.cache_only = cache_only;
  return r;
}

ServiceOptions FastOptions() {
  ServiceOptions o;
  o.tune_budget_seconds = 30;
  o.tune.quick = {0, 1, 0, 1};
  o.tune.final = {0, 1, 0, 1};
  return o;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  // One device (or more) of tracked fakes.
  void Start(std::vector<FakeCandidate> candidates = ThreeCandidates(), int devices = 1) {
    std::vector<std::unique_ptr<Backend>> backends;
    for (int i = 0; i < devices; ++i)
      backends.push_back(MakeTracked(tracker_, candidates, "fake-" + std::to_string(i)));
    auto s = TransposeService::Create(std::move(backends), store_.get(), FastOptions());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(s).value();
  }

  void TearDown() override {
    tracker_->Release();
    service_.reset();
    store_.reset();
  }

  std::shared_ptr<Tracker> tracker_ = std::make_shared<Tracker>();
  std::unique_ptr<Store> store_;
  std::unique_ptr<TransposeService> service_;
};

TEST_F(ServiceTest, MissTunesThenHitsCache) {
  Start();
  auto first = service_->GetConfig(Req(P(256, 512)));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->source, AnswerSource::kTuned);
  EXPECT_EQ(first->result.best.name, "fast");
  EXPECT_EQ(first->device_index, 0);
  EXPECT_EQ(first->result.device.uuid, "fake-0");
  EXPECT_GT(first->result.gbps(), 0);
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 1);

  auto second = service_->GetConfig(Req(P(256, 512)));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->source, AnswerSource::kCache);
  EXPECT_EQ(second->result.best.name, "fast");
  EXPECT_EQ(second->result.tuned_at_unix_ms, first->result.tuned_at_unix_ms);
  EXPECT_DOUBLE_EQ(second->result.gbps(), first->result.gbps());
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 1);  // no second tune

  // An equivalent problem (dense ld written out) shares the cache entry.
  Problem dense = P(256, 512);
  dense.ld_in = 512;
  dense.ld_out = 256;
  auto third = service_->GetConfig(Req(dense));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->source, AnswerSource::kCache);

  ServiceCounters c = service_->counters();
  EXPECT_EQ(c.tunes_started, 1);
  EXPECT_EQ(c.tunes_completed, 1);
  EXPECT_EQ(c.tunes_failed, 0);
  EXPECT_EQ(c.cache_misses, 1);
  EXPECT_EQ(c.cache_hits, 2);

  auto entries = service_->ListEntries(EntryQuery{}, /*include_candidates=*/true, 0);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].best.name, "fast");
  EXPECT_EQ((*entries)[0].device.index, 0);
  EXPECT_EQ((*entries)[0].candidates.size(), 3u);
}

TEST_F(ServiceTest, CacheOnlyMissIsNotFoundAndDoesNotTune) {
  Start();
  auto r = service_->GetConfig(Req(P(64, 64), /*cache_only=*/true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("CACHE_ONLY"), std::string::npos);
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 0);
  EXPECT_EQ(service_->counters().tunes_started, 0);
  EXPECT_EQ(service_->counters().cache_misses, 1);

  ASSERT_TRUE(service_->GetConfig(Req(P(64, 64))).ok());
  auto hit = service_->GetConfig(Req(P(64, 64), /*cache_only=*/true));
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->source, AnswerSource::kCache);
}

TEST_F(ServiceTest, ConcurrentRequestsForOneProblemShareOneTune) {
  Start();
  tracker_->Hold();  // the tune cannot finish before all 32 requests have joined it
  constexpr int kThreads = 32;
  std::vector<std::future<StatusOr<ConfigAnswer>>> futures;
  for (int i = 0; i < kThreads; ++i)
    futures.push_back(
        std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(1024, 768))); }));
  // Every request counts its miss once it has joined (or started) the tune.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (service_->counters().cache_misses < kThreads &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(service_->counters().cache_misses, kThreads);
  ASSERT_TRUE(tracker_->WaitActive(1));
  tracker_->Release();

  std::set<int64_t> tuned_at;
  for (auto& f : futures) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->source, AnswerSource::kTuned);
    EXPECT_EQ(r->result.best.name, "fast");
    tuned_at.insert(r->result.tuned_at_unix_ms);
  }
  EXPECT_EQ(tuned_at.size(), 1u);  // one and the same tune
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 1);
  EXPECT_EQ(service_->counters().tunes_started, 1);
  EXPECT_EQ(service_->counters().tunes_completed, 1);
}

TEST_F(ServiceTest, TunesOfDifferentProblemsOnOneDeviceNeverOverlap) {
  Start(ThreeCandidates(/*check_sleep_s=*/0.003));
  std::vector<std::future<StatusOr<ConfigAnswer>>> futures;
  for (int i = 0; i < 16; ++i) {
    const Problem p = P(100 + 10 * (i % 4), 200);
    futures.push_back(
        std::async(std::launch::async, [this, p] { return service_->GetConfig(Req(p)); }));
  }
  for (auto& f : futures) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(tracker_->Get(&Tracker::max_active), 1);
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 4);  // one tune per distinct problem
  EXPECT_EQ(service_->counters().tunes_started, 4);
}

TEST_F(ServiceTest, LookupsDoNotWaitBehindARunningTune) {
  Start();
  ASSERT_TRUE(service_->GetConfig(Req(P(32, 32))).ok());
  tracker_->Hold();
  auto blocked =
      std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(4096, 64))); });
  ASSERT_TRUE(tracker_->WaitActive(1));  // the tune of 4096x64 is running (and held)

  auto lookup = std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(32, 32))); });
  ASSERT_EQ(lookup.wait_for(5s), std::future_status::ready) << "a cache hit waited for a tune";
  auto hit = lookup.get();
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->source, AnswerSource::kCache);
  // A CACHE_ONLY miss doesn't wait either, nor do the listings.
  auto miss = service_->GetConfig(Req(P(8, 8), /*cache_only=*/true));
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(service_->ListEntries(EntryQuery{}, false, 0).ok());
  EXPECT_EQ(blocked.wait_for(0s), std::future_status::timeout);

  tracker_->Release();
  auto tuned = blocked.get();
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->source, AnswerSource::kTuned);
}

void ExpectError(const StatusOr<ConfigAnswer>& r, StatusCode code, const std::string& prefix) {
  ASSERT_FALSE(r.ok()) << "expected " << StatusCodeName(code) << " " << prefix;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_EQ(r.status().message().rfind(prefix, 0), 0u) << r.status().ToString();
}

TEST_F(ServiceTest, BadInputsGiveTheRightCodesAndFieldNames) {
  Start();
  ExpectError(service_->GetConfig(Req(P(0, 4))), StatusCode::kInvalidArgument, "problem.rows:");
  ExpectError(service_->GetConfig(Req(P(4, -1))), StatusCode::kInvalidArgument, "problem.cols:");
  Problem batch0 = P(4, 4);
  batch0.batch = 0;
  ExpectError(service_->GetConfig(Req(batch0)), StatusCode::kInvalidArgument, "problem.batch:");
  Problem ld = P(4, 8);
  ld.ld_in = 7;
  ExpectError(service_->GetConfig(Req(ld)), StatusCode::kInvalidArgument, "problem.ld_in:");
  Problem ldo = P(4, 8);
  ldo.ld_out = 3;
  ExpectError(service_->GetConfig(Req(ldo)), StatusCode::kInvalidArgument, "problem.ld_out:");
  Problem huge = P(int64_t{1} << 40, int64_t{1} << 40);
  ExpectError(service_->GetConfig(Req(huge)), StatusCode::kInvalidArgument, "problem.rows");
  // 20000 x 20000 f32: 1.6 GB in and 1.6 GB out; the fake device holds 1 GiB.
  ExpectError(service_->GetConfig(Req(P(20000, 20000))), StatusCode::kResourceExhausted,
              "problem.rows, problem.cols:");

  ConfigRequest by_index = Req(P(4, 4));
  by_index.device.index = 3;
  ExpectError(service_->GetConfig(by_index), StatusCode::kNotFound,
              "problem.device: no device with index 3 (this daemon has 1: 0=fake 'Fake Device'");
  ConfigRequest by_uuid = Req(P(4, 4));
  by_uuid.device.uuid = "GPU-nope";
  ExpectError(service_->GetConfig(by_uuid), StatusCode::kNotFound,
              "problem.device: no device with uuid 'GPU-nope'");
  ForcedTuneRequest tune;
  tune.problem = P(4, 4);
  tune.device.index = -1;
  auto t = service_->Tune(tune, nullptr);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  // The proto path (dtype names are parsed there, with the same field names): convert_test.

  EXPECT_EQ(tracker_->Get(&Tracker::opens), 0);  // nothing bad ever reached a backend
}

TEST_F(ServiceTest, NoCandidatesIsRefused) {
  Start(std::vector<FakeCandidate>{});
  auto r = service_->GetConfig(Req(P(16, 16)));
  ExpectError(r, StatusCode::kInvalidArgument, "problem: no kernel configuration");
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 0);
}

TEST_F(ServiceTest, DevicesByIndexAndUuid) {
  Start(ThreeCandidates(), /*devices=*/2);
  auto devices = service_->ListDevices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].index, 0);
  EXPECT_EQ(devices[1].index, 1);
  EXPECT_NE(devices[0].Fingerprint(), devices[1].Fingerprint());
  ConfigRequest r = Req(P(128, 128));
  r.device.uuid = "fake-1";
  auto a = service_->GetConfig(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->device_index, 1);
  EXPECT_EQ(a->result.device.uuid, "fake-1");
  EXPECT_EQ(a->measured_on.uuid, "fake-1");
  // The two fake devices are two instances of one device class (they differ only in their
  // UUID): device 0 is served what device 1 measured, and told where it was measured.
  ConfigRequest r0 = Req(P(128, 128), /*cache_only=*/true);
  r0.device.index = 0;
  auto shared = service_->GetConfig(r0);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_EQ(shared->device_index, 0);
  EXPECT_EQ(shared->result.device.uuid, "fake-0");
  EXPECT_EQ(shared->measured_on.uuid, "fake-1");
  EXPECT_EQ(shared->measured_on.index, 1);
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 1);  // one tune for both
  r.cache_only = true;
  EXPECT_TRUE(service_->GetConfig(r).ok());

  EntryQuery on1;
  on1.device = DeviceRef{1, std::nullopt};
  auto entries = service_->ListEntries(on1, false, 0);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].device.index, 1);
  EntryQuery on0;  // the entries a device is served: its class's
  on0.device = DeviceRef{0, std::nullopt};
  EXPECT_EQ(service_->ListEntries(on0, false, 0)->size(), 1u);
}

TEST_F(ServiceTest, DeleteEntries) {
  Start();
  ASSERT_TRUE(service_->GetConfig(Req(P(16, 16))).ok());
  ASSERT_TRUE(service_->GetConfig(Req(P(16, 16, DType::kF16))).ok());

  auto refused = service_->DeleteEntries(EntryQuery{}, /*all=*/false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "filter: empty filter deletes everything; set all=true");
  EXPECT_EQ(service_->ListEntries(EntryQuery{}, false, 0)->size(), 2u);

  EntryQuery bad;
  bad.device = DeviceRef{5, std::nullopt};
  auto nf = service_->DeleteEntries(bad, false);
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nf.status().message().rfind("filter.device: no device with index 5", 0), 0u);

  // A device (its class) and a fingerprint of no instance of it: both must match, so nothing.
  EntryQuery disjoint;
  disjoint.device = DeviceRef{0, std::nullopt};
  disjoint.filter.device_fingerprint = "ffffffffffffffff";
  auto none = service_->DeleteEntries(disjoint, false);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, 0);

  EntryQuery f16;
  f16.filter.dtype = DType::kF16;
  auto one = service_->DeleteEntries(f16, false);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, 1);
  auto rest = service_->DeleteEntries(EntryQuery{}, /*all=*/true);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*rest, 1);
  EXPECT_TRUE(service_->ListEntries(EntryQuery{}, false, 0)->empty());
  // Gone from the cache: the next request tunes again.
  auto again = service_->GetConfig(Req(P(16, 16)));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, AnswerSource::kTuned);
}

TEST_F(ServiceTest, ForcedTuneStreamsProgressBeforeTheAnswer) {
  Start();
  ASSERT_TRUE(service_->GetConfig(Req(P(64, 32))).ok());
  ForcedTuneRequest req;
  req.problem = P(64, 32);
  std::vector<std::pair<int, int>> seen;
  std::set<std::string> names;
  bool caller_thread = false;
  const auto me = std::this_thread::get_id();
  // The blocking Tune returns after the answer callback, which comes after every progress call:
  // no synchronisation needed for `seen`.
  auto r = service_->Tune(req, [&](const CandidateResult& c, int index, int total) {
    if (std::this_thread::get_id() == me) caller_thread = true;
    seen.emplace_back(index, total);
    names.insert(c.candidate.name);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source, AnswerSource::kTuned);
  EXPECT_FALSE(caller_thread);  // the device's tune thread calls it; nobody waits on a thread
  EXPECT_GE(seen.size(), 3u);  // every candidate at least once
  EXPECT_EQ(names, (std::set<std::string>{"slow", "fast", "medium"}));
  for (auto [index, total] : seen) {
    EXPECT_GE(index, 1);
    EXPECT_LE(index, total);
    EXPECT_EQ(total, 3);
  }
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 2);  // forced: tuned although cached
  EXPECT_EQ(service_->counters().tunes_completed, 2);
  auto cached = service_->GetConfig(Req(P(64, 32)));
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->result.tuned_at_unix_ms, r->result.tuned_at_unix_ms);  // the new tune saved
}

TEST_F(ServiceTest, GetConfigJoinsAQueuedForcedTune) {
  Start();
  tracker_->Hold();
  ForcedTuneRequest req;
  req.problem = P(48, 48);
  auto forced = std::async(std::launch::async, [&] { return service_->Tune(req, nullptr); });
  ASSERT_TRUE(tracker_->WaitActive(1));
  auto joined =
      std::async(std::launch::async, [&] { return service_->GetConfig(Req(req.problem)); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (service_->counters().cache_misses < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  tracker_->Release();
  auto a = forced.get();
  auto b = joined.get();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->result.tuned_at_unix_ms, b->result.tuned_at_unix_ms);
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 1);
}

TEST_F(ServiceTest, ADetachedRequestLeavesItsTuneRunningAndStored) {
  Start();
  tracker_->Hold();
  std::atomic<int> a_answers{0};
  auto a = service_->StartGetConfig(Req(P(300, 300)), nullptr,
                                    [&](StatusOr<ConfigAnswer>) { a_answers.fetch_add(1); });
  ASSERT_NE(a, nullptr);  // waiting for the tune
  auto b = std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(300, 300))); });
  ASSERT_TRUE(tracker_->WaitActive(1));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (service_->counters().cache_misses < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  service_->Detach(a);
  tracker_->Release();
  auto rb = b.get();  // the other request still gets the shared tune's answer
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(service_->counters().tunes_completed, 1);
  EXPECT_EQ(a_answers.load(), 0);

  // A lone request that goes away: its tune still runs to the end and is stored.
  tracker_->Hold();
  std::atomic<int> c_answers{0};
  auto c = service_->StartGetConfig(Req(P(500, 500)), nullptr,
                                    [&](StatusOr<ConfigAnswer>) { c_answers.fetch_add(1); });
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(tracker_->WaitActive(1));
  service_->Detach(c);
  tracker_->Release();
  const auto stored = std::chrono::steady_clock::now() + 10s;
  while (service_->counters().tunes_completed < 2 && std::chrono::steady_clock::now() < stored)
    std::this_thread::sleep_for(1ms);
  auto again = service_->GetConfig(Req(P(500, 500), /*cache_only=*/true));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->source, AnswerSource::kCache);
  EXPECT_EQ(service_->counters().tunes_failed, 0);
  EXPECT_EQ(service_->counters().tunes_completed, 2);
  EXPECT_EQ(c_answers.load(), 0);
  service_->Detach(nullptr);  // harmless
}

TEST_F(ServiceTest, CacheHitsAndErrorsAnswerOnTheCallingThread) {
  Start();
  ASSERT_TRUE(service_->GetConfig(Req(P(40, 40))).ok());
  const auto me = std::this_thread::get_id();
  std::optional<std::thread::id> where;
  StatusOr<ConfigAnswer> got = Status::Internal("not called");
  auto w = service_->StartGetConfig(Req(P(40, 40)), nullptr, [&](StatusOr<ConfigAnswer> a) {
    where = std::this_thread::get_id();
    got = std::move(a);
  });
  EXPECT_EQ(w, nullptr);
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(*where, me);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->source, AnswerSource::kCache);

  where.reset();
  w = service_->StartGetConfig(Req(P(0, 40)), nullptr, [&](StatusOr<ConfigAnswer> a) {
    where = std::this_thread::get_id();
    got = std::move(a);
  });
  EXPECT_EQ(w, nullptr);
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, ShutdownCancelsATuneInFlightPromptly) {
  // 200 candidates of 20 ms each: a 4 s tune, cancellable between candidates.
  std::vector<FakeCandidate> many;
  for (int i = 0; i < 200; ++i) {
    FakeCandidate c{"c" + std::to_string(i), {1e-3}};
    c.check_sleep_s = 0.02;
    many.push_back(c);
  }
  Start(many);
  // A cached answer, saved directly (tuning it here would take the whole 4 s).
  TuneResult saved;
  saved.problem = P(8, 8, DType::kU8);
  saved.device = service_->ListDevices()[0];
  saved.best = Candidate{"c0", {{"index", 0}}};
  saved.best_measurement = Measurement::FromSamples({1e-3}, 0, {});
  saved.ceiling = Measurement::FromSamples({5e-4}, 0, {});
  saved.tried = saved.valid = 1;
  saved.tuned_at_unix_ms = 1234;
  ASSERT_TRUE(store_->SaveTune(saved).ok());
  auto inflight =
      std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(90, 90))); });
  ForcedTuneRequest queued;
  queued.problem = P(91, 91);
  auto waiting = std::async(std::launch::async, [&] { return service_->Tune(queued, nullptr); });
  ASSERT_TRUE(tracker_->WaitActive(1));
  const auto t0 = std::chrono::steady_clock::now();
  service_->Shutdown();
  const auto shutdown_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(shutdown_s, 2.0);
  ASSERT_EQ(inflight.wait_for(2s), std::future_status::ready);
  ASSERT_EQ(waiting.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(inflight.get().status().code(), StatusCode::kCancelled);
  EXPECT_EQ(waiting.get().status().code(), StatusCode::kCancelled);
  // After shutdown, anything that would tune is refused; cached answers are still served.
  EXPECT_EQ(service_->GetConfig(Req(P(92, 92))).status().code(), StatusCode::kCancelled);
  auto cached = service_->GetConfig(Req(P(8, 8, DType::kU8)));
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_EQ(cached->source, AnswerSource::kCache);
  EXPECT_EQ(cached->result.best.name, "c0");
  EXPECT_EQ(service_->counters().tunes_completed, 0);
  EXPECT_EQ(tracker_->Get(&Tracker::active), 0);
  service_->Shutdown();  // idempotent
}

TEST(ServiceCreateTest, RegistersDevicesAndRejectsNoBackends) {
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto none = TransposeService::Create({}, store->get(), ServiceOptions{});
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);

  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<FakeBackend>(ThreeCandidates()));
  auto s = TransposeService::Create(std::move(backends), store->get(), ServiceOptions{});
  ASSERT_TRUE(s.ok());
  auto devices = (*store)->Devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].Fingerprint(), (*s)->ListDevices()[0].Fingerprint());
}

}  // namespace
}  // namespace transposed

namespace transposed {
namespace {

TEST_F(ServiceTest, TuneBudgetMustBeFiniteAndBounded) {
  Start();
  for (double bad : {-1.0, std::nan(""), HUGE_VAL, kMaxTuneBudgetSeconds + 1}) {
    ForcedTuneRequest r;
    r.problem = P(64, 64);
    r.budget_seconds = bad;
    auto a = service_->Tune(r, nullptr);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(a.status().message().rfind("budget_seconds: must be >= 0", 0), 0u)
        << a.status().message();
  }
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 0);
}

}  // namespace
}  // namespace transposed

namespace transposed {
namespace {

// The tune queue of a device is bounded: a new tune beyond it is refused at once with a retry
// hint, while joining a queued tune and cache lookups keep working.
TEST_F(ServiceTest, TuneQueuePerDeviceIsBounded) {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(MakeTracked(tracker_, ThreeCandidates()));
  ServiceOptions o = FastOptions();
  o.max_queued_tunes = 2;
  auto s = TransposeService::Create(std::move(backends), store_.get(), o);
  ASSERT_TRUE(s.ok());
  service_ = std::move(s).value();
  ASSERT_TRUE(service_->GetConfig(Req(P(16, 16))).ok());

  tracker_->Hold();
  std::vector<std::future<StatusOr<ConfigAnswer>>> pending;
  pending.push_back(std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(64, 8))); }));
  ASSERT_TRUE(tracker_->WaitActive(1));  // running
  for (int64_t rows : {65, 66})          // queued
    pending.push_back(
        std::async(std::launch::async, [&, rows] { return service_->GetConfig(Req(P(rows, 8))); }));
  std::this_thread::sleep_for(200ms);
  auto refused = service_->GetConfig(Req(P(67, 8)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("2 tunes are already queued"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("retry in about"), std::string::npos);
  ForcedTuneRequest forced;
  forced.problem = P(68, 8);
  EXPECT_EQ(service_->Tune(forced, nullptr).status().code(), StatusCode::kResourceExhausted);
  // Joining a queued tune is not a new tune; a hit is not a tune at all.
  pending.push_back(std::async(std::launch::async, [&] { return service_->GetConfig(Req(P(65, 8))); }));
  auto hit = service_->GetConfig(Req(P(16, 16)));
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  tracker_->Release();
  for (auto& f : pending) {
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
  // With the queue drained, the refused problem tunes.
  EXPECT_TRUE(service_->GetConfig(Req(P(67, 8))).ok());
}

TEST_F(ServiceTest, ListEntriesIsPaginatedNewestFirst) {
  Start();
  for (int64_t rows = 1; rows <= 25; ++rows) ASSERT_TRUE(service_->GetConfig(Req(P(rows, 4))).ok());
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  int64_t last_tuned = std::numeric_limits<int64_t>::max();
  do {
    auto page = service_->ListEntryPage(EntryQuery{}, false, 10, token);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ++pages;
    ASSERT_LE(page->entries.size(), 10u);
    ASSERT_EQ(page->resume_tokens.size(), page->entries.size());
    for (const auto& e : page->entries) {
      EXPECT_LE(e.tuned_at_unix_ms, last_tuned);
      last_tuned = e.tuned_at_unix_ms;
      seen.push_back(e.problem.Key());
    }
    token = page->more ? page->resume_tokens.back() : "";
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen.size(), 25u);
  // The default page and the cap.
  auto all = service_->ListEntryPage(EntryQuery{}, false, 0, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->entries.size(), 25u);
  EXPECT_FALSE(all->more);
  EXPECT_EQ(service_->ListEntryPage(EntryQuery{}, false, -1, "").status().code(),
            StatusCode::kInvalidArgument);
  auto bad = service_->ListEntryPage(EntryQuery{}, false, 10, "e1.12x.3");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("page_token: ", 0), 0u);
}

// Pages are bounded by bytes as well as by count (issue 22: one entry of many candidates made a
// ListEntries answer of 11.9 MB): with candidates included, a page ends near kMaxEntryPageBytes
// whatever the page size asked, and the pages still walk every entry once.
TEST_F(ServiceTest, ListPagesEndNearThePageBytesWhateverTheEntriesHold) {
  std::vector<FakeCandidate> many;
  for (int i = 0; i < 2000; ++i) {
    const std::string name(180, static_cast<char>('a' + i % 26));
    many.push_back({"c" + name + "." + std::to_string(i), {1e-3 + i * 1e-7}});
  }
  Start(many);
  const int kEntries = 10;
  for (int64_t rows = 1; rows <= kEntries; ++rows)
    ASSERT_TRUE(service_->GetConfig(Req(P(rows, 4))).ok());
  auto first = service_->ListEntryPage(EntryQuery{}, true, 1, "");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->entries.size(), 1u);
  const size_t entry_bytes = ApproxEntryBytes(first->entries[0]);
  // The premise: all the entries together are well over one page.
  ASSERT_GT(kEntries * entry_bytes, 3 * kMaxEntryPageBytes / 2) << entry_bytes;
  std::set<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = service_->ListEntryPage(EntryQuery{}, true, kMaxPageSize, token);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_FALSE(page->entries.empty());
    ++pages;
    size_t bytes = 0;
    for (const auto& e : page->entries) {
      bytes += ApproxEntryBytes(e);
      EXPECT_EQ(e.candidates.size(), many.size());
      EXPECT_TRUE(seen.insert(e.problem.Key()).second) << e.problem.Key();
    }
    EXPECT_LE(bytes, kMaxEntryPageBytes + entry_bytes) << "page " << pages;
    token = page->more ? page->resume_tokens.back() : "";
  } while (!token.empty() && pages < 2 * kEntries);
  EXPECT_GE(pages, 2);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kEntries));
}

// Property: the page-token parser accepts exactly what EntryPageToken writes.
TEST(EntryPageTokenTest, RoundTripsAndRefusesEverythingElse) {
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 5000; ++i) {
    EntryCursor c{static_cast<int64_t>(rng() % 4102444800000ULL),
                  static_cast<int64_t>(rng() % 1000000000ULL)};
    auto back = ParseEntryPageToken(EntryPageToken(c));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->tuned_at_unix_ms, c.tuned_at_unix_ms);
    EXPECT_EQ(back->id, c.id);
  }
  const std::string alphabet = "e1.0123456789-+x \n\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 30, ' ');
    for (char& ch : s) ch = alphabet[rng() % alphabet.size()];
    auto r = ParseEntryPageToken(s);
    if (r.ok()) {
      EXPECT_EQ(EntryPageToken(*r).size() <= s.size(), true) << s;
      EXPECT_GE(r->id, 0);
      EXPECT_GE(r->tuned_at_unix_ms, 0);
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    }
  }
  for (const char* bad : {"", "e1.", "e1.1", "e1..1", "e1.1.", "e2.1.1", "e1.-1.1", "e1.1.1.1",
                          "e1.1234567890123456789.1"})
    EXPECT_FALSE(ParseEntryPageToken(bad).ok()) << bad;
}

}  // namespace
}  // namespace transposed

namespace transposed {
namespace {

// A forced re-tune whose budget reaches only the first candidate keeps the cached winner (it is
// measured side by side), and the answer says how many candidates the budget allowed.
TEST_F(ServiceTest, ReTuneWithASmallBudgetNeverDowngrades) {
  std::vector<FakeCandidate> cands = {{"slow", {4e-3}}, {"medium", {2e-3}}, {"fast", {1e-3}}};
  for (auto& c : cands) c.check_sleep_s = 0.02;
  Start(cands);
  auto first = service_->GetConfig(Req(P(128, 128)));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->result.best.name, "fast");
  ForcedTuneRequest again;
  again.problem = P(128, 128);
  again.budget_seconds = 0.001;
  auto r = service_->Tune(again, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->result.best.name, "fast");
  EXPECT_TRUE(r->result.incumbent_kept);
  EXPECT_EQ(r->result.total, 3);
  EXPECT_EQ(r->result.tried, 2);
  auto cached = service_->GetConfig(Req(P(128, 128), /*cache_only=*/true));
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->result.best.name, "fast");
}

// TuneManyRun (server/tune_many.h), without gRPC: problems answered in order, each started only
// after the previous one's answer (the repeated problem is a cache hit, not a join of the first
// one's tune), candidate results reported for the tuned problem only, a bad problem answered with
// its error while the run goes on, and the end once all are answered.
TEST_F(ServiceTest, TuneManyRunAnswersOneProblemAfterTheOther) {
  Start();
  ASSERT_TRUE(service_->GetConfig(Req(P(32, 32))).ok());
  std::mutex mu;
  std::vector<std::string> events;
  std::promise<Status> ended;
  TuneManyRequest request;
  request.problems = {P(32, 32), P(48, 64), P(0, 8), P(48, 64)};
  request.devices.resize(request.problems.size());
  TuneManyCallbacks callbacks;
  callbacks.progress = [&](int i, const CandidateResult&, int, int) {
    std::lock_guard<std::mutex> l(mu);
    if (events.empty() || events.back() != "progress " + std::to_string(i))
      events.push_back("progress " + std::to_string(i));
  };
  callbacks.answer = [&](int i, const StatusOr<ConfigAnswer>& a, int index, int total) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(std::to_string(i) + " " +
                     (!a.ok()                               ? StatusCodeName(a.status().code())
                      : a->source == AnswerSource::kCache ? std::string("cache")
                                                          : std::string("tuned")));
    // The index and total of the problem's last candidate result: none for a hit or an error.
    if (!a.ok() || a->source == AnswerSource::kCache) EXPECT_EQ(total, 0) << i;
    if (a.ok() && a->source == AnswerSource::kTuned) {
      EXPECT_EQ(total, 3) << i;
      EXPECT_GE(index, 1) << i;
    }
    return true;
  };
  callbacks.end = [&](const Status& s) { ended.set_value(s); };
  auto run = TuneManyRun::Create(service_.get(), request, callbacks);
  run->Start();
  auto end = ended.get_future();
  ASSERT_EQ(end.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(end.get().ok());
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(events, (std::vector<std::string>{"0 cache", "progress 1", "1 tuned",
                                              "2 INVALID_ARGUMENT", "3 cache"}));
  const TuneManyRun::Counts c = run->counts();
  EXPECT_EQ(c.cached, 2);
  EXPECT_EQ(c.tuned, 1);
  EXPECT_EQ(c.failed, 1);
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 2);  // the first GetConfig and problem 1
}

// Stop() (the client went away) detaches from the problem in flight, whose tune still runs to the
// end and is stored; the problems after it never start, and nothing more is reported.
TEST_F(ServiceTest, TuneManyRunStoppedDetachesAndStartsNothingMore) {
  Start();
  tracker_->Hold();
  std::atomic<int> callbacks_seen{0};
  TuneManyRequest request;
  request.problems = {P(64, 64), P(80, 64)};
  request.devices.resize(request.problems.size());
  TuneManyCallbacks callbacks;
  callbacks.progress = [&](int, const CandidateResult&, int, int) { callbacks_seen++; };
  callbacks.answer = [&](int, const StatusOr<ConfigAnswer>&, int, int) {
    callbacks_seen++;
    return true;
  };
  callbacks.end = [&](const Status&) { callbacks_seen++; };
  auto run = TuneManyRun::Create(service_.get(), request, callbacks);
  run->Start();
  ASSERT_TRUE(tracker_->WaitActive(1));
  run->Stop();
  tracker_->Release();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (service_->counters().tunes_completed < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(service_->counters().tunes_completed, 1);
  auto stored = service_->GetConfig(Req(P(64, 64), /*cache_only=*/true));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_FALSE(service_->GetConfig(Req(P(80, 64), /*cache_only=*/true)).ok());
  EXPECT_EQ(tracker_->Get(&Tracker::opens), 1);
  EXPECT_EQ(callbacks_seen.load(), 0);
  run->Stop();  // idempotent
}

}  // namespace
}  // namespace transposed
