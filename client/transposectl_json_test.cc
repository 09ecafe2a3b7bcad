// One JSON mapping for every `transposectl --json` output and every export line (issue 37): each
// command's output, against a real daemon (CPU backend) and a fleet of two, parses strictly
// (unknown fields refused) as the message it claims to be, and printing that message again in the
// one mapping (proto/json.h) gives the same JSON. So `get`, `tune`, `tune --from`, `devices`,
// `list`, `delete`, `export`, `import` and `--server A,B` all speak protobuf's mapping with the
// same options ("source": "SOURCE_CACHE", rows as strings, zero fields present).
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "proto/json.h"
#include "testing/daemon_process.h"
#include "testing/test_files.h"
#include "transposed/v1/fleet.pb.h"
#include "transposed/v1/transposed.pb.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;
const std::string kCtl = std::string(TRANSPOSED_BIN_DIR) + "/transposectl";
const std::string kDaemon = std::string(TRANSPOSED_DAEMON_DIR) + "/transposed";

struct CtlRun {
  int exit_code = -1;
  std::string out;
  std::string command;
};

// transposectl with `args` (words without spaces or quotes); stdout captured, stderr shown.
CtlRun Ctl(const std::string& args) {
  CtlRun r;
  r.command = kCtl + " --timeout 120 " + args;
  FILE* p = popen(r.command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `text` is the message M in the one mapping with `layout`: it parses strictly, and printing the
// parsed message again gives the same JSON (compared as JSON values: map order is free).
template <typename M>
void ExpectOneMapping(const std::string& text, JsonLayout layout, const std::string& what) {
  SCOPED_TRACE(what + ":\n" + text);
  M message;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &message, strict);
  ASSERT_TRUE(parsed.ok()) << "not a " << M::descriptor()->full_name() << ": " << parsed.ToString();
  auto again = ProtoToJson(message, layout);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(nlohmann::json::parse(text), nlohmann::json::parse(*again));
  EXPECT_EQ(text.find('\n') == std::string::npos, layout == JsonLayout::kLine)
      << "one line for streams and export, indented for one reply";
}

template <typename M>
void ExpectLines(const CtlRun& r, const std::string& what, size_t at_least) {
  ASSERT_EQ(r.exit_code, 0) << r.command;
  std::istringstream in(r.out);
  size_t n = 0;
  for (std::string line; std::getline(in, line); ++n)
    ExpectOneMapping<M>(line, JsonLayout::kLine, what);
  EXPECT_GE(n, at_least) << r.command << "\n" << r.out;
}

template <typename M>
void ExpectReply(const CtlRun& r, const std::string& what) {
  ASSERT_EQ(r.exit_code, 0) << r.command;
  std::string text = r.out;
  ASSERT_FALSE(text.empty()) << r.command;
  ASSERT_EQ(text.back(), '\n');
  text.pop_back();
  ExpectOneMapping<M>(text, JsonLayout::kIndented, what);
}

TEST(TransposectlJson, EveryCommandSpeaksTheOneMapping) {
  testing::DaemonOptions options;
  options.binary = kDaemon;
  options.tune_budget_seconds = 3;
  testing::DaemonProcess a(options), b(options);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  const std::string at = "--server " + a.address() + " ";
  const std::string both = "--server " + a.address() + "," + b.address() + " ";
  const std::string problem = "--rows 48 --cols 40 --dtype f32";

  CtlRun tuned = Ctl(at + "--json get " + problem);
  ExpectReply<v1::Answer>(tuned, "get (a tune)");
  EXPECT_NE(tuned.out.find("\"source\": \"SOURCE_TUNED\""), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("\"rows\": \"48\""), std::string::npos) << tuned.out;
  CtlRun cached = Ctl(at + "get " + problem + " --json");
  ExpectReply<v1::Answer>(cached, "get (a hit)");
  EXPECT_NE(cached.out.find("\"source\": \"SOURCE_CACHE\""), std::string::npos) << cached.out;
  ExpectLines<v1::TuneProgress>(Ctl(at + "--json tune --rows 40 --cols 24 --dtype f16 --budget 1"),
                                "tune", 2);
  const fs::path shapes = a.dir() / "shapes.txt";
  std::ofstream(shapes) << "48 40 f32\n24 24 u8\n";
  ExpectLines<v1::Answer>(Ctl(at + "--json tune --from " + shapes.string()), "tune --from", 2);
  ExpectReply<v1::ListDevicesResponse>(Ctl(at + "--json devices"), "devices");
  ExpectReply<v1::ListEntriesResponse>(Ctl(at + "--json list --candidates"), "list");
  const fs::path exported = a.dir() / "export.jsonl";
  CtlRun exp = Ctl(at + "export");
  ExpectLines<v1::ExportedEntry>(exp, "export", 3);
  std::ofstream(exported) << exp.out;
  ExpectReply<v1::ImportEntriesResponse>(
      Ctl("--server " + b.address() + " --json import " + exported.string()), "import");
  ExpectReply<v1::DeleteEntriesResponse>(Ctl(at + "--json delete --dtype u8"), "delete");
  // A fleet: the same mapping, rows naming their daemon.
  ExpectReply<v1::FleetReply>(Ctl(both + "--json devices"), "fleet devices");
  ExpectReply<v1::FleetReply>(Ctl(both + "--json list"), "fleet list");
  ExpectReply<v1::FleetReply>(Ctl(both + "--json get --cache-only " + problem), "fleet get");
  EXPECT_TRUE(a.Stop().ok());
  EXPECT_TRUE(b.Stop().ok());
  if (!::testing::Test::HasFailure()) {
    a.RemoveDir();
    b.RemoveDir();
  }
}

}  // namespace
}  // namespace transposed
