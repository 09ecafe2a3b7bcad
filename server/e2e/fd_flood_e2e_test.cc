// Issue 22's descriptor probes against the real daemon, under a 256-descriptor limit:
// - a flood of idle connections from 8 client hosts (more than the descriptors the daemon has)
//   never makes accept(2) fail: the connections beyond the caps are shed at accept, the client
//   already served keeps its connection, and new clients are served once the flood goes;
// - when the table is full anyway (the limit lowered under the running daemon with prlimit, as
//   a leak of its own files would), the newest connections are shed and the established ones
//   stay: a client's channel never leaves READY;
// - idle connections close after --connection-idle-timeout.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon_process.h"
#include "testing/requests.h"
#include "testing/test_files.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

using namespace std::chrono_literals;
using testing::ConnectFrom;
using testing::GetConfigRequestFor;
using testing::OpenFilesOf;
using testing::ReadFile;
using testing::SendHttp2Preface;

grpc::Status Get(v1::Transposer::Stub* stub, const v1::GetConfigRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  v1::Answer a;
  return stub->GetConfig(&ctx, req, &a);
}

// A connection that speaks HTTP/2 like an idle gRPC client: from `source` (127.0.0.x), the client
// preface and an empty SETTINGS frame, then nothing. -1 when connect fails; a SYN dropped by a
// full accept queue is retried within the connect's 5 s.
int IdleHttp2(const char* source, int port) {
  const int fd = ConnectFrom(source, port, /*nonblocking=*/false, /*connect_timeout_s=*/5);
  if (fd >= 0) SendHttp2Preface(fd);  // may fail on a reset connection
  return fd;
}

// Whether the daemon still holds the connection: it sent its frames and has not closed or
// reset it. Reads what is there without waiting.
bool StillOpen(int fd) {
  char buf[4096];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// Watches a channel from READY: `left` once its state changes (the connection closed or failed).
class ReadyWatch {
 public:
  explicit ReadyWatch(std::shared_ptr<grpc::Channel> channel) : channel_(std::move(channel)) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        if (channel_->WaitForStateChange(GRPC_CHANNEL_READY,
                                         std::chrono::system_clock::now() + 100ms)) {
          left_.store(true);
          return;
        }
      }
    });
  }
  ~ReadyWatch() {
    stop_.store(true);
    thread_.join();
  }
  bool left() const { return left_.load(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> left_{false};
  std::thread thread_;
};

// A daemon limited to 256 descriptors, with this process (which holds the flood's client ends)
// raised to 2048 where its hard limit allows.
testing::DaemonOptions FloodedDaemonOptions() {
  rlimit lim{};
  EXPECT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < 2048 && lim.rlim_max >= 2048) {
    lim.rlim_cur = 2048;
    EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  }
  testing::DaemonOptions o;
  o.binary = TRANSPOSED_BINARY;
  o.tune_budget_seconds = 1;
  o.max_open_files = 256;
  return o;
}

