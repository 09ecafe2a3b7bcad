// transposed: the auto-tuning daemon for GPU (and CPU) matrix transposition.
//
// Serves transposed.v1.Transposer over gRPC (callback API, with health checking, reflection and
// one interceptor for logging and metrics), answers from its SQLite cache and tunes on a miss.
// SIGINT/SIGTERM/SIGHUP are blocked in every thread; a dedicated thread sigwait()s for them.
// SIGHUP reopens the log file (for logrotate). SIGINT/SIGTERM shut down from normal context:
// cancel tunes, stop the server, join the device tune threads, close the database, exit 0.
#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/details/file_helper.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/version.h"
#include "core/device_class.h"
#include "core/text.h"
#include "proto/exported_entry_json.h"
#include "server/backends.h"
#include "server/grpc/connection_limiter.h"
#include "server/grpc/convert.h"
#include "server/fleet/fleet_flight.h"
#include "server/grpc/grpc_service.h"
#include "server/grpc/grpc_log.h"
#include "server/daemon/listener.h"
#include "server/daemon/metrics.h"
#include "server/grpc/rpc_interceptor.h"
#include "server/grpc/security.h"
#include "server/fleet/peers.h"
#include "store/store_reopener.h"
#include "server/service.h"
#include "server/daemon/startup.h"
#include "store/store.h"

namespace {

struct Flags {
  std::string listen = "127.0.0.1:50051";
  std::string db = "transposed.db";
  std::string backend = "auto";
  double tune_budget = 20.0;
  int cpu_threads = 0;
  std::string worker;
  std::string log_level = "info";
  std::string log_file;
  std::string port_file;
  std::string metrics_listen;
  bool metrics_entry_ratios = false;
  transposed::SecurityOptions security;
  int max_queued_tunes = 8;
  transposed::PoliteOptions polite;
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
  double shared_store_timeout = 0.1;
  double shared_store_lease = 10;
};

// The health status "transposed.shared_store" of the server: set from the shared store's thread
// when it goes down or comes back, and when the server starts.
class SharedHealth {
 public:
  void Attach(grpc::HealthCheckServiceInterface* health) EXCLUDES(mu_) {
    transposed::MutexLock l(&mu_);
    health_ = health;
    if (health_ != nullptr) health_->SetServingStatus("transposed.shared_store", available_);
  }
  void Set(bool available) EXCLUDES(mu_) {
    transposed::MutexLock l(&mu_);
    available_ = available;
    if (health_ != nullptr) health_->SetServingStatus("transposed.shared_store", available_);
  }

 private:
  transposed::Mutex mu_;
  grpc::HealthCheckServiceInterface* health_ GUARDED_BY(mu_) = nullptr;
  bool available_ GUARDED_BY(mu_) = false;
};

// A log file sink that can reopen its file (after logrotate moved it away): spdlog's
// basic_file_sink with a Reopen().
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ReopenableFileSink(const std::string& path) { file_.open(path, /*truncate=*/false); }
  // Closes the file and opens the same path again (a new file if the old one was moved).
  void Reopen() {
    std::lock_guard<std::mutex> lock(mutex_);
    file_.reopen(/*truncate=*/false);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    file_.write(formatted);
  }
  void flush_() override { file_.flush(); }

 private:
  spdlog::details::file_helper file_;
};

