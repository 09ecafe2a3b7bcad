// End-to-end tests of the fleet features with several real daemons (CPU backend, each in its own
// temporary directory, started by the shared testing::DaemonProcess) driven by the real
// `transposectl`: fan-out queries across daemons (`--server a,b`); two CPU daemons with distinct
// instance ids (--instance-id, as two nodes of one device class) sharing results through
// export/import, --seed and --peer.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"
#include "testing/daemon_process.h"
#include "testing/test_files.h"

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
      EXPECT_TRUE(s.ok()) << s.ToString() << "\nlog:\n" << testing::ReadFile(d->log());
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
    r.err = testing::ReadFile(err_file);
    return r;
  }

  // `transposectl --json get --cache-only` on one daemon; the parsed answer (null on a miss).
  Json CacheOnly(testing::DaemonProcess* d, const std::string& problem, Ctl* out) {
    *out = RunCtl("--json --server " + d->address() + " get " + problem + " --cache-only");
    if (out->exit_code != 0) return Json();
    return Json::parse(out->out, nullptr, false);
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

TEST_F(FleetTest, TwoInstancesOfOneClassShareThroughExportImportAndSeed) {
  auto* a = StartDaemon({"--instance-id", "node-a"});
  auto* b = StartDaemon({"--instance-id", "node-b"});
  ASSERT_TRUE(a && b);
  const v1::Answer tuned = Tune(a, 80, 56, "f32");
  ASSERT_EQ(tuned.measured_on().uuid(), "node-a");
  ASSERT_EQ(tuned.device().uuid(), "node-a");
  const std::string problem = "--rows 80 --cols 56 --dtype f32";

  // Distinct instances, one class.
  Ctl devices = RunCtl("--json --server " + a->address() + "," + b->address() + " devices");
  ASSERT_EQ(devices.exit_code, 0) << devices.Describe();
  Json dj = Json::parse(devices.out, nullptr, false);
  ASSERT_EQ(dj["rows"].size(), 2u) << devices.out;
  EXPECT_NE(dj["rows"][0]["device"]["uuid"], dj["rows"][1]["device"]["uuid"]);
  EXPECT_NE(dj["rows"][0]["device"]["fingerprint"], dj["rows"][1]["device"]["fingerprint"]);
  EXPECT_EQ(dj["rows"][0]["device"]["device_class"], dj["rows"][1]["device"]["device_class"]);

  Ctl miss;
  EXPECT_TRUE(CacheOnly(b, problem, &miss).is_null());
  EXPECT_EQ(miss.exit_code, 1) << miss.Describe();

  // Export from a (every candidate carried), import into b.
  const std::string file = (a->dir() / "results.jsonl").string();
  Ctl exp = RunCtl("--server " + a->address() + " export > " + file);
  ASSERT_EQ(exp.exit_code, 0) << exp.Describe();
  const std::string text = testing::ReadFile(file);
  ASSERT_FALSE(text.empty());
  Json row = Json::parse(text.substr(0, text.find('\n')), nullptr, false);
  ASSERT_TRUE(row.is_object()) << text;
  EXPECT_EQ(row["measured_on"]["uuid"], "node-a");
  EXPECT_EQ(row["candidates"].size(), static_cast<size_t>(tuned.candidates_tried())) << row.dump();

  Ctl imp = RunCtl("--server " + b->address() + " import " + file);
  ASSERT_EQ(imp.exit_code, 0) << imp.Describe();
  EXPECT_NE(imp.out.find("imported 1, kept 0"), std::string::npos) << imp.out;

  // b serves it for its own device, saying where it was measured; no tune on b.
  Ctl hit;
  Json j = CacheOnly(b, problem, &hit);
  ASSERT_TRUE(j.is_object()) << hit.Describe();
  EXPECT_EQ(j["source"], "SOURCE_CACHE");
  EXPECT_EQ(j["origin"], "ORIGIN_IMPORTED");
  EXPECT_EQ(j["device"]["uuid"], "node-b");
  EXPECT_EQ(j["measured_on"]["uuid"], "node-a");
  EXPECT_EQ(j["variant"]["name"], tuned.variant().name());
  EXPECT_DOUBLE_EQ(j["gbps"].get<double>(), tuned.gbps());
  EXPECT_EQ(testing::ReadFile(b->log()).find("tune start"), std::string::npos);

  // The same file again: nothing is faster, nothing changes (never a downgrade either way).
  Ctl again = RunCtl("--server " + b->address() + " import " + file);
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_NE(again.out.find("imported 0, kept 1"), std::string::npos) << again.out;

  // Rows of another kernel library version are refused and counted; a broken row is invalid.
  std::string other = text.substr(0, text.find('\n'));
  const std::string lib = tuned.device().library_version();
  for (size_t pos = other.find(lib); pos != std::string::npos; pos = other.find(lib, pos))
    other.replace(pos, lib.size(), "0.0.1+kfffffffff0");
  {
    std::ofstream out(a->dir() / "mixed.jsonl");
    out << other << "\n" << "{\"answer\": 5}\n" << text;
  }
  // (the class leaves the library version out, schema version 5: the edited row is still of its
  // class, and refused for its version)
  Ctl mixed = RunCtl("--server " + b->address() + " import " + (a->dir() / "mixed.jsonl").string());
  EXPECT_EQ(mixed.exit_code, 1) << mixed.Describe();
  EXPECT_NE(mixed.out.find("read 3 rows"), std::string::npos) << mixed.out;
  EXPECT_NE(mixed.out.find("refused 1 (unknown kernel library version), invalid 1"),
            std::string::npos)
      << mixed.out;
  EXPECT_NE(mixed.out.find("mixed.jsonl:2: not an ExportedEntry"), std::string::npos) << mixed.out;
  // Without the class field the edited row is a valid row of an unknown library: refused.
  Json unknown = Json::parse(other);
  unknown["measured_on"].erase("device_class");
  {
    std::ofstream out(a->dir() / "old.jsonl");
    out << unknown.dump() << "\n";
  }
  Ctl old = RunCtl("--server " + b->address() + " import " + (a->dir() / "old.jsonl").string());
  EXPECT_EQ(old.exit_code, 1) << old.Describe();
  EXPECT_NE(old.out.find("refused 1 (unknown kernel library version)"), std::string::npos)
      << old.out;

  // --seed: a third node starts with the file and serves it at once.
  auto* c = StartDaemon({"--instance-id", "node-c", "--seed", file});
  ASSERT_TRUE(c);
  Ctl seeded;
  j = CacheOnly(c, problem, &seeded);
  ASSERT_TRUE(j.is_object()) << seeded.Describe();
  EXPECT_EQ(j["measured_on"]["uuid"], "node-a");
  EXPECT_EQ(j["device"]["uuid"], "node-c");
  EXPECT_NE(testing::ReadFile(c->log()).find("imported=1"), std::string::npos);
}

TEST_F(FleetTest, AMissAsksPeersOfTheClassBeforeTuning) {
  auto* a = StartDaemon({"--instance-id", "node-a"});
  ASSERT_TRUE(a);
  const v1::Answer tuned = Tune(a, 72, 40, "f16");
  // b knows a (and a dead address, and itself is not needed): a miss on b is answered by a.
  auto* b = StartDaemon(
      {"--instance-id", "node-b", "--peer", a->address(), "--peer", "127.0.0.1:1"});
  ASSERT_TRUE(b);
  Ctl got = RunCtl("--json --server " + b->address() + " get --rows 72 --cols 40 --dtype f16");
  ASSERT_EQ(got.exit_code, 0) << got.Describe();
  Json j = Json::parse(got.out, nullptr, false);
  EXPECT_EQ(j["source"], "SOURCE_PEER") << got.out;
  EXPECT_EQ(j["measured_on"]["uuid"], "node-a");
  EXPECT_EQ(j["device"]["uuid"], "node-b");
  EXPECT_EQ(j["variant"]["name"], tuned.variant().name());
  const std::string log_b = testing::ReadFile(b->log());
  EXPECT_EQ(log_b.find("tune start"), std::string::npos) << log_b;
  // Stored as from a peer: the next request is a plain cache hit.
  Ctl hit;
  j = CacheOnly(b, "--rows 72 --cols 40 --dtype f16", &hit);
  ASSERT_TRUE(j.is_object()) << hit.Describe();
  EXPECT_EQ(j["source"], "SOURCE_CACHE");
  EXPECT_EQ(j["origin"], "ORIGIN_PEER");

  // A problem no peer has: b tunes it itself.
  Ctl tuned_b = RunCtl("--json --server " + b->address() + " get --rows 48 --cols 24 --dtype f32");
  ASSERT_EQ(tuned_b.exit_code, 0) << tuned_b.Describe();
  j = Json::parse(tuned_b.out, nullptr, false);
  EXPECT_EQ(j["source"], "SOURCE_TUNED");
  EXPECT_EQ(j["measured_on"]["uuid"], "node-b");

  // A peer of another class is never used: c has a different thread cap, so a different class.
  auto* c = StartDaemon({"--instance-id", "node-c", "--cpu-threads", "1", "--peer", a->address()});
  ASSERT_TRUE(c);
  Ctl other = RunCtl("--json --server " + c->address() + " get --rows 72 --cols 40 --dtype f16");
  ASSERT_EQ(other.exit_code, 0) << other.Describe();
  j = Json::parse(other.out, nullptr, false);
  EXPECT_EQ(j["source"], "SOURCE_TUNED") << other.out;
  EXPECT_EQ(j["measured_on"]["uuid"], "node-c");
}

// The largest resident set the process has had (VmHWM), in bytes; -1 if unknown.
int64_t PeakResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "... kB"
  return -1;
}

