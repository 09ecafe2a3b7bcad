#include "server/daemon/daemon.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "client/client.h"
#include "core/device_class.h"
#include "core/text.h"
#include "core/version.h"
#include "server/backends.h"
#include "server/daemon/notify.h"
#include "server/daemon/seed.h"
#include "server/grpc/grpc_log.h"

namespace transposed {
namespace {

// Start's two kinds of failure (daemon.h): a usage error (exit 2) or a daemon that cannot run
// here (exit 1, logged).
Status Usage(const std::string& message) { return Status::InvalidArgument(message); }
Status CannotRun(const std::string& message) { return Status::FailedPrecondition(message); }

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

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return host;
}

}  // namespace

void Daemon::SharedHealth::Attach(grpc::HealthCheckServiceInterface* health) {
  MutexLock l(&mu_);
  health_ = health;
  if (health_ != nullptr) health_->SetServingStatus(name_, available_);
}

void Daemon::SharedHealth::Set(bool available) {
  MutexLock l(&mu_);
  available_ = available;
  if (health_ != nullptr) health_->SetServingStatus(name_, available_);
}

StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonFlags flags, const sigset_t& signals,
                                                std::shared_ptr<ReopenableFileSink> log_sink) {
  std::unique_ptr<Daemon> d(new Daemon(std::move(flags), signals, std::move(log_sink)));
  TR_ASSIGN_OR_RETURN(d->listen_, ParseListenAddress(d->flags_.listen));
  {
    std::string note;
    d->file_limit_ = RaiseFileLimit(&note);
    spdlog::info("{}", note);
  }
  std::vector<std::unique_ptr<Backend>> backends;
  TR_RETURN_IF_ERROR(d->OpenBackendsAndStore(&backends));
  // Counts from the first request on; served (StartServing) only with --metrics-listen.
  std::vector<DeviceInfo> metric_devices;
  for (const auto& b : backends) metric_devices.push_back(b->device());
  d->metrics_ = std::make_unique<Metrics>(metric_devices, HostName());
  ServiceOptions options;
  options.tune_budget_seconds = d->flags_.tune_budget;
  options.observer = d->metrics_.get();
  options.max_queued_tunes = d->flags_.max_queued_tunes;
  options.polite = d->flags_.polite;
  TR_RETURN_IF_ERROR(d->StartPeers(&options));
  TR_RETURN_IF_ERROR(d->StartSharedStore(backends, &options));
  d->StartHealth(backends.size(), &options);
  TR_RETURN_IF_ERROR(d->StartService(std::move(backends), std::move(options)));
  TR_RETURN_IF_ERROR(d->StartServing());
  return d;
}

Status Daemon::OpenBackendsAndStore(std::vector<std::unique_ptr<Backend>>* backends) {
  BackendOptions backend_options;
  backend_options.cpu_threads = flags_.cpu_threads;
  backend_options.worker_path = flags_.worker;
  backend_options.cpu_instance_id = flags_.instance_id;
  if (!flags_.instance_id.empty()) {
    Status s = CheckFieldLength("--instance-id", flags_.instance_id);
    if (!s.ok()) return Usage(s.message());
    if (flags_.backend == "cuda")
      return Usage("--instance-id: only for the CPU backend (a GPU's instance is its UUID)");
  }
  auto made = DaemonBackends().Make(flags_.backend, backend_options);
  if (!made.ok()) return CannotRun("cannot set up the backend: " + made.status().ToString());
  *backends = std::move(made).value();
  for (size_t i = 0; i < backends->size(); ++i) {
    const auto& d = (*backends)[i]->device();
    spdlog::info("device {}: backend={} name='{}' uuid={} memory_bytes={} fingerprint={}", i,
                 d.backend, d.name, d.uuid, d.memory_bytes, d.Fingerprint());
  }

  auto store = Store::Open(flags_.db);
  if (!store.ok())
    return CannotRun("cannot open the database --db=" + flags_.db + ": " +
                     store.status().ToString());
  store_ = std::move(store).value();
  spdlog::info("db={}", flags_.db);
  if (const std::string why = store_->read_only(); !why.empty()) {
    spdlog::warn(
        "the database is READ-ONLY: lookups are served from it, tunes are answered but not "
        "stored (writing is retried with backoff); health service 'transposed.store' answers "
        "NOT_SERVING. Cause: {}",
        why);
  }
  return Status::OK();
}

