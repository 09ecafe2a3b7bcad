#include "server/daemon/listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace transposed {

namespace {

// Connections accepted from one socket per wake-up, so that one busy socket cannot starve the
// others or Stop().
constexpr int kAcceptsPerWake = 256;
// Connections reset per EMFILE event with the spare descriptor (the queue is at most the
// backlog; this bounds the loop should clients keep arriving).
constexpr int kResetsWhenFull = 4096;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Closes with a reset (no TIME_WAIT, the client sees ECONNRESET at once).
void Reset(int fd) {
  const linger no_linger{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
  close(fd);
}

int OpenSpare() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

std::string Errno(int error) { return std::strerror(error); }

// A listening TCP socket on `addr`; -1 with *error set.
int ListenTcp(const sockaddr* addr, socklen_t len, int backlog, int* error) {
  const int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = errno;
    return -1;
  }
  const int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as gRPC: no TIME_WAIT wait
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (addr->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (bind(fd, addr, len) != 0 || listen(fd, backlog) != 0) {
    *error = errno;
    close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

}  // namespace

StatusOr<std::unique_ptr<Listener>> Listener::Bind(const ListenAddress& address,
                                                   const Options& options) {
  const int backlog = options.backlog > 0 ? options.backlog : SOMAXCONN;
  if (address.unix_socket) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const size_t offset = address.abstract_socket ? 1 : 0;
    if (address.host.size() + offset >= sizeof(addr.sun_path))
      return Status::InvalidArgument("the socket name is longer than " +
                                     std::to_string(sizeof(addr.sun_path) - 1 - offset) +
                                     " bytes");
    std::memcpy(addr.sun_path + offset, address.host.data(), address.host.size());
    const socklen_t len =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + address.host.size() +
                               (address.abstract_socket ? 0 : 1));
    if (!address.abstract_socket) {
      struct stat st {};
      if (stat(address.host.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(address.host.c_str());  // a stale socket of an earlier run, as gRPC does
    }
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::Unavailable("socket: " + Errno(errno));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, backlog) != 0) {
      const int error = errno;
      close(fd);
      return Status::Unavailable(Errno(error));
    }
    return std::unique_ptr<Listener>(new Listener(
        {fd}, 0, address.abstract_socket ? std::string() : address.host, options));
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(address.host.c_str(), "0", &hints, &found);
  if (rc != 0)
    return Status::InvalidArgument(std::string("cannot resolve the host: ") + gai_strerror(rc));
  std::vector<int> sockets;
  std::vector<std::string> bound;  // addresses bound so far (getaddrinfo may repeat one)
  int port = address.port;
  int error = 0;
  std::string failed;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    sockaddr_storage addr{};
    std::memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    if (ai->ai_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(static_cast<uint16_t>(port));
    else
      reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(static_cast<uint16_t>(port));
    const std::string key(reinterpret_cast<const char*>(&addr), ai->ai_addrlen);
    bool seen = false;
    for (const std::string& b : bound) seen = seen || b == key;
    if (seen) continue;
    int e = 0;
    const int fd = ListenTcp(reinterpret_cast<sockaddr*>(&addr), ai->ai_addrlen, backlog, &e);
    if (fd < 0) {
      // An address family this machine lacks (no IPv6 on "localhost") is skipped; any other
      // failure (address in use) fails the whole bind.
      if (e == EADDRNOTAVAIL || e == EAFNOSUPPORT) continue;
      error = e;
      char host[NI_MAXHOST] = {};
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), ai->ai_addrlen, host, sizeof(host),
                  nullptr, 0, NI_NUMERICHOST);
      failed = host;
      break;
    }
    sockets.push_back(fd);
    bound.push_back(key);
    if (port == 0) port = BoundPort(fd);
  }
  freeaddrinfo(found);
  if (error != 0 || sockets.empty()) {
    for (int fd : sockets) close(fd);
    if (error == 0)
      return Status::Unavailable("none of the host's addresses can be bound here");
    return Status::Unavailable("bind " + failed + ": " + Errno(error));
  }
  return std::unique_ptr<Listener>(new Listener(std::move(sockets), port, "", options));
}

