// DelayProxy (delay_proxy.h): one thread accepts; two per connection pump bytes, each holding
// what it read until the delay has passed.
#include "testing/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <string>
#include <utility>

namespace transposed::testing {

namespace {

using Clock = std::chrono::steady_clock;

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

DelayProxy::DelayProxy(int target_port, std::chrono::milliseconds delay_each_way)
    : target_port_(target_port), delay_(delay_each_way) {}

DelayProxy::~DelayProxy() {
  stop_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> pumps;
  {
    MutexLock l(&mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    pumps.swap(pumps_);
  }
  for (auto& t : pumps) t.join();
  MutexLock l(&mu_);
  for (int fd : fds_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

Status DelayProxy::Start() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 256) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return Status::Internal("delay proxy: cannot listen");
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::OK();
}

void DelayProxy::AcceptLoop() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(client);
      if (server >= 0) close(server);
      continue;
    }
    const int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    accepted_.fetch_add(1);
    MutexLock l(&mu_);
    fds_.push_back(client);
    fds_.push_back(server);
    pumps_.emplace_back([this, client, server] { Pump(client, server); });
    pumps_.emplace_back([this, client, server] { Pump(server, client); });
  }
}

void DelayProxy::Pump(int from, int to) {
  std::deque<std::pair<Clock::time_point, std::string>> held;
  bool closing = false;
  char buf[65536];
  while (!stop_.load()) {
    const auto now = Clock::now();
    while (!held.empty() && held.front().first <= now) {
      if (!WriteAll(to, held.front().second.data(), held.front().second.size())) closing = true;
      held.pop_front();
    }
    if (closing && held.empty()) break;
    int wait_ms = 50;
    if (!held.empty())
      wait_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(held.front().first - now).count() +
          1);
    pollfd p{from, POLLIN, 0};
    if (closing || poll(&p, 1, wait_ms) <= 0) {
      if (closing) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      continue;
    }
    const ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0) {
      closing = true;
      continue;
    }
    held.emplace_back(Clock::now() + delay_, std::string(buf, static_cast<size_t>(n)));
  }
  shutdown(to, SHUT_WR);
  shutdown(from, SHUT_RD);
}

}  // namespace transposed::testing
