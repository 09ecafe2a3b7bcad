// DaemonFlags: the `transposed` binary's command line (and --config file), declared once.
//
// AddDaemonFlags registers every flag with its help text, default and range on a CLI11 app;
// CheckDaemonFlags refuses, right after parsing, the usage errors CLI11 lets through (a config
// file with keys or sections it would ignore, a --listen or --metrics-listen it would hand to
// gRPC unchecked). The flags that need the other flags or the machine to be checked (--peer-tls-*
// without --peer, --instance-id with the CUDA backend, a --shared-store URL) are checked by
// Daemon::Start (daemon.h). The README's flag table (server/README.md) describes them.
//
// Thread-safety: plain values; AddDaemonFlags and CheckDaemonFlags run on main's thread before
// the daemon starts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/grpc/security.h"
#include "server/polite.h"

namespace transposed {

struct DaemonFlags {
  std::string listen = "127.0.0.1:50051";
  std::string db = "transposed.db";
  std::string backend = "auto";
  double tune_budget = 20.0;
  int cpu_threads = 0;
  std::string worker;  // the worker executable (--worker)
  std::string log_level = "info";
  std::string log_file;
  std::string port_file;
  std::string log_format = "text";  // --log-format: text or json
  // Not a flag: $NOTIFY_SOCKET as main() read it (systemd Type=notify; server/daemon/notify.h).
  std::string notify_socket;
  std::string metrics_listen;
  bool metrics_entry_ratios = false;
  SecurityOptions security;
  int max_queued_tunes = 8;
  PoliteOptions polite;
  int max_streams_per_connection = 64;
  int max_calls_per_client = 128;
  int max_calls = 2048;
  int max_connections_per_client = 64;
  int max_connections = 0;  // 0: 4096, or the descriptor limit less 64 when that is lower
  double connection_idle_timeout = 60;  // seconds
  std::vector<std::string> peers;
  double peer_timeout = 2.0;
  std::string peer_tls_ca;
  std::string peer_tls_cert;
  std::string peer_tls_key;
  std::string peer_tls_server_name;
  std::string seed;
  std::string instance_id;
  int peer_fanout = 4;
  std::string shared_store;
  std::string shared_store_password_file;
  double shared_store_timeout = 0.5;
  double shared_store_lease = 3;
};

// Registers --version, --config and every flag of `flags` on `app` (both must outlive parsing).
void AddDaemonFlags(CLI::App* app, DaemonFlags* flags);

// After app.parse: INVALID_ARGUMENT with the message to print after "transposed: " for a
// --config file with unknown keys or sections, a bad --listen, or a --metrics-listen that is not
// HOST:PORT, or a polite-tuning flag out of range (CheckPoliteOptions). OK otherwise.
Status CheckDaemonFlags(const CLI::App& app, const DaemonFlags& flags);

}  // namespace transposed
