// Listener: the daemon's listening sockets and its accept loop. gRPC gets each admitted
// connection through its external connection acceptor (ServerBuilder::experimental()
// .AddExternalConnectionAcceptor, with the server's credentials: TLS works as on a gRPC port).
//
// Why not gRPC's own listening port: gRPC 1.51 (Debian 12) stops polling a listening socket for
// good when accept4 fails with anything but EAGAIN, ECONNABORTED or EINTR, e.g. EMFILE once the
// descriptor table is full (src/core/lib/iomgr/tcp_server_posix.cc, on_read: "Failed accept4",
// then `goto error`); the only way back was to rebuild the server, which closed every
// connection. Here accept is ours:
//   - every accepted connection goes through ConnectionLimiter::Admit first (caps per client host,
//     in total, and the descriptor guard); a refused one is closed at once with a reset
//     (SO_LINGER 0), before gRPC or TLS sees a byte;
//   - when accept fails with EMFILE or ENFILE the table is full anyway (the daemon's own files
//     took the headroom, or the limit was lowered under it): the listener ends the newest
//     admitted connections (ConnectionLimiter::ShedNewest, at most once a second), and closes
//     the spare descriptor it keeps for this moment, which makes room to accept and reset the
//     connections waiting in the queue (the newest of all); then it takes the spare back. The
//     older connections keep being served, and accepting goes on as soon as descriptors are free;
//   - any other accept error is logged (at most every 10 s) and accepting goes on.
//
// Addresses: HOST:PORT binds every address the host resolves to (all on one port; port 0: a free
// one, chosen by the first bind), IPv6 sockets dual-stack as gRPC makes them; "unix:PATH" (a
// stale socket file at PATH is removed first, and removed again at Stop) and
// "unix-abstract:NAME".
//
// Thread-safety: Bind, Start and Stop are called from one thread (main); the accept loop runs on
// the listener's own thread; port() and counters may be read from any thread.
#pragma once

#include <grpcpp/server_builder.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/grpc/connection_limiter.h"
#include "server/daemon/startup.h"

namespace transposed {

class Listener {
 public:
  struct Options {
    // listen(2) backlog (0: SOMAXCONN, capped by the system's somaxconn).
    int backlog = 0;
    // Admitted connections ended (newest first) when accept fails for lack of descriptors.
    int shed_when_full = 1;
  };

  // Binds and listens. INVALID_ARGUMENT (a host that does not resolve, a socket name too long) or
  // UNAVAILABLE (address in use, ...) with the system's reason; the caller names --listen.
  static StatusOr<std::unique_ptr<Listener>> Bind(const ListenAddress& address,
                                                  const Options& options);
  ~Listener();  // Stop()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The bound TCP port (0 for unix sockets).
  int port() const { return port_; }

  // Starts accepting: admitted connections go to `acceptor` (gRPC's, from a started server).
  // `limiter` and `acceptor` must outlive Stop().
  void Start(grpc::experimental::ExternalConnectionAcceptor* acceptor,
             ConnectionLimiter* limiter);
  // Stops accepting (joins the thread) and closes the listening sockets: connections still in
  // the queue are reset. Call before the gRPC server shuts down. Idempotent.
  void Stop();

  // Times accept failed for lack of descriptors, and the connections reset because of it.
  int64_t full_events() const { return full_events_.load(); }
  int64_t refused_when_full() const { return refused_when_full_.load(); }

 private:
  Listener(std::vector<int> sockets, int port, std::string unix_path, const Options& options);
  void Loop();
  // Accepts what `socket` has queued (a bounded number per wake-up).
  void AcceptFrom(int socket);
  // accept failed with EMFILE / ENFILE on `socket`.
  void Full(int socket);
  void LogAcceptError(int error);

  const std::vector<int> sockets_;
  const int port_;
  const std::string unix_path_;  // "" unless unix:PATH
  const Options options_;
  int wake_ = -1;   // eventfd: Stop() writes it
  int spare_ = -1;  // the descriptor released when the table is full (loop thread only)
  grpc::experimental::ExternalConnectionAcceptor* acceptor_ = nullptr;
  ConnectionLimiter* limiter_ = nullptr;
  std::thread thread_;
  bool closed_ = false;
  std::atomic<int64_t> full_events_{0};
  std::atomic<int64_t> refused_when_full_{0};
  // Loop thread only: rate limits of the shedding and of the error lines.
  int64_t last_shed_ms_ = 0;
  int64_t last_error_log_ms_ = 0;
  int64_t errors_unlogged_ = 0;
};

}  // namespace transposed
