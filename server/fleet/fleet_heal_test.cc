// The shared store heals (issue 33), against a real redis-server: several FleetFlights in one
// process stand for the nodes of a class, and a "tune" is a sleep then Publish(), so that each case
// counts exactly what the class did:
//   - Redis restarted (empty) while 16 idle nodes wait: each notices at once (gauge, health
//     callback), reconnects by itself with backoff, without SCRIPT LOAD storms; the next herd
//     tunes once;
//   - the holder's connection killed mid-tune (CLIENT KILL): one tune, every answer within the
//     tune + 2 s; a holder that died: the class waits at most the (short) lease;
//   - a job's shape list (16 and 50 problems asked by 8 nodes at once): spread over the nodes by
//     the lease budget;
//   - a Redis 200 ms away (DelayProxy) with the default timeout and lease: still one tune;
//   - Redis's `timeout` reaping idle connections: noticed and made again before the next miss;
//   - a publish whose round trip failed is counted unknown and carried out after all; a publish
//     that changes nothing wakes nobody.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/device_class.h"
#include "core/version.h"
#include "server/fleet/fleet_flight.h"
#include "testing/delay_proxy.h"
#include "testing/redis_process.h"

namespace transposed {
namespace {

using Clock = std::chrono::steady_clock;

DeviceInfo Node(int i) {
  DeviceInfo d;
  d.backend = "cpu";
  d.uuid = "cpu-" + std::to_string(i);
  d.name = "Test CPU 9000";
  d.memory_bytes = 1 << 30;
  d.library_version = kLibraryVersion;
  d.attributes = {{"cores", "8"}};
  return d;
}

Problem TestProblem(int i) {
  Problem p;
  p.rows = 512 + i;
  p.cols = 640;
  p.dtype = DType::kF32;
  return p;
}

TuneResult Result(const DeviceInfo& device, const Problem& problem, double median_s) {
  TuneResult r;
  r.problem = problem;
  r.device = device;
  r.best = Candidate{"tile32x32", {{"tile_rows", 32}, {"tile_cols", 32}}};
  r.best_measurement = Measurement::FromSamples({median_s, median_s, median_s}, 1, {});
  r.ceiling = Measurement::FromSamples({median_s / 2, median_s / 2, median_s / 2}, 1, {});
  r.tried = 4;
  r.valid = 4;
  r.tune_seconds = 0.5;
  r.tuned_at_unix_ms = 1700000000000;
  return r;
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A raw connection for the test's own commands (no scripts loaded: the counts stay the nodes').
std::unique_ptr<RedisConnection> Raw(int port) {
  SharedStoreOptions o;
  o.url = *ParseRedisUrl("redis://127.0.0.1:" + std::to_string(port));
  auto c = RedisConnection::Connect(o, Clock::now() + std::chrono::seconds(2),
                                    std::vector<std::string>(5, "unused"));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

RedisValue Command(int port, const std::vector<std::string>& argv) {
  auto c = Raw(port);
  if (!c) return {};
  auto r = c->Pipeline({argv}, Clock::now() + std::chrono::seconds(2));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? (*r)[0] : RedisValue{};
}

// `calls` of a command in INFO commandstats, its subcommands included (Redis 7 names them
// `script|load`).
int64_t Calls(int port, const std::string& command) {
  const std::string info = Command(port, {"INFO", "commandstats"}).str;
  int64_t n = 0;
  std::regex line("cmdstat_" + command + "(\\|[a-z]+)?:calls=([0-9]+)");
  for (auto it = std::sregex_iterator(info.begin(), info.end(), line); it != std::sregex_iterator();
       ++it)
    n += std::stoll((*it)[2]);
  return n;
}

// usec_per_call of a command in INFO commandstats (0: not called).
double UsecPerCall(int port, const std::string& command) {
  const std::string info = Command(port, {"INFO", "commandstats"}).str;
  std::smatch m;
  if (!std::regex_search(info, m,
                         std::regex("cmdstat_" + command +
                                    ":calls=[0-9]+,usec=[0-9]+,"
                                    "usec_per_call=([0-9.]+)")))
    return 0;
  return std::stod(m[1]);
}

int64_t InfoField(int port, const std::string& field) {
  const std::string info = Command(port, {"INFO", "stats"}).str;
  std::smatch m;
  if (!std::regex_search(info, m, std::regex(field + ":([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

// A node: its flight, and one worker that runs its leased tunes one after another (a device).
class TestNode {
 public:
  TestNode(int i, const std::string& url, double tune_seconds, FleetOptions base = {})
      : device_(Node(i)), tune_seconds_(tune_seconds) {
    FleetOptions o = std::move(base);
    o.store.url = *ParseRedisUrl(url);
    o.classes = {{device_.library_version, ClassOf(device_).key}};
    o.owner = device_.uuid;
    o.on_availability = [this](bool up, const std::string&) {
      std::lock_guard<std::mutex> l(mu_);
      availability_.push_back(up);
    };
    auto f = FleetFlight::Create(std::move(o));
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    flight_ = std::move(f).value();
    worker_ = std::thread([this] { Work(); });
  }
  ~TestNode() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    flight_->Stop();
  }

  // Asks for `p`; the answer (found, or tuned here) fulfils the future.
  std::shared_future<SharedOutcome::Kind> Ask(const Problem& p) {
    auto promise = std::make_shared<std::promise<SharedOutcome::Kind>>();
    std::shared_future<SharedOutcome::Kind> answer = promise->get_future().share();
    flight_->Resolve(device_, p, [this, p, promise](SharedOutcome o) {
      if (o.kind == SharedOutcome::Kind::kFound) {
        promise->set_value(o.kind);
        return;
      }
      std::lock_guard<std::mutex> l(mu_);
      if (o.kind == SharedOutcome::Kind::kUnavailable) ++unavailable_;
      queue_.push_back({p, o.lease, o.kind, promise});
      cv_.notify_all();
    });
    return answer;
  }

  int tunes() const {
    std::lock_guard<std::mutex> l(mu_);
    return tunes_;
  }
  int unavailable() const {
    std::lock_guard<std::mutex> l(mu_);
    return unavailable_;
  }
  std::vector<bool> availability() const {
    std::lock_guard<std::mutex> l(mu_);
    return availability_;
  }
  FleetFlight* flight() { return flight_.get(); }
  const DeviceInfo& device() const { return device_; }

 private:
  struct Tune {
    Problem problem;
    std::string lease;
    SharedOutcome::Kind kind;
    std::shared_ptr<std::promise<SharedOutcome::Kind>> promise;
  };
  void Work() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Tune t = std::move(queue_.front());
      queue_.pop_front();
      ++tunes_;
      l.unlock();
      std::this_thread::sleep_for(std::chrono::duration<double>(tune_seconds_));
      flight_->Publish(Result(device_, t.problem, 1e-4), t.lease);
      t.promise->set_value(t.kind);
      l.lock();
    }
  }

  const DeviceInfo device_;
  const double tune_seconds_;
  std::unique_ptr<FleetFlight> flight_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Tune> queue_;
  bool stop_ = false;
  int tunes_ = 0;
  int unavailable_ = 0;
  std::vector<bool> availability_;
  std::thread worker_;
};

std::vector<std::unique_ptr<TestNode>> Nodes(int n, const std::string& url, double tune_seconds,
                                             FleetOptions base = {}) {
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (int i = 0; i < n; ++i)
    nodes.push_back(std::make_unique<TestNode>(i, url, tune_seconds, base));
  return nodes;
}

template <typename Pred>
bool Eventually(Pred pred, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Available (and subscribed) or not, on every node.
bool AllAvailable(const std::vector<std::unique_ptr<TestNode>>& nodes, bool available) {
  for (const auto& n : nodes) {
    const FleetCounters c = n->flight()->counters();
    if (c.available != available || (available && !c.subscribed)) return false;
  }
  return true;
}

struct Herd {
  int tunes = 0;
  int unavailable = 0;
  int max_per_node = 0;
  double last_answer = 0;  // seconds after the asks
};

// Every node asks every problem at once; waits for every answer.
Herd AskAll(const std::vector<std::unique_ptr<TestNode>>& nodes, const std::vector<Problem>& ps,
            double wait_seconds = 30) {
  std::vector<int> before;
  for (const auto& n : nodes) before.push_back(n->tunes());
  std::vector<int> unavailable_before;
  for (const auto& n : nodes) unavailable_before.push_back(n->unavailable());
  const auto start = Clock::now();
  std::vector<std::shared_future<SharedOutcome::Kind>> answers;
  for (const auto& p : ps)
    for (const auto& n : nodes) answers.push_back(n->Ask(p));
  Herd h;
  for (auto& a : answers) {
    EXPECT_EQ(a.wait_until(start + std::chrono::duration<double>(wait_seconds)),
              std::future_status::ready);
  }
  h.last_answer = Since(start);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int t = nodes[i]->tunes() - before[i];
    h.tunes += t;
    h.max_per_node = std::max(h.max_per_node, t);
    h.unavailable += nodes[i]->unavailable() - unavailable_before[i];
  }
  return h;
}

class FleetHealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = redis_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  testing::RedisProcess redis_;
};

TEST_F(FleetHealTest, RedisRestartedEmptyWhileTheClassIdlesThenAHerdTunesOnce) {
  constexpr int kNodes = 16;
  auto nodes = Nodes(kNodes, redis_.url(), 0.3);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  ASSERT_EQ(AskAll(nodes, {TestProblem(0)}).tunes, 1);

  redis_.Kill();  // the nodes idle: nothing asks, nothing is written
  const auto killed = Clock::now();
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, false); }, 2))
      << "an idle node notices a dead store by itself";
  const double noticed = Since(killed);
  for (const auto& n : nodes)  // the callback runs just after the gauge changed
    EXPECT_TRUE(
        Eventually([&] { return !n->availability().empty() && !n->availability().back(); }, 1))
        << "the health callback was told";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(redis_.Start().ok());  // empty: no scripts, no results, no leases
  const auto restarted = Clock::now();
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  const double back = Since(restarted);
  // The restarted Redis saw each node connect about twice (commands, subscription) and load no
  // script: the hashes are reused, NOSCRIPT falls back to one EVAL.
  const int64_t connections = InfoField(redis_.port(), "total_connections_received");
  const Herd h = AskAll(nodes, {TestProblem(1)});
  const int64_t loads = Calls(redis_.port(), "script");
  const int64_t evals = Calls(redis_.port(), "eval");
  std::printf(
      "restart: noticed in %.3f s, all back %.3f s after the restart, %lld connections "
      "(%d nodes), herd: %d tunes, %d unavailable, SCRIPT LOAD %lld, EVAL %lld\n",
      noticed, back, static_cast<long long>(connections), kNodes, h.tunes, h.unavailable,
      static_cast<long long>(loads), static_cast<long long>(evals));
  EXPECT_LE(h.tunes, 2);
  EXPECT_EQ(h.unavailable, 0);
  EXPECT_LE(connections, 2 * kNodes + 4 /* the test's own */ + 2) << "no reconnect storm";
  EXPECT_EQ(loads, 0) << "scripts are loaded once per daemon, not per connection";
  EXPECT_LE(evals, 2 * kNodes) << "a NOSCRIPT costs one EVAL of that script";
}