// ExportEntries streams the cache page by page from the store: exporting 6,000 entries (each with
// all its candidates) returns every one exactly once, newest first, while the daemon's peak
// resident memory grows by far less than the entries take (on 2026-11-23: 8 KiB; loading them
// all at once, as before, grew it by 36 MB for the 19 MB sent).
TEST_F(FleetTest, ExportStreamsPagesWithBoundedMemory) {
  auto* a = StartDaemon();
  ASSERT_TRUE(a);
  ClientOptions o;
  o.deadline_seconds = 300;
  auto client = Client::Connect(a->address(), o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Problem p;
  p.rows = 64;
  p.cols = 96;
  p.dtype = DType::kF32;
  auto tuned = (*client)->GetConfig(p);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  v1::ExportedEntry model;
  auto one = (*client)->ExportEntries(v1::ExportEntriesRequest(), [&](const v1::ExportedEntry& e) {
    model = e;
    return Status::OK();
  });
  ASSERT_TRUE(one.ok() && *one == 1) << one.status().ToString();
  ASSERT_GT(model.candidates_size(), 0);

  // 6,000 entries of other shapes, same candidates, imported 1,000 per call.
  constexpr int kEntries = 6000;
  for (int batch = 0; batch < kEntries / 1000; ++batch) {
    v1::ImportEntriesRequest request;
    for (int i = 0; i < 1000; ++i) {
      const int n = batch * 1000 + i;
      v1::ExportedEntry* e = request.add_entries();
      *e = model;
      e->mutable_answer()->mutable_problem()->set_rows(128 + n);
      e->mutable_answer()->mutable_problem()->set_cols(64 + 2 * (n % 7));
    }
    auto imported = (*client)->ImportEntries(request);
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    ASSERT_EQ(imported->imported(), 1000) << imported->DebugString();
  }

  const int64_t before = PeakResidentBytes(a->pid());
  std::set<std::string> seen;
  int64_t bytes = 0;
  auto exported =
      (*client)->ExportEntries(v1::ExportEntriesRequest(), [&](const v1::ExportedEntry& e) {
        seen.insert(e.answer().problem().DebugString());
        bytes += static_cast<int64_t>(e.ByteSizeLong());
        return Status::OK();
      });
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(*exported, kEntries + 1);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kEntries + 1));
  const int64_t growth = PeakResidentBytes(a->pid()) - before;
  std::printf("export of %d entries (%lld bytes on the wire): daemon peak RSS grew by %lld bytes\n",
              kEntries + 1, static_cast<long long>(bytes), static_cast<long long>(growth));
  EXPECT_LT(growth, bytes / 4) << "the export should hold one page at a time, not every entry";
}

}  // namespace
}  // namespace transposed