Status Daemon::StartPeers(ServiceOptions* options) {
  const DaemonFlags& f = flags_;
  if (f.peers.empty() &&
      !(f.peer_tls_ca + f.peer_tls_cert + f.peer_tls_key + f.peer_tls_server_name).empty())
    return Usage("--peer-tls-*: given without any --peer");
  if (f.peers.empty()) return Status::OK();
  PeerOptions peer_options;
  peer_options.peers = f.peers;
  peer_options.deadline_seconds = f.peer_timeout;
  peer_options.fanout = f.peer_fanout;
  // TLS to peers: the client's credentials code (client/client.h), from --peer-tls-* files.
  ClientOptions peer_tls;
  peer_tls.tls_ca_file = f.peer_tls_ca;
  peer_tls.tls_cert_file = f.peer_tls_cert;
  peer_tls.tls_key_file = f.peer_tls_key;
  peer_options.tls = !f.peer_tls_ca.empty() || !f.peer_tls_cert.empty();
  peer_options.tls_server_name = f.peer_tls_server_name;
  auto peer_credentials = ChannelCredentialsFor(peer_tls);
  if (!peer_credentials.ok()) return Usage("--peer-tls-*: " + peer_credentials.status().message());
  peer_options.credentials = std::move(peer_credentials).value();
  auto created = PeerSet::Create(peer_options);
  if (!created.ok()) return Usage(created.status().message());
  peers_ = std::move(created).value();
  spdlog::info("peers: {} (timeout {} s, {})", fmt::join(f.peers, ","), f.peer_timeout,
               !peer_options.tls         ? "plaintext"
               : f.peer_tls_cert.empty() ? "tls"
                                         : "mtls");
  options->peer_lookup = MakePeerLookup(peers_.get(), metrics_.get());
  return Status::OK();
}

Status Daemon::StartSharedStore(const std::vector<std::unique_ptr<Backend>>& backends,
                                ServiceOptions* options) {
  const DaemonFlags& f = flags_;
  if (f.shared_store.empty() && !f.shared_store_password_file.empty())
    return Usage("--shared-store-password-file: given without --shared-store");
  if (f.shared_store.empty()) return Status::OK();
  auto url = ParseRedisUrl(f.shared_store);
  if (!url.ok()) return Usage(url.status().message());
  FleetOptions fleet;
  fleet.store.url = *url;
  fleet.store.timeout_seconds = f.shared_store_timeout;
  if (!f.shared_store_password_file.empty()) {
    auto password = ReadTokenFile(f.shared_store_password_file, "--shared-store-password-file");
    if (!password.ok()) return CannotRun(password.status().message());
    fleet.store.password = std::move(password).value();
  }
  fleet.lease_seconds = f.shared_store_lease;
  for (const auto& b : backends) {
    std::pair<std::string, std::string> cls{b->device().library_version, ClassOf(b->device()).key};
    if (std::find(fleet.classes.begin(), fleet.classes.end(), cls) == fleet.classes.end())
      fleet.classes.push_back(cls);
    ++fleet.lease_budget[cls.second];  // one lease at a time per device of the class
  }
  fleet.owner = HostName() + "/" + std::to_string(getpid()) +
                (f.instance_id.empty() ? "" : "/" + f.instance_id);
  fleet.on_availability = [this](bool available, const std::string&) {
    shared_health_.Set(available);
  };
  ceiling_board_ = std::make_unique<RedisCeilingBoard>(fleet.store);
  auto created = FleetFlight::Create(std::move(fleet));
  if (!created.ok()) return Usage(created.status().message());
  shared_ = std::move(created).value();
  options->shared = shared_.get();
  spdlog::info(
      "shared store: {} ({}, timeout {} s, lease {} s); health service "
      "'transposed.shared_store' says whether it answers",
      url->ToString(), f.shared_store_password_file.empty() ? "no password" : "password",
      f.shared_store_timeout, f.shared_store_lease);
  return Status::OK();
}

