#include "server/daemon/startup.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "server/daemon/logging.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;

TEST(ListenAddressTest, AcceptsHostPortForms) {
  auto a = ParseListenAddress("127.0.0.1:50051");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 50051);
  EXPECT_TRUE(a->loopback);
  a = ParseListenAddress("0.0.0.0:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 0);
  EXPECT_FALSE(a->loopback);
  a = ParseListenAddress("[::1]:65535");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 65535);
  EXPECT_TRUE(a->loopback);
  a = ParseListenAddress("[::]:80");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->loopback);
  a = ParseListenAddress("localhost:1");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->loopback);
  a = ParseListenAddress("gpu-node-17:50051");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->loopback);
  a = ParseListenAddress("unix:/run/transposed.sock");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->unix_socket);
  EXPECT_TRUE(a->loopback);
}

TEST(ListenAddressTest, RefusesPortsOutOfRangeAndMalformedValues) {
  for (const char* bad : {"127.0.0.1:70000", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:",
                          "127.0.0.1", ":50051", "127.0.0.1:50051x", "127.0.0.1:0x10",
                          "[::1:50051", "[::1]50051", "::1:50051", "127.0.0.1:999999",
                          "unix:", "", "127.0.0.1: 80"}) {
    auto a = ParseListenAddress(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(a.status().message().rfind("--listen: ", 0), 0u) << a.status().message();
    }
  }
}

// Property: any string either parses to a port in 0..65535 or is refused; never throws.
TEST(ListenAddressTest, RandomInputsNeverThrowAndPortsStayInRange) {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789:[]abc.unix-/ \n\x00\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    auto a = ParseListenAddress(s);
    if (a.ok()) {
      EXPECT_GE(a->port, 0);
      EXPECT_LE(a->port, 65535);
    }
  }
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok()) << "mkdtemp failed";
    app_.set_config("--config");
    app_.add_option("--listen", listen_);
    app_.add_option("--tune-budget", budget_);
    app_.add_option("--log-level", level_);
  }
  std::string Write(const std::string& text) {
    const fs::path p = dir_ / ("c" + std::to_string(n_++) + ".toml");
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

  testing::TempDir temp_{"startup_test"};
  const fs::path& dir_ = temp_.path();
  int n_ = 0;
  CLI::App app_;
  std::string listen_, level_;
  double budget_ = 0;
};

TEST_F(ConfigFileTest, KnownKeysPass) {
  EXPECT_TRUE(CheckConfigFile(app_, Write("# comment\nlisten = \"127.0.0.1:1\"\n"
                                          "tune-budget = 3\nlog-level = \"debug\"\n\n"))
                  .ok());
}

TEST_F(ConfigFileTest, UnknownKeyIsNamed) {
  const std::string path = Write("listen = \"127.0.0.1:1\"\ntune-budgte = 3\n");
  Status s = CheckConfigFile(app_, path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown key 'tune-budgte'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos);
}

// Issue 37: `tune_budget` was accepted by the check and then ignored by CLI11. An underscore
// spelling is refused like a misspelled key, with the flag it meant.
TEST_F(ConfigFileTest, UnderscoreKeyIsRefusedWithItsFlag) {
  for (const auto& [key, meant] : std::vector<std::pair<std::string, std::string>>{
           {"tune_budget = 3", "tune-budget"}, {"log_level = \"debug\"", "log-level"}}) {
    Status s = CheckConfigFile(app_, Write(key + "\n"));
    ASSERT_FALSE(s.ok()) << key;
    EXPECT_NE(s.message().find("unknown key '" + key.substr(0, key.find(' ')) + "'"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("did you mean " + meant + "?"), std::string::npos) << s.message();
  }
  Status typo = CheckConfigFile(app_, Write("tune-budgte = 3\n"));
  EXPECT_NE(typo.message().find("did you mean tune-budget?"), std::string::npos) << typo.message();
}

TEST_F(ConfigFileTest, SectionIsNamed) {
  Status s = CheckConfigFile(app_, Write("[server]\nlisten = \"127.0.0.1:1\"\n"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("section [server]"), std::string::npos) << s.message();
  s = CheckConfigFile(app_, Write("listen = \"127.0.0.1:1\"\n[empty]\n"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("section [empty]"), std::string::npos) << s.message();
}

TEST_F(ConfigFileTest, TheConfigKeyItselfIsNoSetting) {
  EXPECT_FALSE(CheckConfigFile(app_, Write("config = \"other.toml\"\n")).ok());
}

// Property: random and mutated files never crash the check; a file the check accepts holds only
// known keys at the top level.
TEST_F(ConfigFileTest, RandomAndMutatedFilesNeverCrash) {
  std::mt19937 rng(99);
  const std::string seed = "listen = \"127.0.0.1:1\"\ntune-budget = 3\n# c\nlog-level = 'info'\n";
  const std::string alphabet = "=[]\"'#\n \t.abcdelistn-_0123\\\x00\xff";
  for (int i = 0; i < 1500; ++i) {
    std::string text = seed;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0: text.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (pos < text.size()) text.erase(pos, 1); break;
        default: if (pos < text.size()) text[pos] = alphabet[rng() % alphabet.size()];
      }
    }
    Status s = CheckConfigFile(app_, Write(text));
    if (s.ok()) {
      // No section header got through.
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        const auto b = line.find_first_not_of(" \t");
        const auto e = line.find_last_not_of(" \t\r");
        if (b == std::string::npos) continue;
        EXPECT_FALSE(line[b] == '[' && line[e] == ']') << text;
      }
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(FileLimitTest, RaisesTheSoftLimitToTheHardLimit) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max > 64) {
    rlimit low = lim;
    low.rlim_cur = 64;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  }
  std::string note;
  const uint64_t now = RaiseFileLimit(&note);
  EXPECT_EQ(now, static_cast<uint64_t>(lim.rlim_max)) << note;
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, lim.rlim_max);
  EXPECT_FALSE(note.empty());
}

