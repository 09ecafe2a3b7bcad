// Unit tests of the fleet helpers (client/fleet.h): address lists, fan-out to daemons that are
// not there, merging, text and JSON output. The end-to-end test with two real daemons is in
// transposectl_test.cc.
#include "client/fleet.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace transposed {
namespace {

TEST(ParseServerList, SplitsTrimsAndDropsDuplicates) {
  auto l = ParseServerList("a:1, b:2,a:1 ,c:3");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(*l, (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  l = ParseServerList("only:5");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), 1u);
}

TEST(ParseServerList, RefusesEmptyElements) {
  for (const char* bad : {"", "a:1,", ",a:1", "a:1,,b:2", " , "}) {
    auto l = ParseServerList(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(l.status().message().find("--server: element"), std::string::npos)
        << l.status().message();
  }
}

TEST(ParseServerList, BoundsTheNumberOfDaemons) {
  std::string list;
  for (size_t i = 0; i <= kMaxFleetNodes; ++i) list += (i ? "," : "") + ("h" + std::to_string(i)) + ":1";
  auto l = ParseServerList(list);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("more than"), std::string::npos);
}

class ServersFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("fleet_test_" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(ServersFileTest, OneAddressPerLineWithComments) {
  auto l = ReadServersFile(Write("# gpu nodes\nnode-1:50051\n\n  node-2:50051  \nnode-1:50051\n"));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(*l, (std::vector<std::string>{"node-1:50051", "node-2:50051"}));
}

TEST_F(ServersFileTest, NamesTheBadLine) {
  auto l = ReadServersFile(Write("node-1:50051\nnode-2:1 node-3:1\n"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find(":2: one HOST:PORT per line"), std::string::npos)
      << l.status().message();
  l = ReadServersFile(Write("# nothing\n"));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("lists no daemon"), std::string::npos);
  l = ReadServersFile("/nonexistent/servers.txt");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kNotFound);
}

v1::FleetRow EntryRow(const std::string& variant, int64_t tuned_at) {
  v1::FleetRow row;
  v1::Answer* a = row.mutable_entry()->mutable_answer();
  a->mutable_variant()->set_name(variant);
  a->set_tuned_at_unix_ms(tuned_at);
  return row;
}

TEST(FanOut, EveryDaemonAnswersOrFailsInGivenOrder) {
  // Port 1 on loopback refuses at once; the call is never reached for those.
  FleetOptions options;
  options.client.deadline_seconds = 5;
  options.parallelism = 3;
  std::vector<std::string> nodes = {"127.0.0.1:1", "", "127.0.0.1:1"};
  std::atomic<int> calls{0};
  auto results = FanOut(nodes, options, [&](Client& c, std::vector<v1::FleetRow>* rows) {
    ++calls;
    auto devices = c.ListDevices();
    if (!devices.ok()) return devices.status();
    rows->emplace_back();
    return Status::OK();
  });
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(calls.load(), 2);  // the empty address fails in Connect
  EXPECT_EQ(results[0].node, "127.0.0.1:1");
  EXPECT_EQ(results[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(results[1].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(results[2].status.code(), StatusCode::kUnavailable);
}

TEST(MergeFleet, NewestFirstAcrossDaemonsThenErrors) {
  std::vector<NodeResult> results(3);
  results[0].node = "a:1";
  results[0].rows = {EntryRow("old", 100), EntryRow("newest", 300)};
  results[1].node = "b:1";
  results[1].status = Status::Unavailable("connection refused");
  results[2].node = "c:1";
  results[2].rows = {EntryRow("middle", 200)};
  for (auto& r : results)
    for (auto& row : r.rows) row.set_node(r.node);
  v1::FleetReply reply = MergeFleet(results, FleetOrder::kNewestFirst, false);
  ASSERT_EQ(reply.rows_size(), 4);
  EXPECT_EQ(reply.rows(0).entry().answer().variant().name(), "newest");
  EXPECT_EQ(reply.rows(0).node(), "a:1");
  EXPECT_EQ(reply.rows(1).entry().answer().variant().name(), "middle");
  EXPECT_EQ(reply.rows(1).node(), "c:1");
  EXPECT_EQ(reply.rows(2).entry().answer().variant().name(), "old");
  EXPECT_EQ(reply.rows(3).node(), "b:1");
  EXPECT_EQ(reply.rows(3).error().code(), "UNAVAILABLE");
  EXPECT_EQ(reply.rows(3).error().message(), "connection refused");
  EXPECT_EQ(reply.nodes(), 3);
  EXPECT_EQ(reply.failed(), 1);
  EXPECT_EQ(reply.missed(), 0);

  const std::string text = FleetToText(reply, "entries");
  EXPECT_NE(text.find("a:1  device=0"), std::string::npos) << text;
  EXPECT_NE(text.find("b:1  UNAVAILABLE: connection refused"), std::string::npos) << text;
  EXPECT_NE(text.find("3 entries from 3 daemons, 1 failed"), std::string::npos) << text;
}

TEST(MergeFleet, CacheOnlyMissesAreNotFailures) {
  std::vector<NodeResult> results(2);
  results[0].node = "a:1";
  results[0].status = Status::NotFound("no cached configuration");
  results[1].node = "b:1";
  results[1].status = Status::Internal("disk");
  v1::FleetReply miss = MergeFleet(results, FleetOrder::kNodeOrder, true);
  EXPECT_EQ(miss.missed(), 1);
  EXPECT_EQ(miss.failed(), 1);
  v1::FleetReply strict = MergeFleet(results, FleetOrder::kNodeOrder, false);
  EXPECT_EQ(strict.missed(), 0);
  EXPECT_EQ(strict.failed(), 2);
}

TEST(FleetToJson, IsTheProtobufJsonOfTheReply) {
  std::vector<NodeResult> results(1);
  results[0].node = "a:1";
  results[0].rows = {EntryRow("tile32x32.rows8", 1700000000000)};
  results[0].rows[0].set_node("a:1");
  v1::FleetReply reply = MergeFleet(results, FleetOrder::kNodeOrder, false);
  auto json = FleetToJson(reply);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"tuned_at_unix_ms\": \"1700000000000\""), std::string::npos) << *json;
  v1::FleetReply back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), reply.SerializeAsString());
}

}  // namespace
}  // namespace transposed