void Daemon::StartHealth(size_t devices, ServiceOptions* options) {
  if (ceiling_board_ == nullptr) ceiling_board_ = std::make_unique<LocalCeilingBoard>();
  device_health_ = std::make_unique<DeviceHealth>(
      static_cast<int>(devices), HealthOptions{}, ceiling_board_.get(),
      [this](int, const DeviceHealthStatus&, bool any_slow) { devices_health_.Set(!any_slow); });
  options->health = device_health_.get();
  metrics_->AttachHealth(device_health_.get());
}

Status Daemon::StartService(std::vector<std::unique_ptr<Backend>> backends,
                            ServiceOptions options) {
  auto service = TransposeService::Create(std::move(backends), store_.get(), options);
  if (!service.ok()) return CannotRun("cannot start the service: " + service.status().ToString());
  service_ = std::move(service).value();

  auto credentials = MakeServerCredentials(flags_.security);
  if (!credentials.ok()) return CannotRun(credentials.status().message());
  credentials_ = std::move(credentials).value();
  std::string admin_token;
  if (!flags_.security.admin_token_file.empty()) {
    auto token = ReadTokenFile(flags_.security.admin_token_file, "--admin-token-file");
    if (!token.ok()) return CannotRun(token.status().message());
    admin_token = std::move(token).value();
  }
  const bool tls = !flags_.security.tls_cert.empty();
  const bool mtls = tls && !flags_.security.tls_client_ca.empty();
  spdlog::info("transport={} admin={}",
               mtls  ? "mtls"
               : tls ? "tls"
                     : "plaintext",
               !admin_token.empty() ? "token"
               : mtls               ? "loopback or verified client certificate"
                                    : "loopback only");
  if (!listen_.loopback && !tls) {
    spdlog::warn(
        "WARNING: --listen={} is reachable from other machines and serves PLAINTEXT: anyone who "
        "can reach it reads every answer{}; set --tls-cert/--tls-key (and --tls-client-ca, "
        "--admin-token-file) or listen on 127.0.0.1",
        flags_.listen, admin_token.empty() ? "" : " and can capture the admin token from the wire");
  }
  admin_gate_ = AdminGate(std::move(admin_token), mtls);
  if (!flags_.seed.empty()) {
    Status seeded = SeedFromFile(flags_.seed, service_.get());
    if (!seeded.ok()) return CannotRun(seeded.ToString());
  }
  return Status::OK();
}

