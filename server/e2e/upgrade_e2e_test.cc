// Upgrades keep the cache (server/previous_entry.h): 8 real daemons of one device class (CPU
// backend, distinct --instance-id) sharing one real redis-server fill their caches, stop, and
// start again as a build of another kernel library version whose variants still exist. That
// build is simulated without any test-only path in the daemon: the daemon compares the version
// stored in each entry with its device's, so the test rewrites the stored column
// (entries.library_version) of every node's database to an older version, and starts Redis
// empty (an older build's shared results live under its own version's keys). Then:
//   - every known problem answers on the first request on every node, at once, as provisional
//     (SOURCE_PREVIOUS, measured_on naming the older version), 0 answers lost;
//   - each problem is re-validated (re-checked and re-measured) once for the class, not once
//     per node: one tune per problem across the fleet, the others take its shared result;
//   - afterwards every node answers SOURCE_CACHE with this build's version;
//   - an entry whose variant is gone (renamed in the rewritten database) is a miss: tuned.
// The figures are printed for docs/user/fleet.md ("Upgrades").
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "testing/daemon_process.h"
#include "testing/redis_process.h"
#include "testing/stats.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kNodes = 8;
constexpr char kOlderVersion[] = "0.0.1+kolder";

Problem Make(int64_t rows, int64_t cols) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.dtype = DType::kF32;
  return p;
}

// Runs `sql` on the database at `path` (the daemon is stopped); the rows changed.
int Rewrite(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK) << path;
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  const int changed = sqlite3_changes(db);
  sqlite3_close(db);
  return changed;
}