TEST_F(FleetHealTest, TheHoldersConnectionKilledMidTuneCostsNoSecondTune) {
  constexpr double kTune = 1.0;
  auto nodes = Nodes(4, redis_.url(), kTune);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // connections a second old
  const auto start = Clock::now();
  std::vector<std::shared_future<SharedOutcome::Kind>> answers;
  for (const auto& n : nodes) answers.push_back(n->Ask(TestProblem(2)));
  ASSERT_TRUE(Eventually(
      [&] {
        int leases = 0;
        for (const auto& n : nodes) leases += static_cast<int>(n->flight()->counters().leases);
        return leases == 1;
      },
      2));
  int holder = 0;
  for (int i = 0; i < 4; ++i)
    if (nodes[i]->flight()->counters().leases == 1) holder = i;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Kill the holder's command connection (by its CLIENT SETNAME).
  const std::string list = Command(redis_.port(), {"CLIENT", "LIST"}).str;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      list, m, std::regex("id=([0-9]+) [^\n]*name=" + nodes[holder]->device().uuid + "/cmd ")))
      << list;
  ASSERT_EQ(Command(redis_.port(), {"CLIENT", "KILL", "ID", m[1]}).integer, 1);
  for (auto& a : answers)
    ASSERT_EQ(a.wait_until(start + std::chrono::seconds(10)), std::future_status::ready);
  const double last = Since(start);
  int tunes = 0;
  for (const auto& n : nodes) tunes += n->tunes();
  const FleetCounters c = nodes[holder]->flight()->counters();
  std::printf(
      "holder's connection killed: %d tunes, last answer %.3f s (tune %.1f s), holder "
      "reconnects %lld, leases lost %lld\n",
      tunes, last, kTune, static_cast<long long>(c.reconnects),
      static_cast<long long>(c.leases_lost));
  EXPECT_EQ(tunes, 1);
  EXPECT_LE(last, kTune + 2);
  EXPECT_EQ(c.reconnects, 1);
  EXPECT_EQ(c.leases_lost, 0);
  EXPECT_TRUE(c.available) << "one lost connection is not an outage";
}