Listener::Listener(std::vector<int> sockets, int port, std::string unix_path,
                   const Options& options)
    : sockets_(std::move(sockets)),
      port_(port),
      unix_path_(std::move(unix_path)),
      options_(options) {}

Listener::~Listener() { Stop(); }

void Listener::Start(grpc::experimental::ExternalConnectionAcceptor* acceptor,
                     ConnectionLimiter* limiter) {
  acceptor_ = acceptor;
  limiter_ = limiter;
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  spare_ = OpenSpare();
  thread_ = std::thread([this] { Loop(); });
}

void Listener::Stop() {
  if (closed_) return;
  closed_ = true;
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(wake_, &one, sizeof(one)) < 0) {
      // An eventfd write fails only at its maximum count: the loop is awake anyway.
    }
    thread_.join();
  }
  for (int fd : sockets_) close(fd);
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
  if (wake_ >= 0) close(wake_);
  if (spare_ >= 0) close(spare_);
  wake_ = spare_ = -1;
}

void Listener::Loop() {
  std::vector<pollfd> polled;
  while (true) {
    // Without the spare (it could not be taken back: the table is still full), the queued
    // connections cannot even be reset: wait for descriptors to free up instead of spinning on
    // a readable socket.
    if (spare_ < 0) spare_ = OpenSpare();
    polled.clear();
    polled.push_back(pollfd{wake_, POLLIN, 0});
    if (spare_ >= 0)
      for (int fd : sockets_) polled.push_back(pollfd{fd, POLLIN, 0});
    const int n = poll(polled.data(), polled.size(), spare_ >= 0 ? -1 : 100);
    if (n < 0 && errno != EINTR) {
      spdlog::error("listener: poll: {}", Errno(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (polled[0].revents != 0) return;
    for (size_t i = 1; i < polled.size(); ++i)
      if (polled[i].revents != 0) AcceptFrom(polled[i].fd);
  }
}

void Listener::AcceptFrom(int socket) {
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    const int fd = accept4(socket, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      if (error == EMFILE || error == ENFILE) {
        Full(socket);
        return;
      }
      LogAcceptError(error);  // ENOBUFS, ENOMEM, EPERM (a firewall), EPROTO: try again later
      if (error == ENOBUFS || error == ENOMEM)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    if (!limiter_->Admit(fd)) {
      Reset(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // fails harmlessly on unix
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.listener_fd = socket;
    p.fd = fd;
    acceptor_->HandleNewConnection(&p);  // gRPC owns the descriptor from here on
  }
}

void Listener::Full(int socket) {
  full_events_.fetch_add(1);
  // Descriptors back for everyone: the newest connections go, the older ones stay.
  const int64_t now = NowMs();
  if (now - last_shed_ms_ >= 1000) {
    last_shed_ms_ = now;
    limiter_->ShedNewest(options_.shed_when_full);
  }
  if (spare_ < 0) return;
  close(spare_);
  spare_ = -1;
  int reset = 0;
  for (; reset < kResetsWhenFull; ++reset) {
    const int fd = accept4(socket, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    limiter_->RefuseWhenFull(fd);
    Reset(fd);
  }
  refused_when_full_.fetch_add(reset);
  spare_ = OpenSpare();  // may fail while the table is still full: Loop retries
}

void Listener::LogAcceptError(int error) {
  ++errors_unlogged_;
  const int64_t now = NowMs();
  if (last_error_log_ms_ != 0 && now - last_error_log_ms_ < 10000) return;
  spdlog::warn("listener: accept failed: {} ({} such failures since the last line; logged at "
               "most every 10 s); accepting goes on",
               Errno(error), errors_unlogged_);
  errors_unlogged_ = 0;
  last_error_log_ms_ = now;
}

}  // namespace transposed