// --seed: merges the entries of an export file (transposectl export) before serving. Rows that do
// not parse or validate are logged and skipped; a file that cannot be read is an error.
transposed::Status Seed(const std::string& path, transposed::TransposeService* service) {
  std::ifstream in(path);
  if (!in) return transposed::Status::NotFound("--seed: cannot read " + path);
  std::vector<transposed::TuneResult> rows;
  int64_t invalid = 0, number = 0;
  std::string line;
  auto merge = [&]() -> transposed::StatusOr<transposed::MergeCounts> {
    auto counts = service->MergeEntries(rows);
    rows.clear();
    return counts;
  };
  transposed::MergeCounts total;
  auto add = [&](const transposed::MergeCounts& c) {
    total.imported += c.imported;
    total.kept_existing += c.kept_existing;
    total.refused_library_version += c.refused_library_version;
  };
  while (std::getline(in, line)) {
    ++number;
    if (transposed::IsBlankLine(line)) continue;
    auto entry = transposed::ExportedEntryFromLine(line);
    transposed::StatusOr<transposed::TuneResult> row =
        entry.ok() ? transposed::ExportedEntryFromProto(*entry)
                   : transposed::StatusOr<transposed::TuneResult>(entry.status());
    if (!row.ok()) {
      ++invalid;
      service->CountRefusedEntry("seed");
      spdlog::warn("--seed {}:{}: skipped: {}", path, number, row.status().ToString());
      continue;
    }
    rows.push_back(std::move(row).value());
    if (rows.size() >= 1000) {
      TR_ASSIGN_OR_RETURN(auto c, merge());
      add(c);
    }
  }
  TR_ASSIGN_OR_RETURN(auto c, merge());
  add(c);
  spdlog::info(
      "--seed {}: imported={} kept_existing={} refused_library_version={} (this daemon has {}) "
      "invalid={}",
      path, total.imported, total.kept_existing, total.refused_library_version,
      transposed::kLibraryVersion, invalid);
  return transposed::Status::OK();
}

