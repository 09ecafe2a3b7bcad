// The tuner as a health probe (server/device_health.h) through the real daemon: its worker
// backend runs the test-only fake worker with three GPUs of one class, one of which reports every
// measurement 1.5x as long (--slowdown: a GPU that runs slow). Each device tunes its own problems
// of 16-32 MiB, round by round; the slow one is flagged after its third verdict and only it:
// ListDevices (what `transposectl devices` prints) says why, the metric transposed_device_slow
// is 1 for it and 0 for the others, the health service `transposed.devices` answers NOT_SERVING,
// the log says so. Figures are printed for docs/user/deploy.md ("Slow devices").
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/format.h"
#include "testing/daemon_process.h"
#include "testing/grpc_health.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;
constexpr int kDevices = 3;
constexpr int kSlow = 2;

TEST(HealthE2ETest, FlagsExactlyTheSlowDevice) {
  testing::TempDir temp("transposed_health_e2e");
  ASSERT_TRUE(temp.ok());
  const fs::path worker = temp.path() / "fleet-of-fakes";
  // The daemon runs its worker with exactly "--list" or "--device N".
  std::ofstream(worker) << "#!/bin/sh\n"
                        << "if [ \"$1\" = --list ]; then exec '" << TRANSPOSED_FAKE_WORKER
                        << "' --list --devices " << kDevices << "; fi\n"
                        << "if [ \"$2\" = " << kSlow << " ]; then exec '" << TRANSPOSED_FAKE_WORKER
                        << "' --slowdown 1.5 \"$@\"; fi\n"
                        << "exec '" << TRANSPOSED_FAKE_WORKER << "' \"$@\"\n";
  fs::permissions(worker, fs::perms::owner_all);
  testing::DaemonOptions o;
  o.binary = TRANSPOSED_BINARY;
  o.backend = "cuda";
  o.tune_budget_seconds = 5;
  o.temp_root = temp.path().string();
  o.extra_args = {"--worker", worker.string(), "--metrics-listen", "127.0.0.1:0"};
  testing::DaemonProcess d(o);
  Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  std::smatch m;
  const std::string log_at_start = testing::ReadFile(d.log());
  ASSERT_TRUE(std::regex_search(log_at_start, m, std::regex(R"(metrics on \S+ \(port (\d+)\))")));
  const int metrics_port = std::stoi(m[1]);
  auto client = Client::Connect(d.address(), {});
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  auto devices = (*client)->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  ASSERT_EQ(devices->size(), static_cast<size_t>(kDevices));
  for (const auto& dev : *devices) {
    EXPECT_EQ(dev.device_class(), (*devices)[0].device_class()) << "one class";
    EXPECT_FALSE(dev.health().slow());
    EXPECT_EQ(dev.health().verdicts(), 0);
  }
  std::string health;
  ASSERT_TRUE(testing::HealthCheck(d.address(), "transposed.devices", &health).ok());
  EXPECT_EQ(health, testing::kServing);

  // Rounds: each device tunes a problem of its own (the class shares results, so a problem
  // tuned on one device is a hit on the others), all of 16-32 MiB (f32, 4 Mi - 8 Mi elements).
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    for (int dev = 0; dev < kDevices; ++dev) {
      Problem p;
      p.rows = 2048 + 64 * (round * kDevices + dev);
      p.cols = 2048;
      p.dtype = DType::kF32;
      v1::DeviceSelector selector;
      selector.set_index(dev);
      auto a = (*client)->GetConfig(p, selector, v1::TUNE_IF_MISSING);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      EXPECT_EQ(a->source(), v1::SOURCE_TUNED) << "device " << dev << " round " << round;
    }
  }

  devices = (*client)->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  for (const auto& dev : *devices) {
    std::printf("health: %s\n", DeviceToText(dev).c_str());
    // The first round has no verdict for device 0 (no other ceiling at the size yet).
    EXPECT_GE(dev.health().verdicts(), kRounds - 1) << dev.index();
    EXPECT_EQ(dev.health().slow(), dev.index() == kSlow) << dev.index();
  }
  const v1::DeviceHealth& slow = (*devices)[kSlow].health();
  EXPECT_NEAR(slow.ceiling_ratio(), 1 / 1.5, 0.02);
  EXPECT_NE(slow.reason().find("below the median"), std::string::npos) << slow.reason();
  EXPECT_NE(slow.reason().find("of 2 other devices of its class at 16-32 MiB"), std::string::npos)
      << slow.reason();
  EXPECT_GT((*devices)[0].health().ceiling_ratio(), 1.1);

  std::string error;
  const auto samples = testing::ParseMetrics(testing::HttpGet(metrics_port, "/metrics", &error));
  ASSERT_TRUE(error.empty()) << error;
  int series = 0;
  for (const auto& [key, value] : samples) {
    if (key.rfind("transposed_device_slow{", 0) != 0) continue;
    ++series;
    const bool is_slow = key.find("gpu=\"" + std::to_string(kSlow) + "\"") != std::string::npos;
    EXPECT_EQ(value, is_slow ? 1 : 0) << key;
  }
  EXPECT_EQ(series, kDevices);
  ASSERT_TRUE(testing::HealthCheck(d.address(), "transposed.devices", &health).ok());
  EXPECT_EQ(health, testing::kNotServing);
  const std::string log = testing::ReadFile(d.log());
  EXPECT_NE(log.find("device " + std::to_string(kSlow) + " flagged SLOW: copy ceiling"),
            std::string::npos);
  EXPECT_EQ(log.find("device 0 flagged SLOW"), std::string::npos);
  EXPECT_EQ(log.find("device 1 flagged SLOW"), std::string::npos);

  Status stopped = d.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();
}

}  // namespace
}  // namespace transposed
