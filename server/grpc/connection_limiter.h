// ConnectionLimiter: caps the connections open at once per client host (IP address) and in total,
// so that one client (or many) cannot take every descriptor of the daemon with idle connections.
//
// The daemon's accept loop (server/daemon/listener.h) asks Admit() about every connection it
// accepts, TLS or plaintext alike, before gRPC sees it, and closes the ones refused at once.
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
// descriptor number at or above it is refused the same way: Linux gives out the lowest free
// number, so such a number means the table is nearly full, and the connection refused is the
// newest one; those already served stay. When the table is full anyway (accept fails with
// EMFILE: the daemon's own files took the headroom, or the limit was lowered under it),
// ShedNewest() ends the most recently admitted connections, so that the older ones keep being
// served and the daemon gets descriptors back.
//
// Refusals are logged at most once per 10 s (with the number refused since the last line) and
// reported to the observer (the transposed_connections_refused_total metric). OpenTotal() is the
// transposed_connections_open gauge, read at scrape time (it drops the closed connections first).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
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

  // Ends the `n` most recently admitted connections that are still open (shutdown(2) both
  // ways with SO_LINGER 0: the peer gets a reset, and gRPC, which owns the descriptor, sees the
  // end of the stream and closes it). Returns how many were ended.
  int ShedNewest(int n) EXCLUDES(mu_);
  // Counts (cap "descriptors") and logs a connection that the listener could accept only with
  // its spare descriptor because the table was full; the caller resets it.
  void RefuseWhenFull(int fd) EXCLUDES(mu_);

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
    uint64_t order;  // admission order: higher is newer
  };

  static bool Alive(const Connection& c);
  // Drops the closed connections of `client` (of everyone: PruneAll).
  void Prune(const std::string& client) REQUIRES(mu_);
  void PruneAll() REQUIRES(mu_);
  // `open`: the connections counted against the cap; for "descriptors", the descriptor number
  // (-1: accept failed for lack of one).
  void Refuse(const std::string& client, const char* cap, int open) REQUIRES(mu_);

  const int per_client_;
  const int total_;
  const RefusalObserver observer_;
  const int guard_fd_;

  mutable Mutex mu_;
  std::map<std::string, std::vector<Connection>> open_ GUARDED_BY(mu_);
  int open_total_ GUARDED_BY(mu_) = 0;
  int64_t refused_ GUARDED_BY(mu_) = 0;
  uint64_t admitted_ GUARDED_BY(mu_) = 0;
  int64_t refused_unlogged_ GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_log_ GUARDED_BY(mu_);
  bool logged_ GUARDED_BY(mu_) = false;
};

}  // namespace transposed
