// Metrics: the daemon's Prometheus metrics (prometheus-cpp), served over HTTP at /metrics on
// --metrics-listen HOST:PORT.
//
// Counted as things happen (Metrics is the service's ServiceObserver and the interceptor's
// RpcRecorder): requests by RPC and code, RPC latency, cache hits and misses, tunes started,
// completed and failed, tune wall time, connections refused at accept. Read at scrape time (a
// Collectable over the service, the store and the connection limiter): tune queue depth and worker
// restarts per device, with --metrics-entry-ratios the best ratio (winner / copy ceiling) of each
// stored entry of this daemon's devices (at most kMaxEntrySeries, newest first; off by default: one
// series per cached problem), and the gRPC connections open (the limiter drops the closed ones
// before it is read, so a scrape never counts a closed one). Every name is listed in
// docs/user/deploy.md ("Metrics (Prometheus)") and in metrics.cc.
//
// Per-device series (transposed_entry_best_ratio too) carry dcgm-exporter's device labels, with
// its names and meanings, so that they join with DCGM's on (Hostname, gpu) or UUID: gpu (the
// index), UUID, modelName, Hostname; no `device` label (dcgm-exporter's says "nvidia0"). A fixed
// set per device: the cardinality is the number of devices.
//
// Thread-safety: every method may be called from any number of threads at once. Attach() must be
// called before Serve(); the service and store it is given must outlive the exposer, i.e. this
// object, or Stop() must be called first.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "server/device_health.h"
#include "server/fleet/fleet_flight.h"
#include "server/grpc/connection_limiter.h"
#include "server/grpc/rpc_interceptor.h"
#include "server/service.h"
#include "store/store.h"

namespace transposed {

class Metrics final : public ServiceObserver, public RpcRecorder {
 public:
  // Entries of the per-entry ratio gauge, newest first; older entries are left out.
  static constexpr int kMaxEntrySeries = 10000;
  // Distinct (service, method, code) series of the request counter; later ones count as
  // method "other" (a client can name methods that do not exist).
  static constexpr int kMaxRpcSeries = 512;

  // Counters of `devices` (index 0..n-1), labelled for dcgm-exporter with `hostname`.
  Metrics(const std::vector<DeviceInfo>& devices, const std::string& hostname);
  ~Metrics() override;

  // The sources of the scrape-time metrics. `connections` may be null (no connection gauge).
  // entry_ratios: also the per-entry transposed_entry_best_ratio series.
  void Attach(const TransposeService* service, Store* store,
              ConnectionLimiter* connections = nullptr, bool entry_ratios = false) EXCLUDES(mu_);
  // The shared store's counters (transposed_shared_store_*); it must outlive the exposer.
  void AttachShared(const FleetFlight* shared);
  // The health probe's verdicts (transposed_device_slow, transposed_device_class_ceiling_ratio);
  // it must outlive the exposer.
  void AttachHealth(const DeviceHealth* health);
  // Serves /metrics on HOST:PORT (port 0: any free port); the bound port. UNAVAILABLE when it
  // cannot listen there.
  StatusOr<int> Serve(const std::string& listen) EXCLUDES(mu_);
  // Stops serving (idempotent); later scrapes fail to connect.
  void Stop() EXCLUDES(mu_);

  // Everything, in the Prometheus text format (what /metrics answers).
  std::string Text() const;

  // ServiceObserver
  void OnCacheLookup(int device, bool hit) override;
  void OnTuneStarted(int device) override;
  void OnTuneFinished(int device, const Status& status, double seconds) override;
  // RpcRecorder
  Series* SeriesOf(const std::string& service, const std::string& method,
                   grpc::StatusCode code) override EXCLUDES(mu_);
  // A connection refused at accept by ConnectionLimiter: "per_client", "total" or "descriptors".
  void OnConnectionRefused(const char* cap);
  // ServiceObserver: an entry from outside refused by validation (store/entry_validation.h).
  void OnEntryRefused(const char* door) override;

 private:
  class ScrapeCollector;
  struct PerDevice {
    prometheus::Counter* cache_hits;
    prometheus::Counter* cache_misses;
    prometheus::Counter* tunes_started;
    prometheus::Counter* tunes_completed;
    prometheus::Counter* tunes_failed;
    prometheus::Histogram* tune_seconds;
  };
  struct Rpc final : Series {
    Rpc(prometheus::Counter* r, prometheus::Histogram* l) : requests(r), latency(l) {}
    void Done(double seconds) override {
      requests->Increment();
      latency->Observe(seconds);
    }
    prometheus::Counter* const requests;
    prometheus::Histogram* const latency;
  };

  const PerDevice* Device(int device) const;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ScrapeCollector> scrape_;
  prometheus::Family<prometheus::Counter>* rpc_requests_;
  prometheus::Family<prometheus::Histogram>* rpc_latency_;
  std::vector<PerDevice> devices_;  // immutable after construction
  prometheus::Counter* connections_refused_per_client_;
  prometheus::Counter* connections_refused_total_;
  prometheus::Counter* connections_refused_descriptors_;
  std::map<std::string, prometheus::Counter*, std::less<>> entries_refused_;  // immutable; by door

  Mutex mu_;
  // (service, method, code name) -> its series (a map: handed-out addresses stay valid).
  std::map<std::tuple<std::string, std::string, std::string>, Rpc> rpcs_ GUARDED_BY(mu_);
  std::unique_ptr<prometheus::Exposer> exposer_ GUARDED_BY(mu_);
};

}  // namespace transposed
