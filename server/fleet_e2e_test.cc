// End-to-end tests of the fleet features with several real daemons (CPU backend, each in its own
// temporary directory, started by the shared testing::DaemonProcess) driven by the real
// `transposectl`: fan-out queries across daemons (`--server a,b`).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"
#include "testing/daemon_process.h"

namespace transposed {
namespace {

using Json = nlohmann::json;

// The index of the first line of `text` that starts with `node` followed by spaces and then
// contains `needle`; npos if none.
size_t RowOf(const std::string& text, const std::string& node, const std::string& needle) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.rfind(node + " ", 0) == 0 && line.find(needle) != std::string::npos) return start;
    start = end + 1;
  }
  return std::string::npos;
}

struct Ctl {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string Describe() const {
    return "exit " + std::to_string(exit_code) + "\nstdout:\n" + out + "\nstderr:\n" + err;
  }
};

class FleetTest : public ::testing::Test {
 protected:
  // Starts a daemon with `extra` flags; the test fails if it does not come up.
  testing::DaemonProcess* StartDaemon(std::vector<std::string> extra = {}) {
    testing::DaemonOptions options;
    options.binary = TRANSPOSED_BINARY;
    options.tune_budget_seconds = 2;
    options.extra_args = std::move(extra);
    daemons_.push_back(std::make_unique<testing::DaemonProcess>(options));
    Status s = daemons_.back()->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() ? daemons_.back().get() : nullptr;
  }

  void TearDown() override {
    for (auto& d : daemons_) {
      Status s = d->Stop();
      EXPECT_TRUE(s.ok()) << s.ToString() << "\nlog:\n" << testing::ReadFileOrEmpty(d->log());
      if (!HasFailure()) d->RemoveDir();
    }
  }

  // Runs transposectl with `args` (stdout and stderr captured apart).
  Ctl RunCtl(const std::string& args) {
    Ctl r;
    const std::string err_file = daemons_.front()->dir().string() + "/ctl.err";
    const std::string cmd = std::string(TRANSPOSECTL_BINARY) + " --timeout 120 " + args + " 2>" +
                            err_file;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = testing::ReadFileOrEmpty(err_file);
    return r;
  }

  // Tunes `problem` on `daemon` through the C++ client; returns the answer.
  v1::Answer Tune(testing::DaemonProcess* daemon, int64_t rows, int64_t cols,
                  const std::string& dtype) {
    auto client = Client::Connect(daemon->address(), {});
    EXPECT_TRUE(client.ok());
    v1::Problem p;
    p.set_rows(rows);
    p.set_cols(cols);
    p.set_dtype(dtype);
    auto answer = (*client)->GetConfig(p);
    EXPECT_TRUE(answer.ok()) << answer.status().ToString();
    return answer.ok() ? *answer : v1::Answer();
  }

  std::vector<std::unique_ptr<testing::DaemonProcess>> daemons_;
};

TEST_F(FleetTest, ListDevicesAndCacheOnlyGetMergeTwoDaemons) {
  auto* a = StartDaemon();
  auto* b = StartDaemon();
  ASSERT_TRUE(a && b);
  Tune(a, 64, 48, "f32");
  Tune(b, 96, 40, "f16");  // tuned later: first in the merged list
  const std::string both = "--server " + a->address() + "," + b->address();

  Ctl list = RunCtl(both + " list");
  ASSERT_EQ(list.exit_code, 0) << list.Describe();
  const size_t row_b = RowOf(list.out, b->address(), "device=0  96x40 f16");
  const size_t row_a = RowOf(list.out, a->address(), "device=0  64x48 f32");
  EXPECT_NE(row_a, std::string::npos) << list.out;
  EXPECT_NE(row_b, std::string::npos) << list.out;
  EXPECT_LT(row_b, row_a) << "newest first across daemons:\n" << list.out;
  EXPECT_NE(list.out.find("2 entries from 2 daemons"), std::string::npos) << list.out;

  Ctl json = RunCtl("--json " + both + " list");
  ASSERT_EQ(json.exit_code, 0) << json.Describe();
  Json j = Json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  ASSERT_EQ(j["rows"].size(), 2u) << json.out;
  EXPECT_EQ(j["rows"][0]["node"], b->address());
  EXPECT_EQ(j["rows"][0]["entry"]["answer"]["problem"]["dtype"], "f16");
  EXPECT_EQ(j["rows"][1]["node"], a->address());
  EXPECT_EQ(j["nodes"], 2);

  Ctl devices = RunCtl("--json " + both + " devices");
  ASSERT_EQ(devices.exit_code, 0) << devices.Describe();
  j = Json::parse(devices.out, nullptr, false);
  ASSERT_EQ(j["rows"].size(), 2u) << devices.out;
  std::set<std::string> nodes;
  for (const auto& row : j["rows"]) {
    nodes.insert(row["node"].get<std::string>());
    EXPECT_EQ(row["device"]["backend"], "cpu") << row.dump();
  }
  EXPECT_EQ(nodes, (std::set<std::string>{a->address(), b->address()}));

  // get --cache-only: a has it, b misses (a NOT_FOUND row, still exit 0).
  Ctl get = RunCtl(both + " get --rows 64 --cols 48 --dtype f32 --cache-only");
  ASSERT_EQ(get.exit_code, 0) << get.Describe();
  EXPECT_NE(RowOf(get.out, a->address(), "device=0  64x48 f32"), std::string::npos) << get.out;
  EXPECT_NE(RowOf(get.out, b->address(), "  NOT_FOUND"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("1 answers from 2 daemons, 1 without it"), std::string::npos) << get.out;

  // Without --cache-only a fan-out get is refused (it would tune everywhere).
  Ctl tune_all = RunCtl(both + " get --rows 64 --cols 48 --dtype f32");
  EXPECT_EQ(tune_all.exit_code, 2) << tune_all.Describe();

  // A daemon that is not there is an error row; the others still answer; exit 1.
  Ctl partial = RunCtl(both + ",127.0.0.1:1 list");
  EXPECT_EQ(partial.exit_code, 1) << partial.Describe();
  EXPECT_NE(RowOf(partial.out, "127.0.0.1:1", "  UNAVAILABLE"), std::string::npos) << partial.out;
  EXPECT_NE(partial.out.find("2 entries from 3 daemons, 1 failed"), std::string::npos)
      << partial.out;
}

}  // namespace
}  // namespace transposed
