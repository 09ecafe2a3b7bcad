// Issue 22's descriptor probe against the real daemon: under a 256-descriptor limit, a flood of
// idle connections from 8 client hosts (more than the descriptors the daemon has) never makes
// accept(2) fail: the connections beyond the caps are shed at accept, the client already served
// keeps its connection, nothing is rebuilt, and new clients are served once the flood goes.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon_process.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

using namespace std::chrono_literals;

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::GetConfigRequest Request(int64_t rows, int64_t cols, bool cache_only) {
  v1::GetConfigRequest req;
  req.mutable_problem()->set_rows(rows);
  req.mutable_problem()->set_cols(cols);
  req.mutable_problem()->set_dtype("f32");
  if (cache_only) req.set_policy(v1::CACHE_ONLY);
  return req;
}

grpc::Status Get(v1::Transposer::Stub* stub, const v1::GetConfigRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  v1::Answer a;
  return stub->GetConfig(&ctx, req, &a);
}

// An idle TCP connection to 127.0.0.1:port from `source`, connecting in the background (the
// daemon's short accept queue makes the kernel drop SYNs, which the client retries); -1 when
// connect fails at once.
int IdleConnection(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS)) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(FdFlood, AcceptNeverFailsUnderADescriptorLimitOf256) {
  // This process holds the flood's client ends: it needs more descriptors than the daemon.
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < 2048 && lim.rlim_max >= 2048) {
    lim.rlim_cur = 2048;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  }
  testing::DaemonOptions o;
  o.binary = TRANSPOSED_BINARY;
  o.tune_budget_seconds = 1;
  o.max_open_files = 256;
  o.extra_args = {"--cpu-threads", "1", "--metrics-listen", "127.0.0.1:0"};
  testing::DaemonProcess d(o);
  const Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();

  // A client served before the flood, on its own connection.
  auto served = v1::Transposer::NewStub(
      grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Get(served.get(), Request(32, 48, false)).ok());

  // 8 hosts x 60 idle connections: under the per-client cap (64), far over what 256 descriptors
  // hold. Opened 8 at a time (one per host), each group connected before the next, as many
  // clients arriving together would.
  std::vector<int> flood;
  for (int round = 0; round < 60; ++round) {
    std::vector<pollfd> group;
    for (int host = 2; host <= 9; ++host) {
      const std::string source = "127.0.0." + std::to_string(host);
      const int fd = IdleConnection(source.c_str(), d.port());
      if (fd < 0) continue;
      flood.push_back(fd);
      group.push_back(pollfd{fd, POLLOUT, 0});
    }
    const auto until = std::chrono::steady_clock::now() + 3s;
    for (pollfd& p : group) {
      while (std::chrono::steady_clock::now() < until && poll(&p, 1, 50) == 0) {
      }
    }
  }
  EXPECT_GT(flood.size(), 256u);
  std::this_thread::sleep_for(1s);  // the daemon accepts (and sheds) the last ones

  // The client served before still is; the daemon never stopped accepting.
  grpc::Status s = Get(served.get(), Request(32, 48, true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::string log = ReadFile(d.log());
  EXPECT_EQ(log.find("Failed accept4"), std::string::npos) << log.substr(0, 4000);
  EXPECT_EQ(log.find("stopped accepting connections"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics on \S+ \(port (\d+)\))")));
  std::string error;
  const auto metrics =
      testing::ParseMetrics(testing::HttpGet(std::stoi(m[1]), "/metrics", &error));
  double refused = 0;  // at the total cap, or by the descriptor guard
  for (const char* cap : {"total", "descriptors", "per_client"}) {
    const auto it =
        metrics.find(std::string("transposed_connections_refused_total{cap=\"") + cap + "\"}");
    ASSERT_NE(it, metrics.end()) << error;
    refused += it->second;
  }
  EXPECT_GT(refused, 0) << log;

  for (int fd : flood) close(fd);
  // Once the flood is gone, a new client is served (the closed connections give their places
  // back at the next accept).
  std::this_thread::sleep_for(1s);
  auto fresh = v1::Transposer::NewStub(
      grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  s = Get(fresh.get(), Request(32, 48, true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = Get(served.get(), Request(32, 48, true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  log = ReadFile(d.log());
  EXPECT_EQ(log.find("Failed accept4"), std::string::npos);
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}

}  // namespace
}  // namespace transposed