// Logs to the file (flushed on every line, so tests and tail -f see it at once) or to stderr.
// `file_sink` is set when logging to a file.
bool SetUpLogging(const Flags& flags, std::shared_ptr<ReopenableFileSink>* file_sink) {
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (flags.log_file.empty()) {
      logger = spdlog::stderr_logger_mt("transposed");
    } else {
      *file_sink = std::make_shared<ReopenableFileSink>(flags.log_file);
      logger = std::make_shared<spdlog::logger>("transposed", *file_sink);
    }
  } catch (const spdlog::spdlog_ex& e) {
    std::fprintf(stderr, "transposed: --log-file %s: %s\n", flags.log_file.c_str(), e.what());
    return false;
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  logger->set_level(spdlog::level::from_str(flags.log_level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return true;
}

// Writes the port to `path` atomically: a temporary file beside it, then rename.
bool WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    out.flush();
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the shutdown signals before any thread exists, so that every thread inherits the mask
  // and only the signal thread's sigwait() ever sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Debian's Abseil is built without NDEBUG, so each absl::Mutex that gRPC takes (several per
  // call) also updated Abseil's global deadlock graph under one global lock: about 7% of the
  // daemon's CPU under cache hits (perf, 64 clients). The daemon's own locks are std::mutex,
  // checked at compile time (-Wthread-safety); gRPC's are not ours to check at run time.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  Flags flags;
  CLI::App app{"transposed: auto-tuning service for matrix transposition"};
  app.set_version_flag("--version", std::string("transposed ") + transposed::kProjectVersion +
                                        " (kernel library " + transposed::kLibraryVersion + ")");
  app.set_config("--config", "", "TOML or INI file with the same keys as the long flags");
  app.add_option("--listen", flags.listen, "HOST:PORT to serve gRPC on (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--db", flags.db, "SQLite database file of tuning results")->capture_default_str();
  {
    std::vector<std::string> kinds = {"auto"};
    std::string help = "measuring backend: auto (the first available of";
    for (const std::string& name : transposed::DaemonBackends().Names()) {
      kinds.push_back(name);
      help += " " + name;
    }
    help += ")";
    for (const std::string& name : transposed::DaemonBackends().Names())
      help += "; " + name + ": " + transposed::DaemonBackends().Find(name)->description;
    app.add_option("--backend", flags.backend, help)
        ->check(CLI::IsMember(kinds))
        ->capture_default_str();
  }
  app.add_option("--tune-budget", flags.tune_budget, "wall-time budget of one tune, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cpu-threads", flags.cpu_threads,
                 "most threads a CPU candidate uses (0: the CPUs this process may run on, capped by its "
                 "cgroup CPU quota)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--worker", flags.worker,
                 "the CUDA worker executable (default: $TRANSPOSED_WORKER, else transposed-worker next "
                 "to this one, else on $PATH)");
  app.add_option("--log-level", flags.log_level, "log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_option("--log-file", flags.log_file, "log to this file instead of stderr");
  app.add_option("--max-queued-tunes", flags.max_queued_tunes,
                 "tunes that may wait per device; more are refused with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  // Polite tuning (server/polite.h; docs/user/polite.md).
  app.add_option("--busy-utilization", flags.polite.busy_utilization_percent,
                 "a device is busy while its utilization (NVML) is at least this percent and "
                 "another process holds it")
      ->check(CLI::Range(1.0, 100.0))
      ->capture_default_str();
  app.add_option("--background-duty-cycle", flags.polite.duty_cycle,
                 "share of a busy device's time a background tune (ANSWER_NOW, TuneMany "
                 "background) may take; 0: it waits for an idle window")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--background-max-wait", flags.polite.max_wait_seconds,
                 "seconds a background tune may wait for an idle window (or run throttled) "
                 "before it is abandoned")
      ->check(CLI::Range(1.0, 604800.0))
      ->capture_default_str();
  app.add_option("--load-sample-interval", flags.polite.sample_interval_seconds,
                 "seconds between samples of a device's load while it idles, waits or throttles")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--fleet-defer", flags.polite.fleet_defer_seconds,
                 "with --shared-store: seconds a miss on a busy device waits for an idle node of "
                 "its class to tune it before tuning here (0: never asks)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--load-settle", flags.polite.settle_seconds,
                 "a busy sample taken this soon after the daemon's own work on the device is "
                 "taken again once this has passed (the driver counts that work for a while)")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  app.add_option("--remeasure-contended", flags.polite.remeasure_contended,
                 "measure results that were measured under contention again once the device "
                 "is idle")
      ->capture_default_str();
  app.add_option("--max-streams-per-connection", flags.max_streams_per_connection,
                 "concurrent calls one client connection may have open; more wait in the client "
                 "for a free stream (HTTP/2 MAX_CONCURRENT_STREAMS), none is refused")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-calls-per-client", flags.max_calls_per_client,
                 "GetConfig and Tune calls one client host may have waiting for a tune at once "
                 "(cache hits, CACHE_ONLY and ANSWER_NOW answers are not counted); more are "
                 "refused at once with RESOURCE_EXHAUSTED naming this flag")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--max-calls", flags.max_calls,
                 "GetConfig and Tune calls all clients together may have waiting for a tune at "
                 "once; more are refused at once with RESOURCE_EXHAUSTED naming this flag")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--max-connections-per-client", flags.max_connections_per_client,
                 "connections one client host (IP address; every unix-socket client counts as "
                 "one) may have open at once; more are reset at accept, before any TLS or HTTP/2 "
                 "byte (metric transposed_connections_refused_total{cap=\"per_client\"})")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--max-connections", flags.max_connections,
                 "connections all clients together may have open at once; more are reset at "
                 "accept (0: 4096, or, when lower, the descriptor limit less the descriptors "
                 "open at start, 64 for the daemon's files and an eighth for bursts). Beyond "
                 "the caps: a connection accepted on a descriptor within a sixteenth of the "
                 "limit is reset (cap=\"descriptors\"); if accept fails anyway (EMFILE), the "
                 "newest connections (a sixteenth of the limit) are ended, what waits is reset, "
                 "older connections stay served and accepting goes on")
      ->check(CLI::Range(0, 10000000))
      ->capture_default_str();
  app.add_option("--connection-idle-timeout", flags.connection_idle_timeout,
                 "a connection with no call open for this long is closed (gRPC GOAWAY; its "
                 "client reconnects at its next call), seconds: bounds how long idle "
                 "connections, forgotten or a flood, hold places under --max-connections")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  app.add_option("--tls-cert", flags.security.tls_cert,
                 "PEM certificate chain: serve TLS (with --tls-key)");
  app.add_option("--tls-key", flags.security.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", flags.security.tls_client_ca,
                 "PEM CA bundle: require client certificates signed by it (mutual TLS)");
  app.add_option("--admin-token-file", flags.security.admin_token_file,
                 "file holding the bearer token that the admin RPCs require: Tune, TuneMany "
                 "with force, DeleteEntries, ImportEntries and ExportEntries (without it: "
                 "loopback clients or verified client certificates only)");
  app.add_option("--port-file", flags.port_file,
                 "write the bound port to this file once serving (atomically, via rename)");
  app.add_flag("--metrics-entry-ratios", flags.metrics_entry_ratios,
               "also serve transposed_entry_best_ratio: one series per cached problem (at most "
               "10000)");
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "HOST:PORT to serve Prometheus metrics on at /metrics (port 0: any free port; "
                 "default: no metrics server)");
  app.add_option("--peer", flags.peers,
                 "HOST:PORT of a peer daemon (repeatable; a name resolving to many addresses "
                 "counts as all of them): on a miss, ask peers of the same device class for a "
                 "cached result before tuning");
  app.add_option("--peer-timeout", flags.peer_timeout,
                 "deadline of one peer lookup (all peers together), seconds")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  app.add_option("--peer-fanout", flags.peer_fanout,
                 "peers asked per miss, drawn at random from all the --peer addresses (a miss "
                 "never asks every node of a large fleet: use --shared-store there)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--shared-store", flags.shared_store,
                 "redis://[user@]host:port[/db]: share tuned results with every daemon of the same "
                 "device class through this Redis (one tune per class; the local database stays "
                 "the cache). No password here: --shared-store-password-file");
  app.add_option("--shared-store-password-file", flags.shared_store_password_file,
                 "file holding the Redis password (AUTH; with a user in the URL, the ACL user's)");
  app.add_option("--shared-store-timeout", flags.shared_store_timeout,
                 "deadline of connecting to the shared store and of each round trip, seconds: the "
                 "most a miss waits for it before tuning locally")
      ->check(CLI::Range(0.001, 10.0))
      ->capture_default_str();
  app.add_option("--shared-store-lease", flags.shared_store_lease,
                 "life of the class-wide lease on a problem being tuned, seconds (renewed every "
                 "third while the tune runs; a dead node's lease is taken over after it)")
      ->check(CLI::Range(0.3, 3600.0))
      ->capture_default_str();
  app.add_option("--peer-tls-ca", flags.peer_tls_ca,
                 "PEM CA that signed the peers' certificates: ask peers over TLS");
  app.add_option("--peer-tls-cert", flags.peer_tls_cert,
                 "PEM client certificate presented to peers that require one (mutual TLS; with "
                 "--peer-tls-key)");
  app.add_option("--peer-tls-key", flags.peer_tls_key, "PEM private key of --peer-tls-cert");
  app.add_option("--peer-tls-server-name", flags.peer_tls_server_name,
                 "the name the peers' certificates must carry (default: the host of each --peer)");
  app.add_option("--seed", flags.seed,
                 "merge the entries of this file (written by transposectl export) before serving");
  app.add_option("--instance-id", flags.instance_id,
                 "the CPU device's instance id (default: derived from the CPU model, the same on "
                 "identical hosts); CPU backend only");
  CLI11_PARSE(app, argc, argv);
  // Usage errors CLI11 lets through: a config file with keys or sections it would ignore, a
  // --listen it would hand to gRPC unchecked.
  if (const CLI::Option* config = app.get_config_ptr(); config != nullptr && config->count() > 0) {
    transposed::Status s = transposed::CheckConfigFile(app, config->as<std::string>());
    if (!s.ok()) {
      std::fprintf(stderr, "transposed: --config %s\n", s.message().c_str());
      return 2;
    }
  }
  auto listen = transposed::ParseListenAddress(flags.listen);
  if (!listen.ok()) {
    std::fprintf(stderr, "transposed: %s\n", listen.status().message().c_str());
    return 2;
  }
  if (!flags.metrics_listen.empty()) {
    auto metrics_listen = transposed::ParseListenAddress(flags.metrics_listen);
    if (!metrics_listen.ok() || metrics_listen->unix_socket) {
      std::fprintf(stderr, "transposed: --metrics-listen: %s\n",
                   metrics_listen.ok() ? "must be HOST:PORT (no unix socket)"
                                       : metrics_listen.status().message().c_str());
      return 2;
    }
  }

  std::shared_ptr<ReopenableFileSink> log_sink;
  if (!SetUpLogging(flags, &log_sink)) return 1;
  transposed::InstallGrpcLogHook();
  spdlog::info("transposed {} starting (kernel library {}), pid {}", transposed::kProjectVersion,
               transposed::kLibraryVersion, static_cast<long>(getpid()));
  uint64_t file_limit = 0;
  {
    std::string note;
    file_limit = transposed::RaiseFileLimit(&note);
    spdlog::info("{}", note);
  }

  transposed::BackendOptions backend_options;
  backend_options.cpu_threads = flags.cpu_threads;
  backend_options.worker_path = flags.worker;
  backend_options.cpu_instance_id = flags.instance_id;
  if (!flags.instance_id.empty()) {
    transposed::Status s = transposed::CheckFieldLength("--instance-id", flags.instance_id);
    if (!s.ok() || flags.backend == "cuda") {
      std::fprintf(stderr, "transposed: %s\n",
                   s.ok() ? "--instance-id: only for the CPU backend (a GPU's instance is its UUID)"
                          : s.message().c_str());
      return 2;
    }
  }
  auto backends = transposed::DaemonBackends().Make(flags.backend, backend_options);
  if (!backends.ok()) {
    spdlog::error("cannot set up the backend: {}", backends.status().ToString());
    return 1;
  }
  for (size_t i = 0; i < backends->size(); ++i) {
    const auto& d = (*backends)[i]->device();
    spdlog::info("device {}: backend={} name='{}' uuid={} memory_bytes={} fingerprint={}", i,
                 d.backend, d.name, d.uuid, d.memory_bytes, d.Fingerprint());
  }

  auto store = transposed::Store::Open(flags.db);
  if (!store.ok()) {
    spdlog::error("cannot open the database --db={}: {}", flags.db, store.status().ToString());
    return 1;
  }
  spdlog::info("db={}", flags.db);
  if (const std::string why = (*store)->read_only(); !why.empty()) {
    spdlog::warn(
        "the database is READ-ONLY: lookups are served from it, tunes are answered but not "
        "stored (writing is retried with backoff); health service 'transposed.store' answers "
        "NOT_SERVING. Cause: {}",
        why);
  }

  // Counts from the first request on; served (below) only with --metrics-listen.
  std::vector<transposed::DeviceInfo> metric_devices;
  for (const auto& b : *backends) metric_devices.push_back(b->device());
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) != 0) hostname[0] = '\0';
  transposed::Metrics metrics(metric_devices, hostname);
  transposed::ServiceOptions options;
  options.tune_budget_seconds = flags.tune_budget;
  options.observer = &metrics;
  options.max_queued_tunes = flags.max_queued_tunes;
  if (transposed::Status s = transposed::CheckPoliteOptions(flags.polite); !s.ok()) {
    std::fprintf(stderr, "transposed: %s\n", s.message().c_str());
    return 2;
  }
  options.polite = flags.polite;
  std::unique_ptr<transposed::PeerSet> peers;
  if (flags.peers.empty() && !(flags.peer_tls_ca + flags.peer_tls_cert + flags.peer_tls_key +
                               flags.peer_tls_server_name)
                                  .empty()) {
    std::fprintf(stderr, "transposed: --peer-tls-*: given without any --peer\n");
    return 2;
  }
  if (!flags.peers.empty()) {
    transposed::PeerOptions peer_options;
    peer_options.peers = flags.peers;
    peer_options.deadline_seconds = flags.peer_timeout;
    peer_options.fanout = flags.peer_fanout;
    // TLS to peers: the client's credentials code (client/client.h), from --peer-tls-* files.
    transposed::ClientOptions peer_tls;
    peer_tls.tls_ca_file = flags.peer_tls_ca;
    peer_tls.tls_cert_file = flags.peer_tls_cert;
    peer_tls.tls_key_file = flags.peer_tls_key;
    peer_options.tls = !flags.peer_tls_ca.empty() || !flags.peer_tls_cert.empty();
    peer_options.tls_server_name = flags.peer_tls_server_name;
    auto peer_credentials = transposed::ChannelCredentialsFor(peer_tls);
    if (!peer_credentials.ok()) {
      std::fprintf(stderr, "transposed: --peer-tls-*: %s\n",
                   peer_credentials.status().message().c_str());
      return 2;
    }
    peer_options.credentials = std::move(peer_credentials).value();
    auto created = transposed::PeerSet::Create(peer_options);
    if (!created.ok()) {
      std::fprintf(stderr, "transposed: %s\n", created.status().message().c_str());
      return 2;
    }
    peers = std::move(created).value();
    spdlog::info("peers: {} (timeout {} s, {})", fmt::join(flags.peers, ","), flags.peer_timeout,
                 !peer_options.tls               ? "plaintext"
                 : flags.peer_tls_cert.empty() ? "tls"
                                               : "mtls");
    options.peer_lookup = [&peers, &metrics](const transposed::DeviceInfo& device,
                                   const transposed::Problem& problem)
        -> std::optional<transposed::TuneResult> {
      auto answer = peers->Lookup(transposed::ClassOf(device).key,
                                  transposed::ProblemToProto(problem));
      if (!answer) return std::nullopt;
      transposed::v1::ExportedEntry entry;
      *entry.mutable_measured_on() = answer->measured_on();
      *entry.mutable_answer() = *answer;
      auto row = transposed::ExportedEntryFromProto(entry);  // validated like any import
      if (!row.ok()) {
        metrics.OnEntryRefused("peer");
        spdlog::warn("peer answer for {} refused: {}", problem.Key(), row.status().ToString());
        return std::nullopt;
      }
      return std::move(row).value();
    };
  }
  // The shared store: created before the service (which stops it), destroyed after it.
  SharedHealth shared_health;
  std::unique_ptr<transposed::FleetFlight> shared;
  if (flags.shared_store.empty() && !flags.shared_store_password_file.empty()) {
    std::fprintf(stderr, "transposed: --shared-store-password-file: given without --shared-store\n");
    return 2;
  }
  if (!flags.shared_store.empty()) {
    auto url = transposed::ParseRedisUrl(flags.shared_store);
    if (!url.ok()) {
      std::fprintf(stderr, "transposed: %s\n", url.status().message().c_str());
      return 2;
    }
    transposed::FleetOptions fleet;
    fleet.store.url = *url;
    fleet.store.timeout_seconds = flags.shared_store_timeout;
    if (!flags.shared_store_password_file.empty()) {
      auto password = transposed::ReadTokenFile(flags.shared_store_password_file,
                                                "--shared-store-password-file");
      if (!password.ok()) {
        spdlog::error("{}", password.status().message());
        return 1;
      }
      fleet.store.password = std::move(password).value();
    }
    fleet.lease_seconds = flags.shared_store_lease;
    for (const auto& b : *backends) {
      std::pair<std::string, std::string> cls{b->device().library_version,
                                              transposed::ClassOf(b->device()).key};
      if (std::find(fleet.classes.begin(), fleet.classes.end(), cls) == fleet.classes.end())
        fleet.classes.push_back(cls);
    }
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    fleet.owner = std::string(host) + "/" + std::to_string(getpid()) +
                  (flags.instance_id.empty() ? "" : "/" + flags.instance_id);
    fleet.on_availability = [&shared_health](bool available, const std::string&) {
      shared_health.Set(available);
    };
    auto created = transposed::FleetFlight::Create(std::move(fleet));
    if (!created.ok()) {
      std::fprintf(stderr, "transposed: %s\n", created.status().message().c_str());
      return 2;
    }
    shared = std::move(created).value();
    options.shared = shared.get();
    spdlog::info("shared store: {} ({}, timeout {} s, lease {} s); health service "
                 "'transposed.shared_store' says whether it answers",
                 url->ToString(), flags.shared_store_password_file.empty() ? "no password" : "password",
                 flags.shared_store_timeout, flags.shared_store_lease);
  }
  auto service =
      transposed::TransposeService::Create(std::move(backends).value(), store->get(), options);
  if (!service.ok()) {
    spdlog::error("cannot start the service: {}", service.status().ToString());
    return 1;
  }

  auto credentials = transposed::MakeServerCredentials(flags.security);
  if (!credentials.ok()) {
    spdlog::error("{}", credentials.status().message());
    return 1;
  }
  std::string admin_token;
  if (!flags.security.admin_token_file.empty()) {
    auto token = transposed::ReadTokenFile(flags.security.admin_token_file, "--admin-token-file");
    if (!token.ok()) {
      spdlog::error("{}", token.status().message());
      return 1;
    }
    admin_token = std::move(token).value();
  }
  const bool tls = !flags.security.tls_cert.empty();
  const bool mtls = tls && !flags.security.tls_client_ca.empty();
  spdlog::info("transport={} admin={}", mtls ? "mtls" : tls ? "tls" : "plaintext",
               !admin_token.empty() ? "token"
               : mtls               ? "loopback or verified client certificate"
                                    : "loopback only");
  if (!listen->loopback && !tls) {
    spdlog::warn(
        "WARNING: --listen={} is reachable from other machines and serves PLAINTEXT: anyone who "
        "can reach it reads every answer{}; set --tls-cert/--tls-key (and --tls-client-ca, "
        "--admin-token-file) or listen on 127.0.0.1",
        flags.listen,
        admin_token.empty() ? "" : " and can capture the admin token from the wire");
  }
  if (!flags.seed.empty()) {
    transposed::Status seeded = Seed(flags.seed, service->get());
    if (!seeded.ok()) {
      spdlog::error("{}", seeded.ToString());
      return 1;
    }
  }

  transposed::RpcNotes rpc_notes;
  transposed::CallLimiter call_limiter(flags.max_calls_per_client, flags.max_calls);
  // Connections beyond the descriptor limit would make accept fail (EMFILE): the default total
  // cap keeps what is open now (database, log, workers), the daemon's other files and a burst
  // free, and the guard sheds the newest connection when the table is nearly full anyway.
  const transposed::DescriptorBudget budget =
      transposed::MakeDescriptorBudget(file_limit, transposed::CountOpenFiles(),
                                       transposed::SystemAcceptQueueCap());
  if (flags.max_connections == 0) flags.max_connections = budget.max_connections;
  spdlog::info(
      "connection caps: {} per client host, {} in total; descriptors: limit {}, {} open, {} "
      "kept for the daemon's files and {} for bursts, connections on descriptor {} and above "
      "are shed, accept queue {}",
      flags.max_connections_per_client, flags.max_connections, budget.limit, budget.open_now,
      transposed::DescriptorBudget::kOwnFiles, budget.burst,
      budget.guard_fd > 0 ? std::to_string(budget.guard_fd) : std::string("(none)"),
      budget.accept_queue > 0 ? std::to_string(budget.accept_queue) : std::string("(system)"));
  transposed::ConnectionLimiter connection_limiter(
      flags.max_connections_per_client, flags.max_connections,
      [&metrics](const char* cap) { metrics.OnConnectionRefused(cap); }, budget.guard_fd);
  const transposed::AdminGate admin_gate(admin_token, mtls);
  if (tls) {
    transposed::Status checked = transposed::CheckServerCredentials(*credentials);
    if (!checked.ok()) {
      spdlog::error("{}", checked.message());
      return 1;
    }
  }
  // The daemon accepts connections itself (server/daemon/listener.h): gRPC 1.51 gives up on a listening
  // socket when accept fails with EMFILE; this loop sheds the newest connections instead.
  transposed::Listener::Options listener_options;
  listener_options.backlog = budget.accept_queue;
  listener_options.shed_when_full = static_cast<int>(std::max<uint64_t>(1, budget.burst / 2));
  auto listener = transposed::Listener::Bind(*listen, listener_options);
  if (!listener.ok()) {
    spdlog::error("cannot listen on --listen={}: {}", flags.listen, listener.status().message());
    return 1;
  }
  const int port = (*listener)->port();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // The service shell must outlive its server.
  transposed::GrpcTransposer shell(service->get(), &rpc_notes, admin_gate, &call_limiter);
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
  std::unique_ptr<grpc::Server> server;
  {
    grpc::ServerBuilder builder;
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(
        std::make_unique<transposed::RpcInterceptorFactory>(&rpc_notes, &metrics));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    // Bounds: concurrent calls per connection, and idle connections (no call open) closed after
    // --connection-idle-timeout so that forgotten clients and idle floods give their descriptors
    // back. (Calls hold no thread: the callback API.)
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, flags.max_streams_per_connection);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(flags.connection_idle_timeout * 1000));
    // A connection that never completes its handshake (TLS, the HTTP/2 preface) holds a
    // descriptor too: closed after 20 s (gRPC's default is 120 s).
    builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 20 * 1000);
    acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, *credentials);
    builder.RegisterService(&shell);
    server = builder.BuildAndStart();
  }
  if (server == nullptr) {
    spdlog::error("cannot start the gRPC server on --listen={} (see gRPC's message above)",
                  flags.listen);
    return 1;
  }
  if (auto* health = server->GetHealthCheckService()) {
    health->SetServingStatus(transposed::v1::Transposer::service_full_name(), true);
    health->SetServingStatus("transposed.store", (*store)->read_only().empty());
    if (shared) shared_health.Attach(health);
  }
  // Connections per client host and in total, and the descriptor guard: checked at accept.
  (*listener)->Start(acceptor.get(), &connection_limiter);
  spdlog::info("listening on {} (port {})", flags.listen, port);
  auto stop_serving = [&] {
    (*listener)->Stop();
    shared_health.Attach(nullptr);
    server->Shutdown();
  };
  if (!flags.metrics_listen.empty()) {
    metrics.Attach(service->get(), store->get(), &connection_limiter,
                   flags.metrics_entry_ratios);
    if (shared) metrics.AttachShared(shared.get());
    auto metrics_port = metrics.Serve(flags.metrics_listen);
    if (!metrics_port.ok()) {
      spdlog::error("cannot serve metrics: {}", metrics_port.status().ToString());
      (*service)->Shutdown();
      stop_serving();
      return 1;
    }
    spdlog::info("metrics on http://{}/metrics (port {})", flags.metrics_listen, *metrics_port);
  }
  if (!flags.port_file.empty() && !WritePortFile(flags.port_file, port)) {
    spdlog::error("cannot write --port-file={}", flags.port_file);
    metrics.Stop();  // no scrape reads the connection limiter (destroyed first) any more
    (*service)->Shutdown();
    stop_serving();
    return 1;
  }

  // `stopping` says the signal thread has begun the shutdown: the store's health stays
  // NOT_SERVING from then on.
  transposed::Mutex serving_mu;
  bool stopping = false;

  // The way back from read-only (store/store_reopener.h): health follows the store.
  auto reopener = std::make_unique<transposed::StoreReopener>(store->get(), [&](bool writable) {
    transposed::MutexLock l(&serving_mu);
    if (!stopping)
      if (auto* health = server->GetHealthCheckService())
        health->SetServingStatus("transposed.store", writable);
  });

  std::thread signal_thread([&] {
    int sig = 0;
    while (true) {
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig != SIGHUP) break;
      if (log_sink) {
        log_sink->Reopen();
        spdlog::info("received SIGHUP, reopened the log file {}", flags.log_file);
      } else {
        spdlog::info("received SIGHUP, logging to stderr: nothing to reopen");
      }
    }
    spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    transposed::MutexLock l(&serving_mu);
    stopping = true;
    // Health checks answer NOT_SERVING from now on; cancel tunes so that waiting requests
    // return CANCELLED at once; then stop serving.
    if (auto* health = server->GetHealthCheckService()) health->SetServingStatus(false);
    (*service)->Shutdown();
    // Let running handlers write their (now prompt) answers, for at most a few seconds; then
    // stop at once: waiting longer would only wait for idle client connections to go away.
    const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (shell.inflight() > 0 && std::chrono::steady_clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (*listener)->Stop();  // no new connection reaches gRPC after its shutdown
    shared_health.Attach(nullptr);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  });

  signal_thread.join();
  reopener.reset();  // no more store retries or health changes
  server->Wait();
  server.reset();
  metrics.Stop();  // no scrape reads the service or the store any more
  const transposed::ServiceCounters c = (*service)->counters();
  spdlog::info(
      "counters tunes_started={} tunes_completed={} tunes_failed={} cache_hits={} "
      "cache_misses={}",
      c.tunes_started, c.tunes_completed, c.tunes_failed, c.cache_hits, c.cache_misses);
  if (shared) {
    const transposed::FleetCounters f = shared->counters();
    spdlog::info(
        "shared store counters misses={} found={} leases={} waits={} unavailable={} refused={} "
        "round_trips={} connects={} published={} kept={} dropped={} leases_lost={} "
        "notifications={}",
        f.resolves, f.found, f.leases, f.waits, f.unavailable, f.refused, f.round_trips,
        f.connects, f.published_written, f.published_kept, f.dropped, f.leases_lost,
        f.notifications);
  }
  service->reset();  // joins the device tune threads (already joined by Shutdown)
  store->reset();    // closes the database
  spdlog::info("shutdown complete");
  transposed::RemoveGrpcLogHook();
  spdlog::shutdown();
  return 0;
}