TEST_F(FleetHealTest, AHolderThatDiedCostsTheClassAtMostTheLease) {
  auto nodes = Nodes(2, redis_.url(), 0.2);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  // A third node takes the lease and dies (its flight stops: no renewal, no release).
  FleetOptions o;
  o.store.url = *ParseRedisUrl(redis_.url());
  o.classes = {{kLibraryVersion, ClassOf(Node(9)).key}};
  o.owner = "dead";
  auto dead = std::move(FleetFlight::Create(std::move(o))).value();
  std::promise<SharedOutcome> leased;
  dead->Resolve(Node(9), TestProblem(3), [&](SharedOutcome x) { leased.set_value(x); });
  ASSERT_EQ(leased.get_future().get().kind, SharedOutcome::Kind::kLeased);
  dead->Stop();
  const Herd h = AskAll(nodes, {TestProblem(3)});
  std::printf("holder died: the class answered %.3f s later (default lease %.0f s)\n",
              h.last_answer, FleetOptions{}.lease_seconds);
  EXPECT_EQ(h.tunes, 1);
  EXPECT_LE(h.last_answer, FleetOptions{}.lease_seconds + 0.2 + 1.0);
}

// 8 nodes ask the same list at once: each takes one lease at a time.
TEST_F(FleetHealTest, AShapeListSpreadsOverTheClass) {
  constexpr int kNodes = 8;
  constexpr double kTune = 0.15;
  auto nodes = Nodes(kNodes, redis_.url(), kTune);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  std::vector<Problem> list16, list50;
  for (int i = 0; i < 16; ++i) list16.push_back(TestProblem(100 + i));
  for (int i = 0; i < 50; ++i) list50.push_back(TestProblem(200 + i));
  const Herd h16 = AskAll(nodes, list16);
  const Herd h50 = AskAll(nodes, list50);
  std::printf(
      "16 problems x %d nodes: %d tunes, at most %d on a node, %d unavailable, %.2f s\n"
      "50 problems x %d nodes: %d tunes, at most %d on a node, %.2f s (bound %.2f s)\n",
      kNodes, h16.tunes, h16.max_per_node, h16.unavailable, h16.last_answer, kNodes, h50.tunes,
      h50.max_per_node, h50.last_answer, 3 * 50.0 / kNodes * kTune);
  // What one Redis call of the class costs the server (docs/user/fleet.md's scale section).
  const double per_call = UsecPerCall(redis_.port(), "evalsha");
  const int64_t calls = Calls(redis_.port(), "evalsha") + Calls(redis_.port(), "eval");
  std::printf(
      "Redis: %lld script calls for 66 problems x %d nodes (%.1f per node per problem), "
      "%.2f us each (usec_per_call of EVALSHA)\n",
      static_cast<long long>(calls), kNodes, calls / (66.0 * kNodes), per_call);
  EXPECT_LE(h16.tunes, 18);
  EXPECT_LE(h16.max_per_node, 4);
  EXPECT_EQ(h16.unavailable, 0);
  EXPECT_LE(h50.tunes, 52);
  EXPECT_LE(h50.last_answer, 3 * (50.0 / kNodes) * kTune);
}

