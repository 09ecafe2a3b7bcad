// A job's shape list on a fleet (issue 33): 8 real daemons of one class (CPU backend, distinct
// --instance-id) sharing one real redis-server, every daemon asked the same 16 new problems at
// the same moment, as a job that starts on 8 nodes brings its list of shapes. With the default
// flags (--max-queued-tunes 8, the shared store's default timeout and lease): no refusals (a miss
// waiting for another node's tune holds no place in the local queue), at most 18 tunes for the
// class and at most 4 on any node (each node takes one lease at a time: the lease budget).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "testing/daemon_process.h"
#include "testing/redis_process.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kNodes = 8;
constexpr int kProblems = 16;

TEST(FleetShapesTest, AShapeListAskedOfEightNodesAtOnceIsSpreadWithoutRefusals) {
  testing::RedisProcess redis;
  ASSERT_TRUE(redis.Start().ok());
  std::vector<std::unique_ptr<testing::DaemonProcess>> nodes(kNodes);
  std::vector<std::thread> starting;
  std::vector<Status> started(kNodes, Status::OK());
  for (int i = 0; i < kNodes; ++i) {
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.tune_budget_seconds = 0.3;
    o.extra_args = {"--instance-id",    "shapes-node-" + std::to_string(i),
                    "--cpu-threads",    "1",
                    "--shared-store",   redis.url(),
                    "--metrics-listen", "127.0.0.1:0"};
    nodes[i] = std::make_unique<testing::DaemonProcess>(o);
    starting.emplace_back([&, i] { started[i] = nodes[i]->Start(); });
  }
  for (auto& t : starting) t.join();
  std::vector<int> metrics_ports;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kNodes; ++i) {
    ASSERT_TRUE(started[i].ok()) << "node " << i << ": " << started[i].ToString();
    std::smatch m;
    const std::string log = testing::ReadFile(nodes[i]->log());
    ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics on \S+ \(port (\d+)\))")));
    metrics_ports.push_back(std::stoi(m[1]));
    auto client = Client::Connect(nodes[i]->address(), {});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    clients.push_back(std::move(client).value());
  }
  auto metric = [&](int node, const std::string& name) {
    std::string error;
    const auto samples =
        testing::ParseMetrics(testing::HttpGet(metrics_ports[node], "/metrics", &error));
    EXPECT_TRUE(error.empty()) << error;
    double v = 0;
    for (const auto& [key, value] : samples)
      if (key == name || key.rfind(name + "{", 0) == 0) v += value;
    return v;
  };
  // Every node connected to the store (its gauge), so that no miss meets a connect in progress.
  for (int i = 0; i < kNodes; ++i) {
    for (int tries = 0; metric(i, "transposed_shared_store_available") < 1 && tries < 200; ++tries)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(metric(i, "transposed_shared_store_available"), 1) << "node " << i;
  }

  std::vector<Problem> list;
  for (int k = 0; k < kProblems; ++k) {
    Problem p;
    p.rows = 96 + 8 * k;
    p.cols = 136;
    p.dtype = DType::kF32;
    list.push_back(p);
  }
  std::vector<std::string> errors;
  std::mutex mu;
  std::vector<std::thread> callers;
  const auto go = Clock::now() + std::chrono::milliseconds(200);
  for (int i = 0; i < kNodes; ++i) {
    for (int k = 0; k < kProblems; ++k) {
      callers.emplace_back([&, i, k] {
        std::this_thread::sleep_until(go);
        auto answer = clients[i]->GetConfig(list[k]);
        if (!answer.ok()) {
          std::lock_guard<std::mutex> l(mu);
          errors.push_back("node " + std::to_string(i) + " problem " + std::to_string(k) + ": " +
                           answer.status().ToString());
        }
      });
    }
  }
  for (auto& t : callers) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - go).count();
  int tunes = 0, most = 0, busiest = -1;
  std::string per_node;
  for (int i = 0; i < kNodes; ++i) {
    const int t = static_cast<int>(metric(i, "transposed_tunes_started_total"));
    tunes += t;
    if (t > most) most = t, busiest = i;
    per_node += (i ? " " : "") + std::to_string(t);
  }
  std::printf(
      "shape list: %d problems x %d nodes at once: %d tunes (per node: %s), %zu errors, "
      "%.2f s\n",
      kProblems, kNodes, tunes, per_node.c_str(), errors.size(), seconds);
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, the first: " << errors.front();
  EXPECT_LE(tunes, kProblems + 2);
  EXPECT_LE(most, 4) << "node " << busiest << " took more than its share";
  for (auto& n : nodes) {
    EXPECT_TRUE(n->Stop().ok());
    if (!::testing::Test::HasFailure()) n->RemoveDir();
  }
}

}  // namespace
}  // namespace transposed
