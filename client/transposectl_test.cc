// End-to-end tests of the daemon: each test starts the real `transposed` through the shared
// testing::DaemonProcess (CPU backend, fresh database and log in a temp dir, ephemeral port) and
// drives it through the real `transposectl` binary (and, for concurrency, the C++ Client).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/problem.h"
#include "testing/daemon_process.h"
#include "testing/test_files.h"

extern char** environ;

namespace transposed {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::ReadFile;

const std::string kCtl = std::string(TRANSPOSED_BIN_DIR) + "/transposectl";
const std::string kDaemon = std::string(TRANSPOSED_DAEMON_DIR) + "/transposed";

// An integer of the one JSON mapping: 64-bit ones are strings ("2048"), 32-bit ones numbers.
int64_t Int(const Json& v) {
  return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

// Spawns argv with stdout/stderr redirected to files; returns the pid (or -1, with errno text).
pid_t Spawn(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err,
            const std::vector<std::string>& extra_env, std::string* error) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const auto& e : extra_env) env_storage.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_storage) env.push_back(e.data());
  env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *error = "posix_spawn " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  return pid;
}

// Waits for pid up to `timeout`; returns the raw wait status, or nullopt on timeout.
std::optional<int> WaitFor(pid_t pid, std::chrono::duration<double> timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() > end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct CtlResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string command;
  Json json() const {
    Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
    return j;
  }
  std::string Describe() const {
    return "$ " + command + "\n-> exit " + std::to_string(exit_code) + "\nstdout:\n" + out +
           "\nstderr:\n" + err;
  }
};

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kCtl)) << "transposectl binary missing: " << kCtl;
    ASSERT_TRUE(fs::exists(kDaemon))
        << "the daemon binary is missing: " << kDaemon
        << " (build the `transposed` target of server/ in the same build directory)";
    testing::DaemonOptions options;
    options.binary = kDaemon;
    options.tune_budget_seconds = 5;
    daemon_ = std::make_unique<testing::DaemonProcess>(options);
    StartDaemon();
    dir_ = daemon_->dir();
    db_ = daemon_->db();
    log_ = daemon_->log();
  }

  void TearDown() override {
    if (daemon_->pid() > 0) StopDaemon();
    // TRANSPOSECTL_TEST_KEEP=1 keeps the directory (database, logs, outputs) of passing tests too.
    const char* keep = std::getenv("TRANSPOSECTL_TEST_KEEP");
    if (!HasFailure() && (keep == nullptr || std::string(keep) != "1")) {
      daemon_->RemoveDir();
    } else if (!HasFailure()) {
      std::cerr << "kept the test directory: " << dir_ << "\n";
    } else {
      std::cerr << "kept the test directory for inspection: " << dir_ << "\n"
                << "daemon log tail:\n"
                << Tail(ReadFile(log_), 40) << "daemon stderr tail:\n"
                << Tail(ReadFile(dir_ / "daemon.err"), 20);
    }
  }

  static std::string Tail(const std::string& text, size_t n) {
    auto lines = Lines(text);
    std::string out;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
      out += "  " + lines[i] + "\n";
    return out;
  }

  // Starts the daemon (the shared testing::DaemonProcess): a fresh directory the first time, the
  // same directory and database after StopDaemon().
  void StartDaemon() {
    const Status s = daemon_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    address_ = daemon_->address();
  }

  // SIGTERM, then expects a graceful exit with status 0 within 30 s.
  void StopDaemon() {
    const Status s = daemon_->Stop();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  // Runs transposectl against this daemon (--server and a timeout are prepended).
  CtlResult Ctl(const std::vector<std::string>& args, bool with_server = true,
                const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> argv = {kCtl};
    if (with_server) {
      argv.push_back("--server");
      argv.push_back(address_);
    }
    argv.push_back("--timeout");
    argv.push_back("120");
    argv.insert(argv.end(), args.begin(), args.end());
    CtlResult r;
    for (const auto& a : argv) r.command += (r.command.empty() ? "" : " ") + a;
    const int n = ++ctl_runs_;
    fs::path out = dir_ / ("ctl" + std::to_string(n) + ".out");
    fs::path err = dir_ / ("ctl" + std::to_string(n) + ".err");
    std::string error;
    pid_t pid = Spawn(argv, out, err, extra_env, &error);
    if (pid <= 0) {
      r.err = error;
      return r;
    }
    auto status = WaitFor(pid, std::chrono::seconds(180));
    if (!status) {
      kill(pid, SIGKILL);
      WaitFor(pid, std::chrono::seconds(10));
      r.err = "transposectl timed out";
      return r;
    }
    r.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // `transposectl --json get` for a problem; expects success and returns the parsed object.
  Json GetJson(const std::vector<std::string>& problem_args) {
    std::vector<std::string> args = {"--json", "get"};
    args.insert(args.end(), problem_args.begin(), problem_args.end());
    CtlResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    Json j = r.json();
    EXPECT_TRUE(j.is_object()) << "stdout is not one JSON object:\n" << r.Describe();
    return j.is_object() ? j : Json::object();
  }

  // Lines of the daemon log that start a tune of `key` (all tunes when key is empty).
  int TuneStarts(const std::string& key) {
    int n = 0;
    for (const auto& line : Lines(ReadFile(log_))) {
      if (line.find("tune start") == std::string::npos) continue;
      if (key.empty()) {
        ++n;
        continue;
      }
      const std::string needle = "problem=" + key;
      size_t pos = line.find(needle);
      if (pos == std::string::npos) continue;
      size_t after = pos + needle.size();
      if (after == line.size() || line[after] == ' ' || line[after] == '\t' || line[after] == '\r')
        ++n;
    }
    return n;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  fs::path dir_, db_, log_;
  int ctl_runs_ = 0;
  std::string address_;
};

void ExpectTunedAnswer(const Json& j, const std::string& context) {
  SCOPED_TRACE(context);
  ASSERT_TRUE(j.is_object());
  for (const char* field :
       {"variant", "gbps", "ceiling_gbps", "ratio", "source", "device", "problem",
        "tuned_at_unix_ms", "candidates_tried", "candidates_valid", "tune_seconds", "rel_spread"}) {
    EXPECT_TRUE(j.contains(field)) << "missing field " << field << " in " << j.dump();
  }
  if (!j.contains("variant") || !j.contains("device")) return;
  EXPECT_FALSE(j["variant"]["name"].get<std::string>().empty()) << j.dump();
  EXPECT_TRUE(j["variant"]["params"].is_object()) << j.dump();
  EXPECT_GT(j["gbps"].get<double>(), 0) << j.dump();
  EXPECT_GT(j["ceiling_gbps"].get<double>(), 0) << j.dump();
  const double ratio = j["ratio"].get<double>();
  EXPECT_GT(ratio, 0) << j.dump();
  EXPECT_LT(ratio, 1.5) << j.dump();
  EXPECT_NEAR(ratio, j["gbps"].get<double>() / j["ceiling_gbps"].get<double>(),
              1e-6 * ratio + 1e-9);
  EXPECT_GE(j["rel_spread"].get<double>(), 0) << j.dump();
  EXPECT_GE(j["candidates_tried"].get<int>(), 1) << j.dump();
  EXPECT_GE(j["candidates_valid"].get<int>(), 1) << j.dump();
  EXPECT_LE(j["candidates_valid"].get<int>(), j["candidates_tried"].get<int>()) << j.dump();
  EXPECT_GE(j["tune_seconds"].get<double>(), 0) << j.dump();
  // Tuned within the last hour (and not in the future by more than clock skew).
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_NEAR(static_cast<double>(Int(j["tuned_at_unix_ms"])), static_cast<double>(now_ms), 3600e3);
  const Json& d = j["device"];
  EXPECT_EQ(d["index"], 0) << d.dump();
  EXPECT_EQ(d["backend"], "cpu") << d.dump();
  EXPECT_FALSE(d["name"].get<std::string>().empty()) << d.dump();
  EXPECT_FALSE(d["uuid"].get<std::string>().empty()) << d.dump();
  EXPECT_FALSE(d["fingerprint"].get<std::string>().empty()) << d.dump();
}

// (a) A miss tunes; the second call is a cache hit with the same variant.
TEST_F(DaemonTest, MissTunesThenHitsCache) {
  const std::vector<std::string> problem = {"--rows", "96", "--cols", "160", "--dtype", "f32"};
  Json first = GetJson(problem);
  ExpectTunedAnswer(first, "first get");
  EXPECT_EQ(first["source"], "SOURCE_TUNED") << first.dump();
  EXPECT_EQ(first["problem"]["rows"], "96");
  EXPECT_EQ(first["problem"]["cols"], "160");
  EXPECT_EQ(first["problem"]["dtype"], "f32");

  Json second = GetJson(problem);
  ExpectTunedAnswer(second, "second get");
  EXPECT_EQ(second["source"], "SOURCE_CACHE") << second.dump();
  EXPECT_EQ(second["variant"], first["variant"]);
  EXPECT_EQ(second["tuned_at_unix_ms"], first["tuned_at_unix_ms"]);
  EXPECT_EQ(second["device"]["fingerprint"], first["device"]["fingerprint"]);

  // The text form: a key/value table with the same answer.
  std::vector<std::string> args = {"get"};
  args.insert(args.end(), problem.begin(), problem.end());
  CtlResult text = Ctl(args);
  ASSERT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_TRUE(std::regex_search(
      text.out, std::regex("variant: +" + first["variant"]["name"].get<std::string>())))
      << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex("source: +cache"))) << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex("bandwidth: +[0-9.]+ GB/s"))) << text.out;

  StopDaemon();
  EXPECT_EQ(TuneStarts(Problem{96, 160, 1, DType::kF32}.Key()), 1) << ReadFile(log_);
}