TEST_F(FleetHealTest, ARedis200msAwayIsStillUsedWithTheDefaults) {
  testing::DelayProxy proxy(redis_.port(), std::chrono::milliseconds(100));
  ASSERT_TRUE(proxy.Start().ok());
  auto nodes = Nodes(8, "redis://127.0.0.1:" + std::to_string(proxy.port()), 0.3);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  const Herd h = AskAll(nodes, {TestProblem(4)});
  const Herd h2 = AskAll(nodes, {TestProblem(5), TestProblem(6)});
  std::printf(
      "Redis 200 ms away, default flags: %d tune(s) for one problem (%d unavailable, "
      "%.2f s), %d for two\n",
      h.tunes, h.unavailable, h.last_answer, h2.tunes);
  EXPECT_EQ(h.tunes, 1);
  EXPECT_EQ(h.unavailable, 0);
  EXPECT_EQ(h2.tunes, 2);
  EXPECT_EQ(h2.unavailable, 0);
}

TEST_F(FleetHealTest, IdleConnectionsReapedByRedisAreMadeAgainBeforeTheNextMiss) {
  auto nodes = Nodes(2, redis_.url(), 0.1);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  ASSERT_EQ(Command(redis_.port(), {"CONFIG", "SET", "timeout", "1"}).str, "OK");
  ASSERT_TRUE(Eventually([&] { return nodes[0]->flight()->counters().reconnects >= 1; }, 5))
      << "the closed connection is noticed while idle";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Herd h = AskAll(nodes, {TestProblem(7)});
  EXPECT_EQ(h.tunes, 1);
  EXPECT_EQ(h.unavailable, 0) << "never a miss on a dead socket";
  EXPECT_TRUE(nodes[0]->flight()->counters().available);
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Down with a lease held and a write queued: the thread sleeps until its next reconnect attempt
// (a renewal or a write that cannot go out is no reason to wake).
TEST_F(FleetHealTest, DownWithALeaseHeldAndAWriteQueuedTheThreadSleeps) {
  FleetOptions o;
  o.store.url = *ParseRedisUrl(redis_.url());
  o.classes = {{kLibraryVersion, ClassOf(Node(0)).key}};
  o.owner = "holder";
  auto f = std::move(FleetFlight::Create(std::move(o))).value();
  std::promise<SharedOutcome> leased;
  f->Resolve(Node(0), TestProblem(10), [&](SharedOutcome x) { leased.set_value(x); });
  ASSERT_EQ(leased.get_future().get().kind, SharedOutcome::Kind::kLeased);
  redis_.Kill();
  f->Publish(Result(Node(0), TestProblem(11), 1e-4), "");
  ASSERT_TRUE(Eventually([&] { return !f->counters().available; }, 2));
  const double cpu = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LT(ProcessCpuSeconds() - cpu, 0.1) << "no busy loop while the store is down";
  EXPECT_EQ(f->counters().dropped, 0);
}

TEST_F(FleetHealTest, AFailedRoundTripIsCountedUnknownAndTheWriteCarriedOutLater) {
  FleetOptions base;
  base.store.timeout_seconds = 0.1;
  auto nodes = Nodes(1, redis_.url(), 0.1, base);
  FleetFlight* f = nodes[0]->flight();
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  redis_.Pause();
  f->Publish(Result(nodes[0]->device(), TestProblem(8), 1e-4), "");
  ASSERT_TRUE(Eventually([&] { return f->counters().unknown >= 1; }, 2));
  redis_.Resume();
  // Carried out once the store answers again: by the first attempt (Redis read it from the
  // socket when it resumed: written) or by the second (then `kept`: as fast as the stored one).
  ASSERT_TRUE(Eventually(
      [&] { return f->counters().published_written + f->counters().published_kept >= 1; }, 10))
      << "kept across the reconnect";
  EXPECT_EQ(f->counters().dropped, 0);
  const SharedKeys keys =
      SharedKeysFor(kLibraryVersion, ClassOf(nodes[0]->device()).key, TestProblem(8));
  EXPECT_EQ(Command(redis_.port(), {"EXISTS", keys.result}).integer, 1);
}

// A result measured under contention (a busy GPU) never replaces the class's idle measurement,
// however fast it came out; an idle measurement always replaces a contended one.
TEST_F(FleetHealTest, AContendedMeasurementNeverReplacesAnIdleOne) {
  auto nodes = Nodes(2, redis_.url(), 0.1);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  FleetFlight* a = nodes[0]->flight();
  const Problem p = TestProblem(12);
  TuneResult contended = Result(nodes[0]->device(), p, 1e-4);
  contended.contention = "device busy: 95% utilization";
  a->Publish(contended, "");
  ASSERT_TRUE(Eventually([&] { return a->counters().published_written == 1; }, 2));
  a->Publish(Result(nodes[0]->device(), p, 2e-4), "");  // idle, slower: replaces it
  ASSERT_TRUE(Eventually([&] { return a->counters().published_written == 2; }, 2));
  TuneResult faster = contended;
  faster.best_measurement = Measurement::FromSamples({0.5e-4, 0.5e-4, 0.5e-4}, 1, {});
  a->Publish(faster, "");  // contended, faster: kept out
  ASSERT_TRUE(Eventually([&] { return a->counters().published_kept == 1; }, 2));
  const SharedKeys keys = SharedKeysFor(kLibraryVersion, ClassOf(nodes[0]->device()).key, p);
  EXPECT_EQ(Command(redis_.port(), {"HGET", keys.result, "m"}).str, EncodeMedian(2e-4));
  EXPECT_EQ(Command(redis_.port(), {"HGET", keys.result, "c"}).str, "0");
}

TEST_F(FleetHealTest, APublishThatChangesNothingWakesNobody) {
  auto nodes = Nodes(2, redis_.url(), 0.1);
  ASSERT_TRUE(Eventually([&] { return AllAvailable(nodes, true); }, 10));
  FleetFlight* a = nodes[0]->flight();
  FleetFlight* b = nodes[1]->flight();
  const Problem p = TestProblem(9);
  a->Publish(Result(nodes[0]->device(), p, 1e-4), "");
  ASSERT_TRUE(Eventually([&] { return b->counters().notifications == 1; }, 2));
  a->Publish(Result(nodes[0]->device(), p, 2e-4), "");    // slower: kept out
  a->Release(nodes[0]->device(), p, "not-a-lease-held");  // releases nothing
  ASSERT_TRUE(Eventually([&] { return a->counters().published_kept == 1; }, 2));
  a->Publish(Result(nodes[0]->device(), p, 0.5e-4), "");  // faster: written
  ASSERT_TRUE(Eventually([&] { return b->counters().notifications == 2; }, 2));
  EXPECT_EQ(b->counters().notifications, 2) << "the publish that wrote nothing told nobody";
}

}  // namespace
}  // namespace transposed