Status Daemon::StartServing() {
  call_limiter_ = std::make_unique<CallLimiter>(flags_.max_calls_per_client, flags_.max_calls);
  // Connections beyond the descriptor limit would make accept fail (EMFILE): the default total
  // cap keeps what is open now (database, log, worker processes), the daemon's other files and a
  // burst free, and the guard sheds the newest connection when the table is nearly full anyway.
  budget_ = MakeDescriptorBudget(file_limit_, CountOpenFiles(), SystemAcceptQueueCap());
  if (flags_.max_connections == 0) flags_.max_connections = budget_.max_connections;
  spdlog::info(
      "connection caps: {} per client host, {} in total; descriptors: limit {}, {} open, {} "
      "kept for the daemon's files and {} for bursts, connections on descriptor {} and above "
      "are shed, accept queue {}",
      flags_.max_connections_per_client, flags_.max_connections, budget_.limit, budget_.open_now,
      DescriptorBudget::kOwnFiles, budget_.burst,
      budget_.guard_fd > 0 ? std::to_string(budget_.guard_fd) : std::string("(none)"),
      budget_.accept_queue > 0 ? std::to_string(budget_.accept_queue) : std::string("(system)"));
  Metrics* metrics = metrics_.get();
  connection_limiter_ = std::make_unique<ConnectionLimiter>(
      flags_.max_connections_per_client, flags_.max_connections,
      [metrics](const char* cap) { metrics->OnConnectionRefused(cap); }, budget_.guard_fd);
  if (!flags_.security.tls_cert.empty()) {
    Status checked = CheckServerCredentials(credentials_);
    if (!checked.ok()) return CannotRun(checked.message());
  }
  // The daemon accepts connections itself (server/daemon/listener.h): gRPC 1.51 gives up on a
  // listening socket when accept fails with EMFILE; this loop sheds the newest connections
  // instead.
  Listener::Options listener_options;
  listener_options.backlog = budget_.accept_queue;
  listener_options.shed_when_full = static_cast<int>(std::max<uint64_t>(1, budget_.burst / 2));
  auto listener = Listener::Bind(listen_, listener_options);
  if (!listener.ok())
    return CannotRun("cannot listen on --listen=" + flags_.listen + ": " +
                     listener.status().message());
  listener_ = std::move(listener).value();
  TR_RETURN_IF_ERROR(StartServer());
  // Connections per client host and in total, and the descriptor guard: checked at accept.
  listener_->Start(acceptor_.get(), connection_limiter_.get());
  spdlog::info("listening on {} (port {})", flags_.listen, listener_->port());
  if (!flags_.metrics_listen.empty()) {
    metrics_->Attach(service_.get(), store_.get(), connection_limiter_.get(),
                     flags_.metrics_entry_ratios);
    if (shared_) metrics_->AttachShared(shared_.get());
    auto metrics_port = metrics_->Serve(flags_.metrics_listen);
    if (!metrics_port.ok())
      return CannotRun("cannot serve metrics: " + metrics_port.status().ToString());
    spdlog::info("metrics on http://{}/metrics (port {})", flags_.metrics_listen, *metrics_port);
  }
  if (!flags_.port_file.empty() && !WritePortFile(flags_.port_file, listener_->port()))
    return CannotRun("cannot write --port-file=" + flags_.port_file);
  // systemd (Type=notify): ready now, serving and the port file written.
  if (Status s = NotifyServiceManager(flags_.notify_socket,
                                      "READY=1\nSTATUS=serving on " + flags_.listen + " (port " +
                                          std::to_string(listener_->port()) + ")");
      !s.ok())
    spdlog::warn("{}", s.ToString());
  // The way back from read-only (store/store_reopener.h): health follows the store.
  reopener_ = std::make_unique<StoreReopener>(store_.get(), [this](bool writable) {
    MutexLock l(&serving_mu_);
    if (!stopping_)
      if (auto* health = server_->GetHealthCheckService())
        health->SetServingStatus("transposed.store", writable);
  });
  return Status::OK();
}

Status Daemon::StartServer() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  shell_ = std::make_unique<GrpcTransposer>(service_.get(), &rpc_notes_, admin_gate_,
                                            call_limiter_.get());
  grpc::ServerBuilder builder;
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<RpcInterceptorFactory>(&rpc_notes_, metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  // Bounds: concurrent calls per connection, and idle connections (no call open) closed after
  // --connection-idle-timeout so that forgotten clients and idle floods give their descriptors
  // back. (Calls hold no thread: the callback API.)
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, flags_.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(flags_.connection_idle_timeout * 1000));
  // A connection that never completes its handshake (TLS, the HTTP/2 preface) holds a
  // descriptor too: closed after 20 s (gRPC's default is 120 s).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 20 * 1000);
  acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials_);
  builder.RegisterService(shell_.get());
  // Reflection v1 beside gRPC's v1alpha plugin: the services a client may list.
  reflection_v1_ = std::make_unique<ReflectionV1>(
      std::vector<std::string>{v1::Transposer::service_full_name(), "grpc.health.v1.Health",
                               "grpc.reflection.v1alpha.ServerReflection",
                               grpc::reflection::v1::ServerReflection::service_full_name()});
  builder.RegisterService(reflection_v1_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr)
    return CannotRun("cannot start the gRPC server on --listen=" + flags_.listen +
                     " (see gRPC's message above)");
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(v1::Transposer::service_full_name(), true);
    health->SetServingStatus("transposed.store", store_->read_only().empty());
    if (shared_) shared_health_.Attach(health);
    devices_health_.Attach(health);
  }
  return Status::OK();
}

