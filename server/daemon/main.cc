// transposed: the auto-tuning daemon for GPU (and CPU) matrix transposition.
//
// Serves transposed.v1.Transposer over gRPC (callback API, with health checking, reflection and
// one interceptor for logging and metrics), answers from its SQLite cache and tunes on a miss.
// The flags are daemon_flags.h; the daemon's life (start-up, signals, shutdown) is daemon.h.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "server/daemon/daemon.h"
#include "server/daemon/daemon_flags.h"

int main(int argc, char** argv) {
  transposed::DaemonFlags flags;
  // The name, not argv[0]: usage lines show "transposed", not the path it was started by.
  CLI::App app{"transposed: auto-tuning service for matrix transposition", "transposed"};
  transposed::AddDaemonFlags(&app, &flags);
  CLI11_PARSE(app, argc, argv);
  // systemd's readiness socket (Type=notify), read once here: the daemon says READY=1 when it
  // serves.
  if (const char* notify = std::getenv("NOTIFY_SOCKET"); notify != nullptr)
    flags.notify_socket = notify;
  if (transposed::Status s = transposed::CheckDaemonFlags(app, flags); !s.ok()) {
    std::fprintf(stderr, "transposed: %s\n", s.message().c_str());
    return 2;
  }
  return transposed::RunDaemon(std::move(flags));
}