// The default connection cap leaves what is open, the daemon's own files and a burst below the
// descriptor limit; the guard sits inside the burst; no limit known: 4096, no guard.
TEST(DescriptorBudgetTest, CapsLeaveRoomForTheDaemonsOwnFiles) {
  DescriptorBudget b = MakeDescriptorBudget(1024, 40);
  EXPECT_EQ(b.burst, 128u);
  EXPECT_EQ(b.max_connections, 1024 - 40 - 64 - 128);
  EXPECT_EQ(b.guard_fd, 1024 - 64);
  EXPECT_EQ(b.accept_queue, 64);
  b = MakeDescriptorBudget(256, 30);
  EXPECT_EQ(b.max_connections, 256 - 30 - 64 - 32);
  EXPECT_EQ(b.guard_fd, 256 - 16);
  EXPECT_EQ(b.accept_queue, 16);
  b = MakeDescriptorBudget(1 << 20, 30);
  EXPECT_EQ(b.max_connections, DescriptorBudget::kMaxDefaultConnections);
  EXPECT_EQ(b.accept_queue, 0);  // the system's somaxconn (4096) is smaller
  b = MakeDescriptorBudget(0, 30);
  EXPECT_EQ(b.max_connections, DescriptorBudget::kMaxDefaultConnections);
  EXPECT_EQ(b.guard_fd, 0);
  b = MakeDescriptorBudget(64, 40);  // nothing left: one connection
  EXPECT_EQ(b.max_connections, 1);
  EXPECT_GT(CountOpenFiles(), 2u);  // stdin, stdout, stderr at least
}

}  // namespace
}  // namespace transposed

namespace transposed {
namespace {

// --log-format json: one JSON object per line (time in UTC, level, thread, message), whatever the
// message holds (quotes, backslashes, newlines stay inside the string).
TEST(DaemonLogging, JsonFormatIsOneObjectPerLine) {
  testing::TempDir dir("logging_test");
  const std::string path = (dir.path() / "daemon.log").string();
  std::shared_ptr<ReopenableFileSink> sink;
  ASSERT_TRUE(SetUpDaemonLogging(path, "info", "json", &sink));
  spdlog::info("listening on {} (port {})", "127.0.0.1:0", 4242);
  spdlog::warn("a \"quoted\" value, a back\\slash,\na newline and a tab\t");
  spdlog::debug("not at info");
  spdlog::default_logger()->flush();
  std::istringstream lines(testing::ReadFile(path));
  std::vector<nlohmann::json> objects;
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << line;
    objects.push_back(j);
  }
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects[0]["level"], "info");
  EXPECT_EQ(objects[0]["message"], "listening on 127.0.0.1:0 (port 4242)");
  EXPECT_TRUE(objects[0]["thread"].is_number());
  EXPECT_TRUE(std::regex_match(objects[0]["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << objects[0]["time"];
  EXPECT_EQ(objects[1]["level"], "warning");
  EXPECT_EQ(objects[1]["message"], "a \"quoted\" value, a back\\slash,\na newline and a tab\t");
  spdlog::set_default_logger(spdlog::stderr_logger_mt("startup_test"));
}

}  // namespace
}  // namespace transposed
