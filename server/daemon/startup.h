// Pieces of the daemon's start-up that the Daemon (daemon.h) composes, separated so that they can
// be tested: the --listen address check, the strict config-file check, and the descriptor limit.
//
// Pure functions except RaiseFileLimit (which changes the process's RLIMIT_NOFILE); call them
// before any server thread exists.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace transposed {

// A parsed --listen value: "HOST:PORT", "[V6]:PORT" or "unix:PATH" / "unix-abstract:NAME".
struct ListenAddress {
  std::string host;  // without brackets; the path for unix sockets
  int port = 0;      // 0..65535 (0: any free port); 0 for unix sockets
  bool unix_socket = false;
  bool abstract_socket = false;  // unix-abstract:NAME (host: the name)
  // Reachable from this machine only: 127.0.0.0/8, ::1, localhost, a unix socket.
  bool loopback = false;
};

// INVALID_ARGUMENT "--listen: ..." for a missing host or port, a port that is not a number in
// 0..65535, or an unbalanced "[".
StatusOr<ListenAddress> ParseListenAddress(const std::string& value);

// Reads the config file the way CLI11 does and refuses what CLI11 would silently drop:
// INVALID_ARGUMENT "<path>: unknown key 'x' (line ...)" for a key that is no long flag of `app`,
// "<path>: section [x] is not supported" for a section header. OK for a file of known keys.
Status CheckConfigFile(const CLI::App& app, const std::string& path);

// Raises the soft RLIMIT_NOFILE to the hard limit. Returns the limit in force afterwards (the
// old soft limit if raising failed) and writes what happened into *note.
uint64_t RaiseFileLimit(std::string* note);

// How the descriptor limit is shared between the daemon's own files and client connections, so
// that accept(2) never fails for lack of a descriptor (when it does anyway, server/daemon/listener.h
// sheds the newest connections).
struct DescriptorBudget {
  // Descriptors the daemon keeps for itself beyond those open now: gRPC's pollers and wake-up
  // descriptors, the metrics server, SQLite's files (database, WAL, shared memory, twice), the
  // log, worker restarts.
  static constexpr uint64_t kOwnFiles = 64;
  // The default --max-connections never exceeds this.
  static constexpr int kMaxDefaultConnections = 4096;

  uint64_t limit = 0;     // RLIMIT_NOFILE
  uint64_t open_now = 0;  // descriptors open when the budget was made
  uint64_t burst = 0;     // room for connections accepted and not yet closed (refused ones)
  int max_connections = 0;  // the default --max-connections: limit - open_now - kOwnFiles - burst
  // Accepted connections whose descriptor number is at least this are shed at once (they are the
  // newest: Linux gives out the lowest free number, so such a number means fewer than
  // limit - guard descriptors are left): limit - burst / 2.
  int guard_fd = 0;
  // The listening socket's accept queue (listen(2) backlog): it bounds the connections that wait
  // (and are reset) while the descriptor table is full: burst / 2 (at least 8); 0: the system's
  // somaxconn, when that is at most this or the limit is unknown.
  int accept_queue = 0;
};
// The budget for a descriptor limit (0: unknown, then the default cap is kMaxDefaultConnections
// and there is no guard) with `open_now` descriptors open: burst is limit / 8 (at least 8).
// `somaxconn`: the system's accept queue cap (/proc/sys/net/core/somaxconn; 0: unknown).
DescriptorBudget MakeDescriptorBudget(uint64_t limit, uint64_t open_now, int somaxconn = 4096);
// /proc/sys/net/core/somaxconn, or 4096 when it cannot be read.
int SystemAcceptQueueCap();
// Descriptors this process has open now (entries of /proc/self/fd); 0 when unknown.
uint64_t CountOpenFiles();

}  // namespace transposed