class UpgradeE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = redis_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (int i = 0; i < kNodes; ++i) {
      testing::DaemonOptions o;
      o.binary = TRANSPOSED_BINARY;
      o.tune_budget_seconds = 0.4;
      o.extra_args = {"--instance-id",          "upgrade-node-" + std::to_string(i),
                      "--cpu-threads",          "1",
                      "--shared-store",         redis_.url(),
                      "--shared-store-timeout", "0.5",
                      "--metrics-listen",       "127.0.0.1:0"};
      nodes_.push_back(std::make_unique<testing::DaemonProcess>(o));
    }
    ASSERT_NO_FATAL_FAILURE(StartAll());
  }

  void TearDown() override {
    for (auto& n : nodes_) {
      Status s = n->Stop();
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!HasFailure()) n->RemoveDir();
    }
  }

  void StartAll() {
    clients_.clear();
    metrics_ports_.clear();
    std::vector<std::thread> starting;
    std::vector<Status> started(kNodes, Status::OK());
    for (int i = 0; i < kNodes; ++i)
      starting.emplace_back([this, i, &started] { started[i] = nodes_[i]->Start(); });
    for (auto& t : starting) t.join();
    for (int i = 0; i < kNodes; ++i) {
      ASSERT_TRUE(started[i].ok()) << "node " << i << ": " << started[i].ToString();
      // The log is appended to across restarts: the latest metrics line is this start's.
      const std::string log = testing::ReadFile(nodes_[i]->log());
      int port = 0;
      const std::regex re(R"(metrics on \S+ \(port (\d+)\))");
      for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
           ++it)
        port = std::stoi((*it)[1]);
      ASSERT_GT(port, 0);
      metrics_ports_.push_back(port);
      auto client = Client::Connect(nodes_[i]->address(), {});
      ASSERT_TRUE(client.ok()) << client.status().ToString();
      clients_.push_back(std::move(client).value());
    }
    for (int tries = 0; Sum("transposed_shared_store_available") < kNodes && tries < 200; ++tries)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(Sum("transposed_shared_store_available"), kNodes);
  }

  void StopAll() {
    for (auto& n : nodes_) {
      Status s = n->Stop();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  double Sum(const std::string& name) {
    double total = 0;
    for (int port : metrics_ports_) {
      std::string error;
      const auto samples = testing::ParseMetrics(testing::HttpGet(port, "/metrics", &error));
      EXPECT_TRUE(error.empty()) << error;
      for (const auto& [key, value] : samples)
        if (key == name || key.rfind(name + "{", 0) == 0) total += value;
    }
    return total;
  }

  testing::RedisProcess redis_;
  std::vector<std::unique_ptr<testing::DaemonProcess>> nodes_;
  std::vector<int> metrics_ports_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(UpgradeE2ETest, EveryKnownProblemAnswersAtOnceAndIsRevalidatedOncePerClass) {
  const std::vector<Problem> known = {Make(96, 160), Make(200, 72), Make(128, 336), Make(264, 120),
                                      Make(176, 176)};
  const Problem renamed = Make(144, 208);  // its variant will be gone after the "upgrade"

  // 1. Fill every node's cache: node 0 tunes, the others take its shared results.
  for (const Problem& p : known) {
    auto a = clients_[0]->GetConfig(p, v1::DeviceSelector(), v1::TUNE_IF_MISSING);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
  }
  auto a = clients_[0]->GetConfig(renamed, v1::DeviceSelector(), v1::TUNE_IF_MISSING);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  for (int i = 1; i < kNodes; ++i) {
    for (const Problem& p : known) {
      auto b = clients_[i]->GetConfig(p, v1::DeviceSelector(), v1::TUNE_IF_MISSING);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(b->source(), v1::SOURCE_SHARED) << "node " << i;
    }
    auto b = clients_[i]->GetConfig(renamed, v1::DeviceSelector(), v1::TUNE_IF_MISSING);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
  }
  ASSERT_EQ(Sum("transposed_tunes_completed_total"), known.size() + 1);

  // 2. The "upgrade": every database's entries now say an older library version measured them;
  // the renamed problem's winner is a variant this build does not have. Redis starts empty.
  StopAll();
  for (int i = 0; i < kNodes; ++i) {
    const std::string db = nodes_[i]->db().string();
    EXPECT_EQ(
        Rewrite(db, std::string("UPDATE entries SET library_version = '") + kOlderVersion + "'"),
        static_cast<int>(known.size()) + 1)
        << "node " << i;
    EXPECT_EQ(Rewrite(db,
                      "UPDATE entries SET variant = 'cpu.retired.variant' WHERE "
                      "problem_key = '" +
                          renamed.Key() + "'"),
              1);
  }
  redis_.Kill();
  ASSERT_TRUE(redis_.Start().ok());
  ASSERT_NO_FATAL_FAILURE(StartAll());

  // 3. The first request of every known problem on every node, all nodes at once.
  struct Reply {
    bool ok = false;
    std::string error;
    v1::Source source = v1::SOURCE_UNSPECIFIED;
    std::string measured_with;
    double seconds = 0;
  };
  std::vector<std::vector<Reply>> replies(kNodes, std::vector<Reply>(known.size()));
  const auto asked_at = Clock::now();
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kNodes; ++i) {
      threads.emplace_back([&, i] {
        for (size_t k = 0; k < known.size(); ++k) {
          const auto start = Clock::now();
          auto r = clients_[i]->GetConfig(known[k], v1::DeviceSelector(), v1::TUNE_IF_MISSING);
          Reply& out = replies[i][k];
          out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
          out.ok = r.ok();
          if (!r.ok()) {
            out.error = r.status().ToString();
            continue;
          }
          out.source = r->source();
          out.measured_with = r->measured_on().library_version();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  int answered = 0, previous = 0;
  std::vector<double> seconds;
  for (int i = 0; i < kNodes; ++i) {
    for (size_t k = 0; k < known.size(); ++k) {
      const Reply& r = replies[i][k];
      EXPECT_TRUE(r.ok) << "node " << i << " " << known[k].Key() << ": " << r.error;
      if (!r.ok) continue;
      ++answered;
      seconds.push_back(r.seconds);
      EXPECT_EQ(r.source, v1::SOURCE_PREVIOUS) << "node " << i << " " << known[k].Key();
      if (r.source == v1::SOURCE_PREVIOUS) {
        ++previous;
        EXPECT_EQ(r.measured_with, kOlderVersion);
      }
    }
  }
  const int asked = kNodes * static_cast<int>(known.size());
  EXPECT_EQ(answered, asked) << "answers lost: " << asked - answered;
  // At once: no request waited for a tune (a tune here takes --tune-budget 0.4 s).
  EXPECT_LT(testing::Percentile(seconds, 100), 0.4);

  // 4. The class re-validates each problem once: wait until every node serves this build's
  // version for every known problem from its cache.
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  int current = 0;
  while (Clock::now() < deadline) {
    current = 0;
    for (int i = 0; i < kNodes; ++i) {
      for (const Problem& p : known) {
        auto r = clients_[i]->GetConfig(p, v1::DeviceSelector(), v1::CACHE_ONLY);
        if (r.ok() && r->source() == v1::SOURCE_CACHE &&
            r->measured_on().library_version() != kOlderVersion)
          ++current;
      }
    }
    if (current == asked) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(current, asked) << "nodes x problems re-validated";
  const double revalidated_s = std::chrono::duration<double>(Clock::now() - asked_at).count();
  const double tunes = Sum("transposed_tunes_completed_total");
  const double leases = Sum("transposed_shared_store_leases_total");
  const double found = Sum("transposed_shared_store_found_total");
  EXPECT_EQ(tunes, known.size()) << "one re-validation per problem for the class";
  EXPECT_EQ(leases, known.size());
  std::printf(
      "upgrade: nodes=%d known=%zu first requests=%d answered=%d previous=%d "
      "answer_s p50=%.4f max=%.4f; re-validation: tunes=%.0f leases=%.0f "
      "shared_found=%.0f, every node current %.1f s after the first requests\n",
      kNodes, known.size(), asked, answered, previous, testing::Percentile(seconds, 50),
      testing::Percentile(seconds, 100), tunes, leases, found, revalidated_s);

  // 5. The entry whose variant is gone is a miss: tuned (once for the class), never answered
  // from the stale entry.
  auto r = clients_[3]->GetConfig(renamed, v1::DeviceSelector(), v1::TUNE_IF_MISSING);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source(), v1::SOURCE_TUNED);
  EXPECT_NE(r->variant().name(), "cpu.retired.variant");
  auto cached = clients_[5]->GetConfig(renamed, v1::DeviceSelector(), v1::TUNE_IF_MISSING);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_NE(cached->source(), v1::SOURCE_PREVIOUS);
  EXPECT_NE(cached->variant().name(), "cpu.retired.variant");
}

}  // namespace
}  // namespace transposed