void Daemon::StopServing(std::optional<std::chrono::system_clock::time_point> deadline) {
  if (listener_) listener_->Stop();  // no new connection reaches gRPC after its shutdown
  shared_health_.Attach(nullptr);
  devices_health_.Attach(nullptr);
  if (!server_) return;
  if (deadline.has_value())
    server_->Shutdown(*deadline);
  else
    server_->Shutdown();
}

void Daemon::WaitForSignals() {
  int sig = 0;
  while (true) {
    if (sigwait(&signals_, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    if (log_sink_) {
      log_sink_->Reopen();
      spdlog::info("received SIGHUP, reopened the log file {}", flags_.log_file);
    } else {
      spdlog::info("received SIGHUP, logging to stderr: nothing to reopen");
    }
  }
  spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (void)NotifyServiceManager(flags_.notify_socket, "STOPPING=1");
  MutexLock l(&serving_mu_);
  stopping_ = true;
  // Health checks answer NOT_SERVING from now on; cancel tunes so that waiting requests
  // return CANCELLED at once; then stop serving.
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
  service_->Shutdown();
  // Let running handlers write their (now prompt) answers, for at most a few seconds; then
  // stop at once: waiting longer would only wait for idle client connections to go away.
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (shell_->inflight() > 0 && std::chrono::steady_clock::now() < grace)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  StopServing(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
}

int Daemon::Run() {
  std::thread signal_thread([this] { WaitForSignals(); });
  signal_thread.join();
  reopener_.reset();  // no more store retries or health changes
  server_->Wait();
  server_.reset();
  metrics_->Stop();  // no scrape reads the service or the store any more
  const ServiceCounters c = service_->counters();
  spdlog::info(
      "counters tunes_started={} tunes_completed={} tunes_failed={} cache_hits={} "
      "cache_misses={}",
      c.tunes_started, c.tunes_completed, c.tunes_failed, c.cache_hits, c.cache_misses);
  if (shared_) {
    const FleetCounters f = shared_->counters();
    spdlog::info(
        "shared store counters misses={} found={} leases={} waits={} unavailable={} refused={} "
        "round_trips={} connects={} published={} kept={} dropped={} leases_lost={} "
        "notifications={}",
        f.resolves, f.found, f.leases, f.waits, f.unavailable, f.refused, f.round_trips,
        f.connects, f.published_written, f.published_kept, f.dropped, f.leases_lost,
        f.notifications);
  }
  service_.reset();  // joins the device tune threads (already joined by Shutdown)
  store_.reset();    // closes the database
  spdlog::info("shutdown complete");
  return 0;
}

Daemon::~Daemon() {
  // A Daemon that Start gave up on half way: stop what runs, in the order of a shutdown (after
  // Run, all of this is done already).
  reopener_.reset();
  if (metrics_) metrics_->Stop();  // no scrape reads the connection limiter or the service
  if (service_) service_->Shutdown();
  StopServing(std::nullopt);
  server_.reset();
}

int RunDaemon(DaemonFlags flags) {
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

  std::shared_ptr<ReopenableFileSink> log_sink;
  if (!SetUpDaemonLogging(flags.log_file, flags.log_level, flags.log_format, &log_sink)) return 1;
  InstallGrpcLogHook();
  spdlog::info("transposed {} starting (kernel library {}), pid {}", kProjectVersion,
               kLibraryVersion, static_cast<long>(getpid()));
  auto daemon = Daemon::Start(std::move(flags), signals, std::move(log_sink));
  if (!daemon.ok()) {
    if (daemon.status().code() == StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "transposed: %s\n", daemon.status().message().c_str());
      return 2;
    }
    spdlog::error("{}", daemon.status().message());
    return 1;
  }
  const int exit_code = (*daemon)->Run();
  daemon->reset();
  RemoveGrpcLogHook();
  spdlog::shutdown();
  return exit_code;
}

}  // namespace transposed
