// Pieces of the daemon's start-up that main.cc composes, separated so that they can be tested:
// the --listen address check, the strict config-file check, and the descriptor limit.
//
// Pure functions except RaiseFileLimit (which changes the process's RLIMIT_NOFILE); call them
// from main before any server thread exists.
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

}  // namespace transposed