TEST(FdFlood, AcceptNeverFailsUnderADescriptorLimitOf256) {
  testing::DaemonOptions o = FloodedDaemonOptions();
  o.extra_args = {"--cpu-threads", "1", "--metrics-listen", "127.0.0.1:0"};
  testing::DaemonProcess d(o);
  const Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();

  // A client served before the flood, on its own connection.
  auto served = v1::Transposer::NewStub(
      grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Get(served.get(), GetConfigRequestFor(32, 48)).ok());

  // 8 hosts x 60 idle connections: under the per-client cap (64), far over what 256 descriptors
  // hold. Opened 8 at a time (one per host), each group connected before the next, as many
  // clients arriving together would.
  std::vector<int> flood;
  for (int round = 0; round < 60; ++round) {
    std::vector<pollfd> group;
    for (int host = 2; host <= 9; ++host) {
      const std::string source = "127.0.0." + std::to_string(host);
      // Connecting in the background (the daemon's short accept queue makes the kernel drop SYNs,
      // which the client retries).
      const int fd = ConnectFrom(source.c_str(), d.port(), /*nonblocking=*/true);
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
  grpc::Status s = Get(served.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::string log = ReadFile(d.log());
  EXPECT_EQ(log.find("Failed accept4"), std::string::npos) << log.substr(0, 4000);
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
  s = Get(fresh.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = Get(served.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  log = ReadFile(d.log());
  EXPECT_EQ(log.find("Failed accept4"), std::string::npos);
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}


// The table full anyway: once 40 idle connections are held, the daemon's descriptor limit is
// lowered to what it has open plus 8 (prlimit, as a leak of its own files or an admin would), and
// 40 more arrive. Accept fails with EMFILE: the listener resets what waits, ends the newest
// admitted connections (at most --max-connections' burst / 2 = 16 a second), and goes on. A
// client whose channel was READY before stays READY on the same connection throughout and is
// served; the oldest flood connections stay; new clients are served once the flood goes. (gRPC's
// own listener gave up at EMFILE, and the daemon rebuilt its server: every connection dropped.)
TEST(FdFlood, AtAFullTableTheNewestConnectionsAreShedAndEstablishedOnesStay) {
  testing::DaemonOptions o = FloodedDaemonOptions();
  o.extra_args = {"--cpu-threads", "1"};
  testing::DaemonProcess d(o);
  const Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();

  auto channel = grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials());
  auto served = v1::Transposer::NewStub(channel);
  ASSERT_TRUE(Get(served.get(), GetConfigRequestFor(32, 48)).ok());
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  ReadyWatch watch(channel);

  std::vector<int> older, newer;
  for (int i = 0; i < 40; ++i) {
    const std::string source = "127.0.0." + std::to_string(2 + i % 8);
    const int fd = IdleHttp2(source.c_str(), d.port());
    ASSERT_GE(fd, 0) << std::strerror(errno);
    older.push_back(fd);
  }
  std::this_thread::sleep_for(500ms);
  for (size_t i = 0; i < older.size(); ++i) ASSERT_TRUE(StillOpen(older[i])) << i;

  const int open_now = OpenFilesOf(d.pid());
  ASSERT_GT(open_now, 40);
  const rlimit lowered{static_cast<rlim_t>(open_now + 8), static_cast<rlim_t>(open_now + 8)};
  ASSERT_EQ(prlimit(d.pid(), RLIMIT_NOFILE, &lowered, nullptr), 0) << std::strerror(errno);
  for (int i = 0; i < 40; ++i) {
    const std::string source = "127.0.0." + std::to_string(2 + i % 8);
    const int fd = IdleHttp2(source.c_str(), d.port());
    if (fd >= 0) newer.push_back(fd);
  }
  std::this_thread::sleep_for(1500ms);

  // The established client: same connection, served.
  EXPECT_FALSE(watch.left()) << "the channel left READY: its connection was closed";
  grpc::Status s = Get(served.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(watch.left());
  // The oldest flood connections stay (at most 16, the newest, were ended at the first EMFILE).
  for (size_t i = 0; i + 16 < older.size(); ++i)
    EXPECT_TRUE(StillOpen(older[i])) << "flood connection " << i << " of the first 40";
  int newer_shed = 0;
  for (int fd : newer) newer_shed += StillOpen(fd) ? 0 : 1;
  EXPECT_GT(newer_shed, 0);
  std::string log = ReadFile(d.log());
  EXPECT_NE(log.find("the descriptor table is full"), std::string::npos) << log;
  EXPECT_EQ(log.find("Failed accept4"), std::string::npos) << log;

  for (int fd : older) close(fd);
  for (int fd : newer) close(fd);
  std::this_thread::sleep_for(1s);
  auto fresh = v1::Transposer::NewStub(
      grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  s = Get(fresh.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = Get(served.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(watch.left()) << "the established channel reconnected";
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}

// --connection-idle-timeout (here from the config file, as a deployment sets it): a gRPC
// client's connection with no call open, and an idle HTTP/2 connection of a flood, are closed
// after about that long, not after the default minute.
TEST(FdFlood, IdleConnectionsCloseAfterTheConfiguredTime) {
  testing::DaemonOptions o;
  o.binary = TRANSPOSED_BINARY;
  o.tune_budget_seconds = 1;
  const std::filesystem::path config =
      std::filesystem::temp_directory_path() /
      ("transposed-idle-" + std::to_string(getpid()) + ".toml");
  {
    std::ofstream out(config);
    out << "connection-idle-timeout = 1.5\n";
  }
  o.extra_args = {"--cpu-threads", "1", "--config", config.string()};
  testing::DaemonProcess d(o);
  const Status started = d.Start();
  std::filesystem::remove(config);
  ASSERT_TRUE(started.ok()) << started.ToString();

  auto channel = grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Transposer::NewStub(channel);
  ASSERT_TRUE(Get(stub.get(), GetConfigRequestFor(32, 48)).ok());
  const auto idle_since = std::chrono::steady_clock::now();
  const int raw = IdleHttp2("127.0.0.2", d.port());
  ASSERT_GE(raw, 0);
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // Well within the timeout, both are open.
  EXPECT_FALSE(channel->WaitForStateChange(GRPC_CHANNEL_READY,
                                           std::chrono::system_clock::now() + 700ms));
  EXPECT_TRUE(StillOpen(raw));
  EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY,
                                          std::chrono::system_clock::now() + 20s))
      << "the idle connection was not closed";
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since).count();
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 15.0);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (StillOpen(raw) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(StillOpen(raw)) << "the idle HTTP/2 connection was not closed";
  close(raw);
  // The client reconnects at its next call.
  EXPECT_TRUE(Get(stub.get(), GetConfigRequestFor(32, 48, /*cache_only=*/true)).ok());
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}

}  // namespace
}  // namespace transposed