// --value-exact: its own tune and cache entry, shown in get --json and list.
TEST_F(DaemonTest, ValueExactIsItsOwnEntry) {
  const std::vector<std::string> problem = {"--rows", "80", "--cols", "112", "--dtype", "f64"};
  std::vector<std::string> value = problem;
  value.push_back("--value-exact");
  Json bit = GetJson(problem);
  EXPECT_EQ(bit["problem"]["exactness"], "EXACTNESS_BIT") << bit.dump();
  Json first = GetJson(value);
  EXPECT_EQ(first["source"], "SOURCE_TUNED") << first.dump();
  EXPECT_EQ(first["problem"]["exactness"], "EXACTNESS_VALUE") << first.dump();
  Json second = GetJson(value);
  EXPECT_EQ(second["source"], "SOURCE_CACHE") << second.dump();
  EXPECT_EQ(second["problem"]["exactness"], "EXACTNESS_VALUE") << second.dump();
  CtlResult list = Ctl({"list", "--rows", "80", "--cols", "112"});
  ASSERT_EQ(list.exit_code, 0) << list.Describe();
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (size_t pos = list.out.find(needle); pos != std::string::npos;
         pos = list.out.find(needle, pos + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("80x112 f64"), 2) << list.out;
  EXPECT_EQ(count("80x112 f64 value-exact"), 1) << list.out;
  StopDaemon();
  Problem p{80, 112, 1, DType::kF64};
  EXPECT_EQ(TuneStarts(p.Key()), 1) << ReadFile(log_);
  p.exactness = Exactness::kValue;
  EXPECT_EQ(TuneStarts(p.Key()), 1) << ReadFile(log_);
}

// (b) A restart on the same database keeps the cache.
TEST_F(DaemonTest, RestartKeepsCache) {
  const std::vector<std::string> problem = {"--rows", "72", "--cols", "136", "--dtype", "f64"};
  Json first = GetJson(problem);
  EXPECT_EQ(first["source"], "SOURCE_TUNED") << first.dump();
  StopDaemon();
  if (HasFatalFailure()) return;
  StartDaemon();
  if (HasFatalFailure()) return;

  std::vector<std::string> cache_only = problem;
  cache_only.push_back("--cache-only");
  Json after = GetJson(cache_only);
  EXPECT_EQ(after["source"], "SOURCE_CACHE") << after.dump();
  EXPECT_EQ(after["variant"], first["variant"]);
  Json again = GetJson(problem);
  EXPECT_EQ(again["source"], "SOURCE_CACHE") << again.dump();
  EXPECT_EQ(again["variant"], first["variant"]);
  StopDaemon();
  // Two daemon runs, one tune in all.
  EXPECT_EQ(TuneStarts(Problem{72, 136, 1, DType::kF64}.Key()), 1) << ReadFile(log_);
}

// (c) 32 concurrent requests for one new problem share one tune.
TEST_F(DaemonTest, ConcurrentRequestsShareOneTune) {
  Problem problem;
  problem.rows = 200;
  problem.cols = 136;
  problem.dtype = DType::kF32;
  constexpr int kThreads = 32;
  ClientOptions options;
  options.deadline_seconds = 120;
  auto shared = Client::Connect(address_, options);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  ASSERT_TRUE((*shared)->WaitForConnected(30).ok());

  std::vector<StatusOr<v1::Answer>> results(kThreads, Status::Internal("not run"));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Half the threads share one client (one channel), half have their own.
      std::unique_ptr<Client> own;
      Client* client = shared->get();
      if (i % 2 == 1) {
        auto c = Client::Connect(address_, options);
        if (!c.ok()) {
          results[i] = c.status();
          ready++;
          return;
        }
        own = std::move(*c);
        client = own.get();
      }
      ready++;
      while (!go.load()) std::this_thread::yield();
      results[i] = client->GetConfig(problem, DeviceByIndex(0));
    });
  }
  while (ready.load() < kThreads) std::this_thread::yield();
  go = true;
  for (auto& t : threads) t.join();

  std::set<std::string> variants;
  int tuned = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(results[i].ok()) << "request " << i << ": " << results[i].status().ToString();
    variants.insert(results[i]->variant().name());
    if (results[i]->source() == v1::SOURCE_TUNED) ++tuned;
    EXPECT_GT(results[i]->gbps(), 0);
  }
  EXPECT_EQ(variants.size(), 1u) << "all requests must get the same variant";
  EXPECT_FALSE(variants.begin()->empty());
  EXPECT_GE(tuned, 1) << "the first request must have tuned";

  shared->reset();  // close the channel first
  StopDaemon();     // flushes the log
  EXPECT_EQ(TuneStarts(problem.Key()), 1)
      << "expected exactly one `tune start ... problem=" << problem.Key()
      << "` line in the daemon log:\n"
      << ReadFile(log_);
}

