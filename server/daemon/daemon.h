// Daemon: the `transposed` process, composed from the libraries. RunDaemon is what main() runs
// after parsing the flags (daemon_flags.h), in the manner of gRPC's route_guide RunServer: start,
// serve until a signal, shut down.
//
// Start sets up, in this order: the descriptor limit, the backends and their devices, the store,
// the metrics, the peers (--peer), the shared store (--shared-store), the service, the server's
// credentials and admin token, --seed, the call and connection limiters, the listening sockets
// and their accept loop (listener.h: the daemon accepts connections itself and sheds the newest
// at EMFILE), the gRPC server (health, reflection, the interceptor) fed by that loop, the metrics
// server (--metrics-listen) and the port file. Run then waits in a signal thread: SIGHUP reopens
// the log file; SIGINT and SIGTERM shut down (health NOT_SERVING, tunes cancelled, up to 5 s for
// calls in flight, accepting stopped, server stopped). Log lines and exit codes are listed in
// server/README.md.
//
// Thread-safety: Start and Run are called once each, from one thread, with SIGINT, SIGTERM and
// SIGHUP blocked in every thread (RunDaemon blocks them before any thread exists). The store's
// health changes (the reopener's thread) and the shutdown are ordered by serving_mu_.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "server/daemon/daemon_flags.h"
#include "server/daemon/listener.h"
#include "server/daemon/logging.h"
#include "server/daemon/metrics.h"
#include "server/daemon/reflection_v1.h"
#include "server/daemon/startup.h"
#include "server/device_health.h"
#include "server/fleet/ceiling_board.h"
#include "server/fleet/fleet_flight.h"
#include "server/fleet/peers.h"
#include "server/grpc/call_limiter.h"
#include "server/grpc/connection_limiter.h"
#include "server/grpc/grpc_service.h"
#include "server/grpc/rpc_interceptor.h"
#include "server/grpc/security.h"
#include "server/service.h"
#include "store/store.h"
#include "store/store_reopener.h"

namespace transposed {

class Daemon {
 public:
  // Sets everything up and serves (the port file is written last). INVALID_ARGUMENT: a usage
  // error, to print after "transposed: " (exit 2); any other status: the daemon cannot run here,
  // to log at error level (exit 1). `signals`: the blocked set Run's signal thread waits for.
  static StatusOr<std::unique_ptr<Daemon>> Start(DaemonFlags flags, const sigset_t& signals,
                                                 std::shared_ptr<ReopenableFileSink> log_sink);
  // Stops what Start started, in reverse order (a Daemon that failed half way included).
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Serves until SIGINT or SIGTERM, then shuts down and logs the counters. The exit code (0).
  int Run();

 private:
  // A health status of the server set from another thread: "transposed.shared_store" (from the
  // shared store's thread when it goes down or comes back) and "transposed.devices" (from a tune
  // thread when a device is flagged slow or cleared, server/device_health.h); applied when the
  // server starts.
  class SharedHealth {
   public:
    SharedHealth(std::string name, bool serving) : name_(std::move(name)), available_(serving) {}
    void Attach(grpc::HealthCheckServiceInterface* health) EXCLUDES(mu_);
    void Set(bool available) EXCLUDES(mu_);

   private:
    const std::string name_;
    Mutex mu_;
    grpc::HealthCheckServiceInterface* health_ GUARDED_BY(mu_) = nullptr;
    bool available_ GUARDED_BY(mu_) = false;
  };

  Daemon(DaemonFlags flags, const sigset_t& signals, std::shared_ptr<ReopenableFileSink> log_sink)
      : flags_(std::move(flags)), signals_(signals), log_sink_(std::move(log_sink)) {}

  // The steps of Start, in order.
  Status OpenBackendsAndStore(std::vector<std::unique_ptr<Backend>>* backends);
  Status StartPeers(ServiceOptions* options);
  Status StartSharedStore(const std::vector<std::unique_ptr<Backend>>& backends,
                          ServiceOptions* options);
  void StartHealth(size_t devices, ServiceOptions* options);
  Status StartService(std::vector<std::unique_ptr<Backend>> backends, ServiceOptions options);
  Status StartServing();

  // The gRPC server with its shell, fed by the listener's accept loop.
  Status StartServer();
  // Stops accepting, forgets the shared health's server, shuts the server down (calls still
  // running are cancelled at `deadline`; none: waited for).
  void StopServing(std::optional<std::chrono::system_clock::time_point> deadline);
  // The signal thread: SIGHUP reopens the log; SIGINT/SIGTERM shut down, then return.
  void WaitForSignals();

  DaemonFlags flags_;
  const sigset_t signals_;
  std::shared_ptr<ReopenableFileSink> log_sink_;
  ListenAddress listen_;
  uint64_t file_limit_ = 0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<PeerSet> peers_;
  SharedHealth shared_health_{"transposed.shared_store", false};
  SharedHealth devices_health_{"transposed.devices", true};
  // The shared store: created before the service (which stops it), destroyed after it.
  std::unique_ptr<FleetFlight> shared_;
  // The health probe's class figures (the shared store's with --shared-store, else this
  // daemon's devices') and verdicts (server/device_health.h).
  std::unique_ptr<CeilingBoard> ceiling_board_;
  std::unique_ptr<DeviceHealth> device_health_;
  std::unique_ptr<TransposeService> service_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  AdminGate admin_gate_;
  RpcNotes rpc_notes_;
  std::unique_ptr<CallLimiter> call_limiter_;
  DescriptorBudget budget_;
  std::unique_ptr<ConnectionLimiter> connection_limiter_;
  std::unique_ptr<Listener> listener_;
  // The service shell must outlive its server.
  std::unique_ptr<GrpcTransposer> shell_;
  std::unique_ptr<ReflectionV1> reflection_v1_;  // grpc.reflection.v1 (v1alpha: gRPC's plugin)
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::unique_ptr<grpc::Server> server_;
  // stopping_: the signal thread has begun the shutdown; the store's health stays NOT_SERVING.
  Mutex serving_mu_;
  bool stopping_ GUARDED_BY(serving_mu_) = false;
  std::unique_ptr<StoreReopener> reopener_;
};

// Blocks SIGINT, SIGTERM and SIGHUP (before any thread exists, so that every thread inherits
// the mask and only the signal thread's sigwait() sees them), sets up the log, starts the
// Daemon and runs it. The process's exit code: 0 after a clean shutdown, 1 when the daemon
// cannot run here (logged), 2 for a usage error (on stderr).
int RunDaemon(DaemonFlags flags);

}  // namespace transposed
