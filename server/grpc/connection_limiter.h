// ConnectionLimiter: caps the connections open at once per client host (IP address) and in total,
// so that one client (or many) cannot take every descriptor of the daemon with idle connections.
//
// gRPC 1.51 has no channel argument for this. It does call a socket mutator
// (GRPC_ARG_SOCKET_MUTATOR) on every accepted connection before anything reads from it, TLS or
// plaintext alike: ServerBuilderOption() installs one whose callback is Admit(). A refusal cannot
// be a `false` return: gRPC 1.51 then neither closes the descriptor nor accepts again
// (src/core/lib/iomgr/tcp_server_posix.cc, on_read). So a refused connection is shut down
// (shutdown(2) both ways, SO_LINGER 0) and handed back: gRPC's first read sees the end of the
// stream and closes it at once, before any handshake or HTTP/2 frame.
//
// gRPC does not tell when a connection closes. Each admitted connection is remembered as its
// descriptor and socket identity (device and inode from fstat): when the descriptor no longer
// names that socket (closed, or reused for another one), the connection is gone. A client's
// entries are checked at each of its new connections, all entries when the total reaches its cap,
// so at most `total` entries are held. The client is the peer address without the port
// ("ipv4:10.0.0.7", "ipv6:[2001:db8::1]"; an IPv4-mapped IPv6 address counts as its IPv4 address;
// every unix-socket client is "unix").
//
// Descriptors: with a guard (server/daemon/startup.h DescriptorBudget), a connection accepted on a
// descriptor number at or above it is shed the same way: Linux gives out the lowest free number,
// so such a number means the table is nearly full, and the connection shed is the newest one;
// those already served stay. This keeps free descriptors for accept(2) whatever the daemon's own
// files turn out to need (cap "descriptors").
//
// Refusals are logged at most once per 10 s (with the number refused since the last line) and
// reported to the observer (the transposed_connections_refused_total metric). OpenTotal() is the
// transposed_connections_open gauge, read at scrape time (it drops the closed connections first).
//
// Thread-safety: every method may be called from any thread (gRPC calls the mutator on its poller
// threads). The limiter must outlive every server built with its option.
#pragma once

#include <grpcpp/impl/server_builder_option.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/thread_annotations.h"

namespace transposed {

class ConnectionLimiter {
 public:
  // Which cap refused a connection: "per_client", "total" or "descriptors".
  using RefusalObserver = std::function<void(const char* cap)>;

  // 0: no cap (guard_fd 0: no descriptor guard). `observer` may be empty.
  ConnectionLimiter(int per_client, int total, RefusalObserver observer = {}, int guard_fd = 0);
  ~ConnectionLimiter();
  ConnectionLimiter(const ConnectionLimiter&) = delete;
  ConnectionLimiter& operator=(const ConnectionLimiter&) = delete;

  // Decides for a connection just accepted on `fd`: true to serve it, false when a cap is reached
  // (the caller then closes it). Remembers admitted connections.
  bool Admit(int fd) EXCLUDES(mu_);

  // A ServerBuilder option that installs the socket mutator (ServerBuilder::SetOption).
  std::unique_ptr<grpc::ServerBuilderOption> ServerBuilderOption();

  // Connections open now (after dropping the closed ones), from one client and in total.
  int Open(const std::string& client) EXCLUDES(mu_);
  int OpenTotal() EXCLUDES(mu_);
  int64_t refused() const EXCLUDES(mu_);

  // The client key of a connected socket ("ipv4:127.0.0.1"); "" when getpeername fails.
  static std::string ClientOf(int fd);

 private:
  struct Connection {
    int fd;
    uint64_t dev;
    uint64_t ino;
  };
  struct Mutator;

  static bool Alive(const Connection& c);
  // Drops the closed connections of `client` (of everyone: PruneAll).
  void Prune(const std::string& client) REQUIRES(mu_);
  void PruneAll() REQUIRES(mu_);
  void Refuse(const std::string& client, const char* cap, int open) REQUIRES(mu_);

  const int per_client_;
  const int total_;
  const RefusalObserver observer_;
  const int guard_fd_;
  std::unique_ptr<Mutator> mutator_;

  mutable Mutex mu_;
  std::map<std::string, std::vector<Connection>> open_ GUARDED_BY(mu_);
  int open_total_ GUARDED_BY(mu_) = 0;
  int64_t refused_ GUARDED_BY(mu_) = 0;
  int64_t refused_unlogged_ GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_log_ GUARDED_BY(mu_);
  bool logged_ GUARDED_BY(mu_) = false;
};

}  // namespace transposed