// (d) Bad inputs get the right status, name the field, and the daemon keeps serving.
TEST_F(DaemonTest, BadInputsAreRejectedAndDaemonKeepsServing) {
  struct Case {
    std::vector<std::string> args;
    std::string code;
    std::string field;  // must appear in stderr after the code
  };
  const std::string big = std::to_string(int64_t{1} << 40);
  const std::string mega = std::to_string(int64_t{1} << 20);
  const std::vector<Case> cases = {
      {{"--rows", "0", "--cols", "64", "--dtype", "f32"}, "INVALID_ARGUMENT", "rows"},
      {{"--rows", "64", "--cols=-1", "--dtype", "f32"}, "INVALID_ARGUMENT", "cols"},
      {{"--rows", "64", "--cols", "-1", "--dtype", "f32"}, "INVALID_ARGUMENT", "cols"},
      {{"--rows", "64", "--cols", "64", "--dtype", "f32", "--batch", "0"},
       "INVALID_ARGUMENT",
       "batch"},
      {{"--rows", "64", "--cols", "64", "--dtype", "f17"}, "INVALID_ARGUMENT", "dtype"},
      {{"--rows", "64", "--cols", "64", "--dtype", "f32", "--ld-in", "32"},
       "INVALID_ARGUMENT",
       "ld_in"},
      {{"--rows", "64", "--cols", "64", "--dtype", "f32", "--ld-out", "63"},
       "INVALID_ARGUMENT",
       "ld_out"},
      {{"--rows", big, "--cols", big, "--dtype", "f32"}, "INVALID_ARGUMENT", "rows"},
      {{"--rows", mega, "--cols", mega, "--dtype", "f64"}, "RESOURCE_EXHAUSTED", ""},
      {{"--rows", "64", "--cols", "64", "--dtype", "f32", "--device", "99"}, "NOT_FOUND", ""},
      {{"--rows", "64", "--cols", "64", "--dtype", "f32", "--device", "no-such-uuid"},
       "NOT_FOUND",
       ""},
      {{"--rows", "64", "--cols", "64", "--dtype", "f32", "--cache-only"}, "NOT_FOUND", ""},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"get"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CtlResult r = Ctl(args);
    SCOPED_TRACE(r.Describe());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("transposectl: " + c.code + ": ", 0), 0u) << "stderr: " << r.err;
    if (!c.field.empty()) {
      const size_t after_code = r.err.find(c.code);
      EXPECT_NE(r.err.find(c.field, after_code == std::string::npos ? 0 : after_code),
                std::string::npos)
          << "the message should name `" << c.field << "`";
    }
    EXPECT_TRUE(r.out.empty()) << "nothing on stdout for an error";
  }
  // The --json flag does not change error reporting.
  CtlResult j = Ctl({"--json", "get", "--rows", "0", "--cols", "8", "--dtype", "f32"});
  EXPECT_EQ(j.exit_code, 1) << j.Describe();
  EXPECT_EQ(j.err.rfind("transposectl: INVALID_ARGUMENT: ", 0), 0u) << j.Describe();

  // Still serving: a valid request tunes and answers.
  Json ok = GetJson({"--rows", "64", "--cols", "64", "--dtype", "f32"});
  ExpectTunedAnswer(ok, "valid get after bad ones");
  EXPECT_EQ(ok["source"], "SOURCE_TUNED");
  Json dev = GetJson({"--rows", "64", "--cols", "64", "--dtype", "f32", "--device", "0"});
  EXPECT_EQ(dev["source"], "SOURCE_CACHE");

  StopDaemon();
  // None of the bad requests (nor the cache-only miss) started a tune.
  EXPECT_EQ(TuneStarts(""), 1) << ReadFile(log_);
}

