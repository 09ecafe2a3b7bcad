#include "server/daemon/daemon_flags.h"

#include "core/version.h"
#include "server/backends.h"
#include "server/daemon/startup.h"

namespace transposed {
namespace {

// A numeric flag checked against [lo, hi], its default shown in --help.
template <typename T>
void AddInRange(CLI::App* app, const std::string& name, T* value, T lo, T hi,
                const std::string& help) {
  app->add_option(name, *value, help)->check(CLI::Range(lo, hi))->capture_default_str();
}

// --backend: "auto" or a name of the backend registry, each described in --help.
void AddBackendFlag(CLI::App* app, std::string* backend) {
  std::vector<std::string> kinds = {"auto"};
  std::string help = "measuring backend: auto (the first available of";
  for (const std::string& name : DaemonBackends().Names()) {
    kinds.push_back(name);
    help += " " + name;
  }
  help += ")";
  for (const std::string& name : DaemonBackends().Names())
    help += "; " + name + ": " + DaemonBackends().Find(name)->description;
  app->add_option("--backend", *backend, help)->check(CLI::IsMember(kinds))->capture_default_str();
}

}  // namespace

void AddDaemonFlags(CLI::App* app, DaemonFlags* flags) {
  app->set_version_flag("--version", std::string("transposed ") + kProjectVersion +
                                         " (kernel library " + kLibraryVersion + ")");
  app->set_config("--config", "", "TOML or INI file with the same keys as the long flags");
  app->add_option("--listen", flags->listen, "HOST:PORT to serve gRPC on (port 0: any free port)")
      ->capture_default_str();
  app->add_option("--db", flags->db, "SQLite database file of tuning results")
      ->capture_default_str();
  AddBackendFlag(app, &flags->backend);
  app->add_option("--tune-budget", flags->tune_budget, "wall-time budget of one tune, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--cpu-threads", flags->cpu_threads,
                  "most threads a CPU candidate uses (0: the CPUs this process may run on, capped "
                  "by its cgroup CPU quota)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--worker", flags->worker,
                  "the CUDA worker executable (default: $TRANSPOSED_WORKER, else transposed-worker "
                  "next to this one, else on $PATH)");
  app->add_option("--log-level", flags->log_level, "log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app->add_option("--log-file", flags->log_file, "log to this file instead of stderr");
  app->add_option("--log-format", flags->log_format,
                  "text (time level [thread] message) or json (one object per line: time in "
                  "UTC, level, thread, message)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  AddInRange(app, "--max-queued-tunes", &flags->max_queued_tunes, 1, 1024,
             "tunes that may wait per device; more are refused with RESOURCE_EXHAUSTED");
  // Polite tuning (server/polite.h; docs/user/polite.md).
  AddInRange(app, "--busy-utilization", &flags->polite.busy_utilization_percent, 1.0, 100.0,
             "a device is busy while its utilization (NVML) is at least this percent and "
             "another process holds it");
  AddInRange(app, "--background-duty-cycle", &flags->polite.duty_cycle, 0.0, 1.0,
             "share of a busy device's time a background tune (ANSWER_NOW, TuneMany "
             "background) may take; 0: it waits for an idle window");
  AddInRange(app, "--background-max-wait", &flags->polite.max_wait_seconds, 1.0, 604800.0,
             "seconds a background tune may wait for an idle window (or run throttled) "
             "before it is abandoned");
  AddInRange(app, "--load-sample-interval", &flags->polite.sample_interval_seconds, 0.05, 3600.0,
             "seconds between samples of a device's load while it idles, waits or throttles");
  AddInRange(app, "--window-sample-interval", &flags->polite.window_sample_interval_seconds,
             0.01, 60.0,
             "seconds between samples of a device's load while a background tune waits for an "
             "idle window or throttles (at most --load-sample-interval)");
  AddInRange(app, "--contention-ceiling-drop", &flags->polite.ceiling_drop, 0.0, 0.99,
             "a tune whose copy ceiling falls more than this share below the device's idle "
             "ceiling at its size was measured under contention (0: not judged)");
  AddInRange(app, "--fleet-defer", &flags->polite.fleet_defer_seconds, 0.0, 3600.0,
             "with --shared-store: seconds a miss on a busy device waits for an idle node of "
             "its class to tune it before tuning here (0: never asks)");
  AddInRange(app, "--load-settle", &flags->polite.settle_seconds, 0.0, 60.0,
             "a busy sample taken this soon after the daemon's own work on the device is "
             "taken again once this has passed (the driver counts that work for a while)");
  app->add_option("--remeasure-contended", flags->polite.remeasure_contended,
                  "measure results that were measured under contention again once the device "
                  "is idle")
      ->capture_default_str();
  AddInRange(app, "--remeasure-idle-window", &flags->polite.remeasure_idle_seconds, 0.0, 3600.0,
             "seconds a device must read idle, sampled at --window-sample-interval, before a "
             "result measured under contention is measured again (a job running in bursts "
             "reads idle between them; 0: the first idle sample)");
  AddInRange(app, "--max-streams-per-connection", &flags->max_streams_per_connection, 1, 4096,
             "concurrent calls one client connection may have open; more wait in the client "
             "for a free stream (HTTP/2 MAX_CONCURRENT_STREAMS), none is refused");
  AddInRange(app, "--max-calls-per-client", &flags->max_calls_per_client, 1, 1000000,
             "GetConfig and Tune calls one client host may have waiting for a tune at once "
             "(cache hits, CACHE_ONLY and ANSWER_NOW answers are not counted); more are "
             "refused at once with RESOURCE_EXHAUSTED naming this flag");
  AddInRange(app, "--max-calls", &flags->max_calls, 1, 1000000,
             "GetConfig and Tune calls all clients together may have waiting for a tune at "
             "once; more are refused at once with RESOURCE_EXHAUSTED naming this flag");
  AddInRange(app, "--max-connections-per-client", &flags->max_connections_per_client, 1, 1000000,
             "connections one client host (IP address; every unix-socket client counts as "
             "one) may have open at once; more are reset at accept, before any TLS or HTTP/2 "
             "byte (metric transposed_connections_refused_total{cap=\"per_client\"})");
  AddInRange(app, "--max-connections", &flags->max_connections, 0, 10000000,
             "connections all clients together may have open at once; more are reset at "
             "accept (0: 4096, or, when lower, the descriptor limit less the descriptors "
             "open at start, 64 for the daemon's files and an eighth for bursts). Beyond "
             "the caps: a connection accepted on a descriptor within a sixteenth of the "
             "limit is reset (cap=\"descriptors\"); if accept fails anyway (EMFILE), the "
             "newest connections (a sixteenth of the limit) are ended, what waits is reset, "
             "older connections stay served and accepting goes on");
  AddInRange(app, "--connection-idle-timeout", &flags->connection_idle_timeout, 0.1, 86400.0,
             "a connection with no call open for this long is closed (gRPC GOAWAY; its "
             "client reconnects at its next call), seconds: bounds how long idle "
             "connections, forgotten or a flood, hold places under --max-connections");
  app->add_option("--tls-cert", flags->security.tls_cert,
                  "PEM certificate chain: serve TLS (with --tls-key)");
  app->add_option("--tls-key", flags->security.tls_key, "PEM private key of --tls-cert");
  app->add_option("--tls-client-ca", flags->security.tls_client_ca,
                  "PEM CA bundle: require client certificates signed by it (mutual TLS)");
  app->add_option("--admin-token-file", flags->security.admin_token_file,
                  "file holding the bearer token that the admin RPCs require: Tune, TuneMany "
                  "with force, DeleteEntries, ImportEntries and ExportEntries (without it: "
                  "loopback clients or verified client certificates only)");
  app->add_option("--port-file", flags->port_file,
                  "write the bound port to this file once serving (atomically, via rename)");
  app->add_flag("--metrics-entry-ratios", flags->metrics_entry_ratios,
                "also serve transposed_entry_best_ratio: one series per cached problem (at most "
                "10000)");
  app->add_option("--metrics-listen", flags->metrics_listen,
                  "HOST:PORT to serve Prometheus metrics on at /metrics (port 0: any free port; "
                  "default: no metrics server)");
  app->add_option("--peer", flags->peers,
                  "HOST:PORT of a peer daemon (repeatable; a name resolving to many addresses "
                  "counts as all of them): on a miss, ask peers of the same device class for a "
                  "cached result before tuning");
  AddInRange(app, "--peer-timeout", &flags->peer_timeout, 0.01, 60.0,
             "deadline of one peer lookup (all peers together), seconds");
  AddInRange(app, "--peer-fanout", &flags->peer_fanout, 1, 64,
             "peers asked per miss, drawn at random from all the --peer addresses (a miss "
             "never asks every node of a large fleet: use --shared-store there)");
  app->add_option("--shared-store", flags->shared_store,
                  "redis://[user@]host:port[/db]: share tuned results with every daemon of the "
                  "same device class through this Redis (one tune per class; the local database "
                  "stays the cache). No password here: --shared-store-password-file");
  app->add_option("--shared-store-password-file", flags->shared_store_password_file,
                  "file holding the Redis password (AUTH; with a user in the URL, the ACL user's)");
  AddInRange(app, "--shared-store-timeout", &flags->shared_store_timeout, 0.001, 10.0,
             "deadline of connecting to the shared store and of each round trip, seconds: the "
             "most a miss waits for it before tuning locally");
  AddInRange(app, "--shared-store-lease", &flags->shared_store_lease, 0.3, 3600.0,
             "life of the class-wide lease on a problem being tuned, seconds (renewed every "
             "third while the tune runs; a dead node's lease is taken over after it)");
  app->add_option("--peer-tls-ca", flags->peer_tls_ca,
                  "PEM CA that signed the peers' certificates: ask peers over TLS");
  app->add_option("--peer-tls-cert", flags->peer_tls_cert,
                  "PEM client certificate presented to peers that require one (mutual TLS; with "
                  "--peer-tls-key)");
  app->add_option("--peer-tls-key", flags->peer_tls_key, "PEM private key of --peer-tls-cert");
  app->add_option("--peer-tls-server-name", flags->peer_tls_server_name,
                  "the name the peers' certificates must carry (default: the host of each --peer)");
  app->add_option("--seed", flags->seed,
                  "merge the entries of this file (written by transposectl export) before serving");
  app->add_option("--instance-id", flags->instance_id,
                  "the CPU device's instance id (default: derived from the CPU model, the same on "
                  "identical hosts); CPU backend only");
}

Status CheckDaemonFlags(const CLI::App& app, const DaemonFlags& flags) {
  if (const CLI::Option* config = app.get_config_ptr(); config != nullptr && config->count() > 0) {
    Status s = CheckConfigFile(app, config->as<std::string>());
    if (!s.ok()) return Status::InvalidArgument("--config " + s.message());
  }
  if (auto listen = ParseListenAddress(flags.listen); !listen.ok()) return listen.status();
  if (!flags.metrics_listen.empty()) {
    auto metrics_listen = ParseListenAddress(flags.metrics_listen);
    if (!metrics_listen.ok() || metrics_listen->unix_socket)
      return Status::InvalidArgument(std::string("--metrics-listen: ") +
                                     (metrics_listen.ok() ? "must be HOST:PORT (no unix socket)"
                                                          : metrics_listen.status().message()));
  }
  TR_RETURN_IF_ERROR(CheckPoliteOptions(flags.polite));
  return Status::OK();
}

}  // namespace transposed
