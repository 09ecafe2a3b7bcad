// ConnectionLimiter on real loopback TCP connections: caps per client host (127.0.0.1 and
// 127.0.0.2 are two hosts) and in total, closed connections give their place back, a descriptor
// number reused by a new connection is not mistaken for the old one.
#include "server/grpc/connection_limiter.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace transposed {
namespace {

class Loopback {
 public:
  Loopback() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = addr.sin_port;
    listen(listener_, 64);
  }
  ~Loopback() {
    for (int fd : fds_) close(fd);
    close(listener_);
  }
  // Connects from `source` (127.0.0.x) and returns the server side's descriptor.
  int Accept(const char* source) {
    // Client sides live at high descriptor numbers, so that accept gets the lowest free one.
    const int low = socket(AF_INET, SOCK_STREAM, 0);
    const int client = fcntl(low, F_DUPFD_CLOEXEC, 512);
    close(low);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    EXPECT_EQ(bind(client, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = port_;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    fds_.push_back(client);
    const int server = accept(listener_, nullptr, nullptr);
    EXPECT_GE(server, 0);
    fds_.push_back(server);
    return server;
  }
  // Closes a server-side descriptor from Accept.
  void Close(int fd) {
    for (auto& f : fds_)
      if (f == fd) f = -1;
    close(fd);
  }

 private:
  int listener_ = -1;
  in_port_t port_ = 0;
  std::vector<int> fds_;
};

TEST(ConnectionLimiterTest, ClientOfNamesTheHost) {
  Loopback net;
  EXPECT_EQ(ConnectionLimiter::ClientOf(net.Accept("127.0.0.1")), "ipv4:127.0.0.1");
  EXPECT_EQ(ConnectionLimiter::ClientOf(net.Accept("127.0.0.2")), "ipv4:127.0.0.2");
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_EQ(ConnectionLimiter::ClientOf(pair[0]), "unix");
  close(pair[0]);
  close(pair[1]);
}

TEST(ConnectionLimiterTest, CapsPerClientAndInTotal) {
  Loopback net;
  std::vector<std::string> refusals;
  ConnectionLimiter limiter(/*per_client=*/2, /*total=*/3,
                            [&](const char* cap) { refusals.push_back(cap); });
  const int a1 = net.Accept("127.0.0.1");
  const int a2 = net.Accept("127.0.0.1");
  EXPECT_TRUE(limiter.Admit(a1));
  EXPECT_TRUE(limiter.Admit(a2));
  EXPECT_FALSE(limiter.Admit(net.Accept("127.0.0.1")));  // a third from one host
  EXPECT_EQ(limiter.Open("ipv4:127.0.0.1"), 2);
  EXPECT_TRUE(limiter.Admit(net.Accept("127.0.0.2")));   // another host
  EXPECT_FALSE(limiter.Admit(net.Accept("127.0.0.3")));  // total 3 reached
  EXPECT_EQ(refusals, (std::vector<std::string>{"per_client", "total"}));
  EXPECT_EQ(limiter.refused(), 2);
  EXPECT_EQ(limiter.OpenTotal(), 3);

  // A closed connection gives its place back; its descriptor number, reused by the next
  // connection, names another socket and is not counted twice.
  net.Close(a1);
  const int again = net.Accept("127.0.0.1");
  EXPECT_EQ(again, a1) << "expected the lowest free descriptor to be reused";
  EXPECT_TRUE(limiter.Admit(again));
  EXPECT_EQ(limiter.Open("ipv4:127.0.0.1"), 2);
  EXPECT_EQ(limiter.OpenTotal(), 3);
  EXPECT_FALSE(limiter.Admit(net.Accept("127.0.0.1")));

  // Connections closed by other hosts are found when the total is reached.
  net.Close(a2);
  net.Close(again);
  EXPECT_TRUE(limiter.Admit(net.Accept("127.0.0.3")));
  EXPECT_EQ(limiter.OpenTotal(), 2);
  EXPECT_EQ(limiter.Open("ipv4:127.0.0.1"), 0);
}

// A connection accepted on a descriptor at or above the guard is shed (it is the newest); the
// ones already admitted stay, and a lower descriptor is admitted again once one is free.
TEST(ConnectionLimiterTest, DescriptorGuardShedsTheNewestConnection) {
  Loopback net;
  std::vector<std::string> refusals;
  const int first = net.Accept("127.0.0.1");
  ConnectionLimiter limiter(0, 0, [&](const char* cap) { refusals.push_back(cap); },
                            /*guard_fd=*/first + 2);
  EXPECT_TRUE(limiter.Admit(first));
  const int second = net.Accept("127.0.0.2");
  EXPECT_TRUE(limiter.Admit(second));
  EXPECT_FALSE(limiter.Admit(net.Accept("127.0.0.3")));  // descriptor first + 2
  EXPECT_EQ(refusals, (std::vector<std::string>{"descriptors"}));
  EXPECT_EQ(limiter.OpenTotal(), 2);
  net.Close(second);
  EXPECT_TRUE(limiter.Admit(net.Accept("127.0.0.3")));  // reuses the freed number
}

// ShedNewest ends the most recently admitted connections still open (the client sees the reset),
// older ones stay; a connection already closed is not counted, and a descriptor number reused by
// a socket that was never admitted is left alone.
TEST(ConnectionLimiterTest, ShedNewestEndsTheNewestConnectionsOnly) {
  Loopback net;
  ConnectionLimiter limiter(0, 0);
  std::vector<int> admitted;
  for (int i = 0; i < 6; ++i) {
    admitted.push_back(net.Accept(("127.0.0." + std::to_string(1 + i % 3)).c_str()));
    ASSERT_TRUE(limiter.Admit(admitted.back()));
  }
  net.Close(admitted[5]);  // the newest is gone already
  const int stranger = net.Accept("127.0.0.9");  // reuses its number, never admitted
  ASSERT_EQ(stranger, admitted[5]);
  EXPECT_EQ(limiter.ShedNewest(2), 2);
  auto ended = [](int fd) {  // the server side reads the end of the stream after shutdown(2)
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
  };
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(ended(admitted[i])) << i;
  EXPECT_TRUE(ended(admitted[3]));
  EXPECT_TRUE(ended(admitted[4]));
  EXPECT_FALSE(ended(stranger));
  // The ended ones no longer count; the next shedding takes the next newest.
  EXPECT_EQ(limiter.OpenTotal(), 3);
  EXPECT_EQ(limiter.ShedNewest(1), 1);
  EXPECT_TRUE(ended(admitted[2]));
  EXPECT_FALSE(ended(admitted[1]));
  EXPECT_EQ(limiter.ShedNewest(0), 0);
}

TEST(ConnectionLimiterTest, ZeroMeansNoCap) {
  Loopback net;
  ConnectionLimiter limiter(0, 0);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(limiter.Admit(net.Accept("127.0.0.1")));
  EXPECT_EQ(limiter.OpenTotal(), 20);
  EXPECT_EQ(limiter.refused(), 0);
}

}  // namespace
}  // namespace transposed