// Usage errors exit 2; an unreachable daemon exits 3; TRANSPOSED_SERVER sets the default server.
TEST_F(DaemonTest, ExitStatusesAndServerFromEnvironment) {
  CtlResult missing = Ctl({"get", "--rows", "5", "--dtype", "f32"});
  EXPECT_EQ(missing.exit_code, 2) << missing.Describe();
  CtlResult unknown = Ctl({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.Describe();
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'"), std::string::npos)
      << unknown.Describe();
  CtlResult typo = Ctl({"--json", "gett", "--rows", "5"});
  EXPECT_EQ(typo.exit_code, 2) << typo.Describe();
  EXPECT_NE(typo.err.find("unknown command 'gett' (did you mean 'get'?)"), std::string::npos)
      << typo.Describe();
  CtlResult version = Ctl({"--version"}, /*with_server=*/false);
  EXPECT_EQ(version.exit_code, 0) << version.Describe();
  EXPECT_EQ(version.out.rfind("transposectl ", 0), 0u) << version.Describe();
  EXPECT_NE(version.out.find("kernel library"), std::string::npos) << version.Describe();
  // Global flags after the subcommand.
  CtlResult after = Ctl({"devices", "--json", "--server", address_}, /*with_server=*/false);
  ASSERT_EQ(after.exit_code, 0) << after.Describe();
  EXPECT_TRUE(after.json().contains("devices")) << after.Describe();
  // The completion script names every command and the global flags.
  CtlResult completion = Ctl({"completion", "bash"}, /*with_server=*/false);
  ASSERT_EQ(completion.exit_code, 0) << completion.Describe();
  EXPECT_NE(completion.out.find("complete -F _transposectl transposectl"), std::string::npos);
  for (const char* word : {"get)", "tune)", "devices)", "list)", "delete)", "export)", "import)",
                           "--server", "--json", "--cache-only", "--answer-now"})
    EXPECT_NE(completion.out.find(word), std::string::npos) << word << "\n" << completion.out;
  EXPECT_EQ(Ctl({"completion", "powershell"}, /*with_server=*/false).exit_code, 2);
  CtlResult help = Ctl({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.Describe();
  EXPECT_NE(help.out.find("tune"), std::string::npos) << help.Describe();

  // Nothing listens on port 1.
  CtlResult down = Ctl({"--server", "127.0.0.1:1", "devices"}, /*with_server=*/false);
  EXPECT_EQ(down.exit_code, 3) << down.Describe();
  EXPECT_EQ(down.err.rfind("transposectl: UNAVAILABLE: ", 0), 0u) << down.Describe();

  CtlResult env =
      Ctl({"--json", "devices"}, /*with_server=*/false, {"TRANSPOSED_SERVER=" + address_});
  ASSERT_EQ(env.exit_code, 0) << env.Describe();
  EXPECT_TRUE(env.json().contains("devices")) << env.Describe();
  // --server wins over the environment.
  CtlResult both = Ctl({"--server", address_, "devices"}, /*with_server=*/false,
                       {"TRANSPOSED_SERVER=127.0.0.1:1"});
  EXPECT_EQ(both.exit_code, 0) << both.Describe();
}

// tune --from: every listed problem not cached is tuned, cached ones are skipped.
TEST_F(DaemonTest, TuneFromAFileSkipsCachedProblems) {
  const std::string shapes = (dir_ / "shapes.txt").string();
  {
    std::ofstream f(shapes);
    f << "# a job's shapes\n64 48 f32\n{\"rows\": 32, \"cols\": 40, \"dtype\": \"u8\"}\n\n";
  }
  CtlResult first = Ctl({"tune", "--from", shapes});
  ASSERT_EQ(first.exit_code, 0) << first.Describe();
  EXPECT_NE(first.err.find("2 problems: 2 tuned, 0 already cached"), std::string::npos)
      << first.Describe();
  // Not on a terminal: one line per problem, labelled as everywhere else (ProblemLabel).
  EXPECT_NE(first.out.find("64x48 f32: "), std::string::npos) << first.Describe();
  EXPECT_NE(first.out.find("32x40 u8: "), std::string::npos) << first.Describe();
  CtlResult again = Ctl({"tune", "--from", shapes, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_NE(again.err.find("2 problems: 0 tuned, 2 already cached"), std::string::npos)
      << again.Describe();
  std::istringstream lines(again.out);
  std::string line;
  int answers = 0;
  while (std::getline(lines, line)) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["source"], "SOURCE_CACHE") << line;
    ++answers;
  }
  EXPECT_EQ(answers, 2) << again.Describe();
  // --force re-tunes them (admin: from loopback, no token configured).
  CtlResult forced = Ctl({"tune", "--from", shapes, "--force", "--budget", "1"});
  ASSERT_EQ(forced.exit_code, 0) << forced.Describe();
  EXPECT_NE(forced.err.find("2 problems: 2 re-tuned, 0 already cached"), std::string::npos)
      << forced.Describe();
  {
    std::ofstream f(shapes);
    f << "64 x f32\n";
  }
  CtlResult bad = Ctl({"tune", "--from", shapes});
  EXPECT_EQ(bad.exit_code, 2) << bad.Describe();
  EXPECT_NE(bad.err.find("shapes.txt:1: expected ROWS COLS DTYPE"), std::string::npos)
      << bad.Describe();
  // A problem the daemon refuses: named by its line, nothing of the list is tuned.
  {
    std::ofstream f(shapes);
    f << "24 40 f32\n# comment\n0 8 f32\n";
  }
  CtlResult refused = Ctl({"tune", "--from", shapes});
  EXPECT_EQ(refused.exit_code, 1) << refused.Describe();
  EXPECT_NE(refused.err.find("INVALID_ARGUMENT: " + shapes + ":3: problems[1].rows: "),
            std::string::npos)
      << refused.Describe();
  StopDaemon();  // flushes the log
  // Over the TuneMany RPC: one call per run, the first one tuned both problems.
  const std::string log = ReadFile(log_);
  EXPECT_NE(log.find("rpc=TuneMany problems=2 force=false cached=0 tuned=2 failed=0 dropped=0"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("rpc=TuneMany problems=2 force=false cached=2 tuned=0"), std::string::npos)
      << log;
  EXPECT_EQ(TuneStarts(Problem{24, 40, 1, DType::kF32}.Key()), 0) << log;
}

// (e) devices, list, delete.
TEST_F(DaemonTest, DevicesListDelete) {
  CtlResult devices = Ctl({"--json", "devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.Describe();
  Json dj = devices.json();
  ASSERT_TRUE(dj.contains("devices") && dj["devices"].is_array() && !dj["devices"].empty())
      << devices.Describe();
  const Json& d0 = dj["devices"][0];
  EXPECT_EQ(d0["index"], 0);
  EXPECT_EQ(d0["backend"], "cpu");
  EXPECT_FALSE(d0["uuid"].get<std::string>().empty());
  EXPECT_FALSE(d0["fingerprint"].get<std::string>().empty());
  EXPECT_FALSE(d0["library_version"].get<std::string>().empty());
  EXPECT_GT(Int(d0["memory_bytes"]), 0);
  const std::string uuid = d0["uuid"];
  const std::string fingerprint = d0["fingerprint"];
  CtlResult devices_text = Ctl({"devices"});
  ASSERT_EQ(devices_text.exit_code, 0) << devices_text.Describe();
  EXPECT_NE(devices_text.out.find(uuid), std::string::npos) << devices_text.Describe();

  Json a = GetJson({"--rows", "64", "--cols", "96", "--dtype", "f32"});
  Json b = GetJson({"--rows", "80", "--cols", "48", "--dtype", "f32", "--device", uuid});
  Json c = GetJson({"--rows", "64", "--cols", "96", "--dtype", "f64"});
  EXPECT_EQ(b["device"]["uuid"], uuid);

  auto list = [&](std::vector<std::string> filters) -> Json {
    std::vector<std::string> args = {"--json", "list"};
    args.insert(args.end(), filters.begin(), filters.end());
    CtlResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    Json j = r.json();
    EXPECT_TRUE(j.is_object() && j.contains("entries")) << r.Describe();
    Json answers = Json::array();  // each entry's answer, with its candidates beside
    if (!j.is_object() || !j.contains("entries")) return answers;
    for (const auto& e : j["entries"]) {
      Json a = e["answer"];
      if (e.contains("candidates")) a["candidates"] = e["candidates"];
      answers.push_back(a);
    }
    return answers;
  };

  Json all = list({});
  ASSERT_EQ(all.size(), 3u) << all.dump(2);
  std::set<std::string> keys;
  for (const auto& e : all) {
    keys.insert(std::to_string(Int(e["problem"]["rows"])) + "x" +
                std::to_string(Int(e["problem"]["cols"])) + "." +
                e["problem"]["dtype"].get<std::string>());
    EXPECT_FALSE(e["variant"]["name"].get<std::string>().empty());
    EXPECT_TRUE(!e.contains("candidates") || e["candidates"].empty())
        << "candidates only with --candidates";
  }
  EXPECT_EQ(keys, (std::set<std::string>{"64x96.f32", "80x48.f32", "64x96.f64"}));

  EXPECT_EQ(list({"--dtype", "f64"}).size(), 1u);
  EXPECT_EQ(list({"--rows", "64", "--cols", "96"}).size(), 2u);
  EXPECT_EQ(list({"--rows", "80"}).size(), 1u);
  EXPECT_EQ(list({"--limit", "1"}).size(), 1u);
  EXPECT_EQ(list({"--device", "0"}).size(), 3u);
  EXPECT_EQ(list({"--device", uuid}).size(), 3u);
  EXPECT_EQ(list({"--fingerprint", fingerprint}).size(), 3u);
  EXPECT_EQ(list({"--fingerprint", "no-such-fingerprint"}).size(), 0u);
  EXPECT_EQ(list({"--variant", a["variant"]["name"].get<std::string>(), "--rows", "64", "--cols",
                  "96", "--dtype", "f32"})
                .size(),
            1u);
  EXPECT_EQ(list({"--library-version", d0["library_version"].get<std::string>()}).size(), 3u);
  EXPECT_EQ(list({"--library-version", "0.0.0-none"}).size(), 0u);
  EXPECT_EQ(list({"--older-than-days", "1"}).size(), 0u) << "everything was tuned just now";

  // --candidates: every measured candidate of each entry, the winner among them.
  Json with = list({"--candidates", "--dtype", "f64"});
  ASSERT_EQ(with.size(), 1u);
  ASSERT_TRUE(with[0].contains("candidates")) << with.dump(2);
  std::set<std::string> names;
  for (const auto& cand : with[0]["candidates"])
    names.insert(cand["variant"]["name"].get<std::string>());
  EXPECT_EQ(static_cast<int>(names.size()), with[0]["candidates_tried"].get<int>())
      << "one distinct candidate per candidate tried: " << with.dump(2);
  EXPECT_EQ(names.count(c["variant"]["name"].get<std::string>()), 1u)
      << "the winner is a candidate";
  CtlResult list_text = Ctl({"list", "--candidates", "--dtype", "f64"});
  ASSERT_EQ(list_text.exit_code, 0) << list_text.Describe();
  EXPECT_GE(Lines(list_text.out).size(), names.size() + 1) << list_text.Describe();

  // delete: an empty filter needs --all (refused by transposectl, and by the daemon).
  CtlResult refused = Ctl({"delete"});
  EXPECT_EQ(refused.exit_code, 2) << refused.Describe();
  EXPECT_NE(refused.err.find("--all"), std::string::npos) << refused.Describe();
  {
    auto client = Client::Connect(address_);
    ASSERT_TRUE(client.ok());
    v1::DeleteEntriesRequest request;  // empty filter, all = false
    auto deleted = (*client)->DeleteEntries(request);
    EXPECT_FALSE(deleted.ok()) << "the daemon deleted " << *deleted
                               << " entries for an empty filter without all";
  }
  EXPECT_EQ(list({}).size(), 3u);

  CtlResult del = Ctl({"--json", "delete", "--dtype", "f64"});
  ASSERT_EQ(del.exit_code, 0) << del.Describe();
  EXPECT_EQ(del.json()["deleted"], "1") << del.Describe();
  Json left = list({});
  EXPECT_EQ(left.size(), 2u);
  for (const auto& e : left) EXPECT_EQ(e["problem"]["dtype"], "f32");
  CtlResult gone = Ctl({"get", "--rows", "64", "--cols", "96", "--dtype", "f64", "--cache-only"});
  EXPECT_EQ(gone.exit_code, 1) << gone.Describe();
  EXPECT_EQ(gone.err.rfind("transposectl: NOT_FOUND: ", 0), 0u) << gone.Describe();

  CtlResult del_text = Ctl({"delete", "--all"});
  ASSERT_EQ(del_text.exit_code, 0) << del_text.Describe();
  EXPECT_NE(del_text.out.find("deleted 2"), std::string::npos) << del_text.Describe();
  EXPECT_EQ(list({}).size(), 0u);
}

// One streamed candidate of a Tune: index, total, variant, phase.
struct StreamedCandidate {
  int index;
  int total;
  std::string variant;
  std::string phase;
};

// The Tune stream's contract (tuner/tuner.h): the quick pass reports every candidate once, in
// order, index 1..total (phase quick, check or skipped); then each finalist's final result follows
// with its own quick-pass index (phase "final").
void ExpectCandidateStream(const std::vector<StreamedCandidate>& s, const std::string& context) {
  SCOPED_TRACE(context);
  ASSERT_FALSE(s.empty());
  const int total = s[0].total;
  ASSERT_GE(total, 1);
  ASSERT_GE(static_cast<int>(s.size()), total) << "fewer lines than quick-pass candidates";
  std::map<int, std::string> quick;
  for (int i = 0; i < total; ++i) {
    EXPECT_EQ(s[i].index, i + 1) << s[i].variant;
    EXPECT_NE(s[i].phase, "final") << "a final result before the quick pass ended";
    EXPECT_FALSE(s[i].variant.empty());
    quick[s[i].index] = s[i].variant;
  }
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i].total, total) << s[i].variant;
  std::set<std::string> distinct;
  for (const auto& [index, name] : quick) distinct.insert(name);
  EXPECT_EQ(static_cast<int>(distinct.size()), total) << "quick-pass candidates are distinct";
  for (size_t i = total; i < s.size(); ++i) {
    EXPECT_EQ(s[i].phase, "final") << s[i].variant;
    EXPECT_GE(s[i].index, 1);
    EXPECT_LE(s[i].index, total);
    EXPECT_EQ(quick[s[i].index], s[i].variant) << "a final result carries its quick-pass index";
  }
}

// (f) tune streams one progress line per candidate, then the answer.
TEST_F(DaemonTest, TuneStreamsProgressThenAnswer) {
  CtlResult text =
      Ctl({"tune", "--rows", "128", "--cols", "96", "--dtype", "f32", "--budget", "3"});
  ASSERT_EQ(text.exit_code, 0) << text.Describe();
  const std::regex progress(R"(^\[(\d+)/(\d+)\] (\S+)  ([0-9.]+) GB/s  (valid|invalid)  (\w+).*$)");
  std::vector<StreamedCandidate> streamed;
  bool table = false;
  for (const auto& line : Lines(text.out)) {
    std::smatch m;
    if (std::regex_match(line, m, progress)) {
      EXPECT_FALSE(table) << "progress after the answer: " << line;
      streamed.push_back({std::stoi(m[1]), std::stoi(m[2]), m[3], m[6]});
    } else if (line.rfind("variant:", 0) == 0) {
      table = true;
    }
  }
  ExpectCandidateStream(streamed, text.Describe());
  EXPECT_TRUE(table) << text.Describe();
  EXPECT_TRUE(std::regex_search(text.out, std::regex("source: +tuned"))) << text.Describe();

  // --json: one object per line, candidates then the answer.
  CtlResult js =
      Ctl({"--json", "tune", "--rows", "128", "--cols", "96", "--dtype", "f32", "--budget", "3"});
  ASSERT_EQ(js.exit_code, 0) << js.Describe();
  auto lines = Lines(js.out);
  ASSERT_GE(lines.size(), 2u) << js.Describe();
  int candidates = 0;
  std::vector<StreamedCandidate> streamed_json;
  for (size_t i = 0; i < lines.size(); ++i) {
    Json j = Json::parse(lines[i], nullptr, false);
    ASSERT_TRUE(j.is_object()) << "line " << i << " is not a JSON object: " << lines[i];
    if (i + 1 < lines.size()) {
      ASSERT_TRUE(j.contains("candidate")) << lines[i];
      const Json& c = j["candidate"];
      EXPECT_FALSE(c["variant"]["name"].get<std::string>().empty()) << lines[i];
      EXPECT_TRUE(c["measurement"].contains("valid") && c["measurement"].contains("gbps"))
          << lines[i];
      streamed_json.push_back({j.value("index", 0), j.value("total", 0),
                               c["variant"].value("name", std::string()),
                               c.value("phase", std::string())});
      ++candidates;
    } else {
      ASSERT_TRUE(j.contains("answer")) << lines[i];
      ExpectTunedAnswer(j["answer"], "tune --json answer");
      EXPECT_EQ(j["answer"]["source"], "SOURCE_TUNED") << lines[i];
    }
  }
  EXPECT_GE(candidates, 1);
  ExpectCandidateStream(streamed_json, js.Describe());

  // The tuned winner is what get now answers from the cache.
  Json cached = GetJson({"--rows", "128", "--cols", "96", "--dtype", "f32", "--cache-only"});
  EXPECT_EQ(cached["source"], "SOURCE_CACHE");
  EXPECT_EQ(cached["variant"], Json::parse(lines.back(), nullptr, false)["answer"]["variant"]);

  // A bad problem fails the stream with the daemon's status.
  CtlResult bad = Ctl({"tune", "--rows", "0", "--cols", "96", "--dtype", "f32"});
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe();
  EXPECT_EQ(bad.err.rfind("transposectl: INVALID_ARGUMENT: ", 0), 0u) << bad.Describe();
}

}  // namespace
}  // namespace transposed
