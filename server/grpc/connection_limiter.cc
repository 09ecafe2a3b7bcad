#include "server/grpc/connection_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace transposed {

ConnectionLimiter::ConnectionLimiter(int per_client, int total, RefusalObserver observer,
                                     int guard_fd)
    : per_client_(per_client),
      total_(total),
      observer_(std::move(observer)),
      guard_fd_(guard_fd) {}

ConnectionLimiter::~ConnectionLimiter() = default;

std::string ConnectionLimiter::ClientOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return std::string("ipv4:") + text;
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
      return std::string("ipv4:") + text;
    }
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return std::string("ipv6:[") + text + "]";
  }
  if (addr.ss_family == AF_UNIX) return "unix";
  return "family:" + std::to_string(addr.ss_family);
}

bool ConnectionLimiter::Alive(const Connection& c) {
  struct stat st {};
  return fstat(c.fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == c.dev &&
         static_cast<uint64_t>(st.st_ino) == c.ino;
}

void ConnectionLimiter::Prune(const std::string& client) {
  auto it = open_.find(client);
  if (it == open_.end()) return;
  auto& conns = it->second;
  size_t kept = 0;
  for (const Connection& c : conns)
    if (Alive(c)) conns[kept++] = c;
  open_total_ -= static_cast<int>(conns.size() - kept);
  conns.resize(kept);
  if (conns.empty()) open_.erase(it);
}

void ConnectionLimiter::PruneAll() {
  for (auto it = open_.begin(); it != open_.end();) {
    const std::string client = (it++)->first;  // Prune may erase the entry
    Prune(client);
  }
}

bool ConnectionLimiter::Admit(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return true;  // gRPC finds out for itself
  std::string client = ClientOf(fd);
  MutexLock lock(&mu_);
  const Connection conn{fd, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                        admitted_ + 1};
  if (guard_fd_ > 0 && fd >= guard_fd_) {
    Refuse(client, "descriptors", fd);
    return false;
  }
  // Drops the client's closed connections (also one whose descriptor number this connection
  // reuses: its inode differs). Other clients' closed ones wait for PruneAll.
  Prune(client);
  if (per_client_ > 0) {
    auto it = open_.find(client);
    const int open = it == open_.end() ? 0 : static_cast<int>(it->second.size());
    if (open >= per_client_) {
      Refuse(client, "per_client", open);
      return false;
    }
  }
  if (total_ > 0 && open_total_ >= total_) {
    PruneAll();
    if (open_total_ >= total_) {
      Refuse(client, "total", open_total_);
      return false;
    }
  }
  open_[client].push_back(conn);
  ++open_total_;
  ++admitted_;
  return true;
}

int ConnectionLimiter::ShedNewest(int n) {
  if (n <= 0) return 0;
  MutexLock lock(&mu_);
  PruneAll();
  std::vector<Connection> all;
  all.reserve(static_cast<size_t>(open_total_));
  for (const auto& [client, conns] : open_) all.insert(all.end(), conns.begin(), conns.end());
  const size_t count = std::min(all.size(), static_cast<size_t>(n));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count), all.end(),
                    [](const Connection& a, const Connection& b) { return a.order > b.order; });
  int shed = 0;
  std::vector<uint64_t> ended;  // orders of the connections shut down: no longer counted
  for (size_t i = 0; i < count; ++i) {
    // Checked again just before: the descriptor must still name the admitted socket. (gRPC may
    // close it in between; Linux then hands the number to the next socket opened, which is
    // ours to accept only after this returns, or one of the daemon's own; the window is the
    // few instructions between fstat and shutdown.)
    if (!Alive(all[i])) continue;
    const linger no_linger{1, 0};
    setsockopt(all[i].fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
    if (shutdown(all[i].fd, SHUT_RDWR) == 0) {
      ++shed;
      ended.push_back(all[i].order);
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    auto& conns = it->second;
    const size_t before = conns.size();
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [&ended](const Connection& c) {
                                 return std::find(ended.begin(), ended.end(), c.order) !=
                                        ended.end();
                               }),
                conns.end());
    open_total_ -= static_cast<int>(before - conns.size());
    it = conns.empty() ? open_.erase(it) : std::next(it);
  }
  if (shed > 0)  // the listener sheds at most once a second
    spdlog::warn(
        "the descriptor table is full: ended the {} newest client connections; the {} older "
        "ones keep being served",
        shed, open_total_);
  return shed;
}

void ConnectionLimiter::Refuse(const std::string& client, const char* cap, int open) {
  ++refused_;
  ++refused_unlogged_;
  const auto now = std::chrono::steady_clock::now();
  if (!logged_ || now - last_log_ >= std::chrono::seconds(10)) {
    const bool per_client = std::strcmp(cap, "per_client") == 0;
    if (std::strcmp(cap, "descriptors") == 0 && open < 0) {
      spdlog::warn(
          "refused a connection from {}: the descriptor table is full (accept failed with "
          "EMFILE/ENFILE; it was accepted with the spare descriptor kept for this and reset); "
          "the newest connections are shed, older ones stay; {} refused since the last such "
          "line (logged at most every 10 s)",
          client, refused_unlogged_);
    } else if (std::strcmp(cap, "descriptors") == 0) {
      spdlog::warn(
          "refused a connection from {}: it was accepted on descriptor {}, at or above the guard "
          "{} kept free for accept (the descriptor limit less an eighth / 2); the newest "
          "connections are shed, open ones stay; {} refused since the last such line (logged at "
          "most every 10 s)",
          client, open, guard_fd_, refused_unlogged_);
    } else {
    spdlog::warn(
        "refused a connection from {}: {} {} connections open (at most {}, {}); {} refused since "
        "the last such line (logged at most every 10 s)",
        client, per_client ? "it has" : "the daemon has", open,
        per_client ? per_client_ : total_,
        per_client ? "--max-connections-per-client" : "--max-connections", refused_unlogged_);
    }
    refused_unlogged_ = 0;
    last_log_ = now;
    logged_ = true;
  }
  if (observer_) observer_(cap);
}

void ConnectionLimiter::RefuseWhenFull(int fd) {
  const std::string client = ClientOf(fd);
  MutexLock lock(&mu_);
  Refuse(client, "descriptors", -1);
}

int ConnectionLimiter::Open(const std::string& client) {
  MutexLock lock(&mu_);
  Prune(client);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : static_cast<int>(it->second.size());
}

int ConnectionLimiter::OpenTotal() {
  MutexLock lock(&mu_);
  PruneAll();
  return open_total_;
}

int64_t ConnectionLimiter::refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

}  // namespace transposed
