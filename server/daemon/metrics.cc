#include "server/daemon/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <string_view>
#include <utility>

namespace transposed {

namespace {

// RPC latency: 0.5 ms (a cache hit) to 10 min (a long tune).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
      1,      2.5,   5,      10,    30,   60,    120,  300, 600};
  return *b;
}

// Tune wall time: 0.1 s (a tiny CPU problem) to 20 min.
const prometheus::Histogram::BucketBoundaries& TuneBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200};
  return *b;
}

prometheus::ClientMetric::Label L(std::string name, std::string value) {
  return prometheus::ClientMetric::Label{std::move(name), std::move(value)};
}

}  // namespace

// The scrape-time metrics: read from the service, the store and the connection limiter when
// /metrics is fetched.
class Metrics::ScrapeCollector : public prometheus::Collectable {
 public:
  explicit ScrapeCollector(std::vector<prometheus::Labels> device_labels)
      : device_labels_(std::move(device_labels)) {}

  void Attach(const TransposeService* service, Store* store, ConnectionLimiter* connections,
              bool entry_ratios) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    service_ = service;
    store_ = store;
    connections_ = connections;
    entry_ratios_ = entry_ratios;
  }
  void AttachShared(const FleetFlight* shared) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    shared_ = shared;
  }
  void AttachHealth(const DeviceHealth* health) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    health_ = health;
  }

  std::vector<prometheus::MetricFamily> Collect() const override EXCLUDES(mu_) {
    MutexLock l(&mu_);
    std::vector<prometheus::MetricFamily> out;
    if (service_ == nullptr) return out;
    const std::vector<DeviceInfo> devices = service_->ListDevices();

    prometheus::MetricFamily depth{"transposed_tune_queue_depth",
                                   "Tunes queued or running, per device", prometheus::MetricType::Gauge,
                                   {}};
    const std::vector<int> depths = service_->QueueDepths();
    for (size_t d = 0; d < depths.size(); ++d) {
      prometheus::ClientMetric m;
      m.label = Labels(d);
      m.gauge.value = depths[d];
      depth.metric.push_back(std::move(m));
    }
    out.push_back(std::move(depth));

    prometheus::MetricFamily restarts{"transposed_worker_restarts_total",
                                      "Measuring worker processes restarted after they died, per "
                                      "device",
                                      prometheus::MetricType::Counter,
                                      {}};
    const std::vector<int64_t> counts = service_->WorkerRestarts();
    for (size_t d = 0; d < counts.size(); ++d) {
      prometheus::ClientMetric m;
      m.label = Labels(d);
      m.counter.value = static_cast<double>(counts[d]);
      restarts.metric.push_back(std::move(m));
    }
    out.push_back(std::move(restarts));
    AddLoads(service_->DeviceLoads(), &out);
    if (health_ != nullptr) AddHealth(health_->All(), &out);

    // One series per cached problem: only when asked for (--metrics-entry-ratios), capped.
    if (store_ != nullptr && entry_ratios_) {
      prometheus::MetricFamily ratio{
          "transposed_entry_best_ratio",
          "Stored winner's bandwidth over the device's copy ceiling, per entry of this daemon's "
          "devices (only with --metrics-entry-ratios; at most 10000 series, newest first)",
          prometheus::MetricType::Gauge,
          {}};
      int left = kMaxEntrySeries;
      for (const auto& device : devices) {
        if (left <= 0) break;
        StoreFilter filter;
        filter.device_fingerprint = device.Fingerprint();
        auto entries = store_->List(filter, /*include_candidates=*/false, left);
        if (!entries.ok()) continue;  // a busy store: this scrape goes without
        left -= static_cast<int>(entries->size());
        for (const auto& e : *entries) {
          const double ceiling = e.ceiling_gbps();
          prometheus::ClientMetric m;
          // The device's dcgm-exporter labels, so a ratio joins DCGM's series of its GPU.
          m.label = Labels(static_cast<size_t>(device.index));
          m.label.push_back(L("problem", e.problem.Key()));
          m.label.push_back(L("variant", e.best.name));
          m.gauge.value = ceiling > 0 ? e.gbps() / ceiling : 0;
          ratio.metric.push_back(std::move(m));
        }
      }
      out.push_back(std::move(ratio));
    }

    if (store_ != nullptr) {
      out.push_back(OneGauge("transposed_store_read_only",
                             "1 when the database could not be opened for writing: lookups are "
                             "served, tunes are answered but not stored",
                             store_->read_only().empty() ? 0 : 1));
      prometheus::MetricFamily bad{"transposed_store_bad_rows_skipped_total",
                                   "Stored entries read back that did not parse or validate and "
                                   "were skipped (each read of one counts)",
                                   prometheus::MetricType::Counter, {}};
      prometheus::ClientMetric m;
      m.counter.value = static_cast<double>(store_->bad_rows_skipped());
      bad.metric.push_back(std::move(m));
      out.push_back(std::move(bad));
    }

    if (connections_ != nullptr) {
      // OpenTotal() first drops the connections whose descriptors are closed: the value is what
      // is open at this scrape, not what was open at the last accept.
      out.push_back(OneGauge("transposed_connections_open",
                             "gRPC connections open now (all client hosts; HTTP/2, plaintext or "
                             "TLS, idle ones included)",
                             static_cast<double>(connections_->OpenTotal())));
    }
    if (shared_ != nullptr) AddShared(shared_->counters(), &out);
    return out;
  }

 private:
  // The busy signal of every device (server/polite.h): its state (one series per state, 1 for
  // the current one), the sampled utilization and other processes (absent when not known),
  // and the background tunes waiting and abandoned.
  void AddLoads(const std::vector<DeviceLoad>& loads,
                std::vector<prometheus::MetricFamily>* out) const {
    prometheus::MetricFamily state{"transposed_device_load_state",
                                   "1 for the device's current busy state (state: busy, idle, "
                                   "unknown), 0 for the others",
                                   prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily util{"transposed_device_utilization_percent",
                                  "The device's utilization as its worker last sampled it (NVML; "
                                  "absent without a source)",
                                  prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily others{"transposed_device_other_processes",
                                    "Compute processes on the device besides the daemon's worker "
                                    "(NVML; absent without a source)",
                                    prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily waiting{"transposed_background_tunes_waiting",
                                     "Background tunes deferred or throttled now because the "
                                     "device is busy",
                                     prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily ceiling{"transposed_device_tune_ceiling_ratio",
                                     "The latest tune's copy ceiling over the device's idle "
                                     "ceiling at its size (absent when not known); below 1 - "
                                     "--contention-ceiling-drop it was measured under contention",
                                     prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily abandoned{"transposed_background_tunes_abandoned_total",
                                       "Background tunes abandoned because no idle window came "
                                       "within --background-max-wait",
                                       prometheus::MetricType::Counter, {}};
    for (size_t d = 0; d < loads.size(); ++d) {
      const DeviceLoad& l = loads[d];
      for (LoadState s : {LoadState::kBusy, LoadState::kIdle, LoadState::kUnknown}) {
        prometheus::ClientMetric m;
        m.label = Labels(d);
        m.label.push_back(L("state", std::string(LoadStateName(s))));
        m.gauge.value = l.state == s ? 1 : 0;
        state.metric.push_back(std::move(m));
      }
      if (l.sample.utilization_percent >= 0) {
        prometheus::ClientMetric m;
        m.label = Labels(d);
        m.gauge.value = l.sample.utilization_percent;
        util.metric.push_back(std::move(m));
      }
      if (l.sample.other_processes >= 0) {
        prometheus::ClientMetric m;
        m.label = Labels(d);
        m.gauge.value = l.sample.other_processes;
        others.metric.push_back(std::move(m));
      }
      if (l.tune_ceiling_gbps > 0 && l.idle_ceiling_gbps > 0) {
        prometheus::ClientMetric m;
        m.label = Labels(d);
        m.gauge.value = l.tune_ceiling_gbps / l.idle_ceiling_gbps;
        ceiling.metric.push_back(std::move(m));
      }
      prometheus::ClientMetric w;
      w.label = Labels(d);
      w.gauge.value = l.background_waiting;
      waiting.metric.push_back(std::move(w));
      prometheus::ClientMetric a;
      a.label = Labels(d);
      a.counter.value = static_cast<double>(l.background_abandoned);
      abandoned.metric.push_back(std::move(a));
    }
    for (auto* f : {&state, &util, &others, &ceiling, &waiting, &abandoned})
      out->push_back(std::move(*f));
  }

  // The dcgm-exporter labels of device d (only `gpu` for an index not known).
  std::vector<prometheus::ClientMetric::Label> Labels(size_t d) const {
    std::vector<prometheus::ClientMetric::Label> out;
    if (d < device_labels_.size()) {
      for (const auto& [k, v] : device_labels_[d]) out.push_back(L(k, v));
    } else {
      out.push_back(L("gpu", std::to_string(d)));
    }
    return out;
  }

  // A family of one unlabelled gauge.
  static prometheus::MetricFamily OneGauge(std::string name, std::string help, double value) {
    prometheus::MetricFamily f{std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
    prometheus::ClientMetric m;
    m.gauge.value = value;
    f.metric.push_back(std::move(m));
    return f;
  }

  // The shared store's (--shared-store) counters and availability.
  static void AddShared(const FleetCounters& c, std::vector<prometheus::MetricFamily>* out) {
    out->push_back(OneGauge("transposed_shared_store_available",
                            "1 while the shared store (--shared-store) answers; 0: misses are "
                            "answered from local tunes",
                            c.available ? 1 : 0));
    const std::pair<const char*, std::pair<int64_t, const char*>> counters[] = {
        {"round_trips",
         {c.round_trips, "Round trips to the shared store (a pipeline counts once)"}},
        {"connects", {c.connects, "Connections attempted to the shared store"}},
        {"misses", {c.resolves, "Local misses that asked the shared store"}},
        {"found", {c.found, "Misses answered with a result of the shared store"}},
        {"leases", {c.leases, "Class-wide leases taken: this daemon tuned for its class"}},
        {"waits", {c.waits, "Misses that waited for another node's tune"}},
        {"refused", {c.refused, "Values refused (format, garbage, class, problem): never served"}},
        {"unavailable", {c.unavailable, "Misses tuned locally: the shared store did not answer"}},
        {"published", {c.published_written, "Winners written to the shared store"}},
        {"kept", {c.published_kept, "Winners not written: the stored one was as fast or faster"}},
        {"dropped", {c.dropped, "Publishes and releases given up: never carried out"}},
        {"unknown", {c.unknown, "Writes whose round trip failed (maybe carried out; sent again)"}},
        {"leases_lost", {c.leases_lost, "Leases another node took while this daemon tuned"}},
        {"leases_retaken",
         {c.leases_retaken,
          "Leases gone from Redis (restart, expiry) and "
          "taken again by this daemon's renewal"}},
        {"budget_waits",
         {c.budget_waits,
          "Misses that left a free lease to the class: this "
          "daemon held its lease budget"}},
        {"reconnects", {c.reconnects, "Command connections made again after a loss"}},
        {"pings", {c.pings, "PINGs of idle shared-store connections"}},
        {"scripts_loaded", {c.scripts_loaded, "SCRIPT LOAD and NOSCRIPT-fallback EVAL commands"}},
        {"notifications", {c.notifications, "Messages received on the subscription"}},
        {"wants",
         {c.wants,
          "Misses of a busy device that asked the class's idle nodes to tune "
          "first (docs/user/polite.md)"}},
        {"wanted", {c.wanted, "Asks for an idle node to tune, heard from the class"}},
    };
    for (const auto& [name, value] : counters) {
      prometheus::MetricFamily f{std::string("transposed_shared_store_") + name + "_total",
                                 value.second, prometheus::MetricType::Counter, {}};
      prometheus::ClientMetric m;
      m.counter.value = static_cast<double>(value.first);
      f.metric.push_back(std::move(m));
      out->push_back(std::move(f));
    }
  }

  // The health probe (server/device_health.h): slow or not, and the latest ceiling over the
  // class median (absent before the first verdict).
  void AddHealth(const std::vector<DeviceHealthStatus>& health,
                 std::vector<prometheus::MetricFamily>* out) const {
    prometheus::MetricFamily slow{"transposed_device_slow",
                                  "1 while the device is flagged slow: its tunes' copy ceiling "
                                  "more than 10% below the median of the other devices of its "
                                  "class, 3 tunes in a row (transposectl devices says why)",
                                  prometheus::MetricType::Gauge,
                                  {}};
    prometheus::MetricFamily ratio{"transposed_device_class_ceiling_ratio",
                                   "The latest tune's copy ceiling over the median of the other "
                                   "devices of its class at that size (absent before the first "
                                   "verdict)",
                                   prometheus::MetricType::Gauge,
                                   {}};
    for (size_t d = 0; d < health.size() && d < device_labels_.size(); ++d) {
      prometheus::ClientMetric m;
      m.label = Labels(d);
      m.gauge.value = health[d].slow ? 1 : 0;
      slow.metric.push_back(std::move(m));
      if (health[d].verdicts > 0) {
        prometheus::ClientMetric r;
        r.label = Labels(d);
        r.gauge.value = health[d].ratio;
        ratio.metric.push_back(std::move(r));
      }
    }
    out->push_back(std::move(slow));
    out->push_back(std::move(ratio));
  }

  mutable Mutex mu_;
  const DeviceHealth* health_ GUARDED_BY(mu_) = nullptr;
  const FleetFlight* shared_ GUARDED_BY(mu_) = nullptr;
  const TransposeService* service_ GUARDED_BY(mu_) = nullptr;
  Store* store_ GUARDED_BY(mu_) = nullptr;
  ConnectionLimiter* connections_ GUARDED_BY(mu_) = nullptr;
  bool entry_ratios_ GUARDED_BY(mu_) = false;
  const std::vector<prometheus::Labels> device_labels_;  // immutable
};

namespace {
std::vector<prometheus::Labels> AllDeviceLabels(const std::vector<DeviceInfo>& devices,
                                                const std::string& hostname) {
  std::vector<prometheus::Labels> out;
  // dcgm-exporter's label names and meanings: gpu (the index), UUID, modelName, Hostname. Not its
  // `device` ("nvidia0"): a label of that name meaning our index would mean two things in one
  // Prometheus.
  for (size_t i = 0; i < devices.size(); ++i) {
    out.push_back({{"gpu", std::to_string(i)},
                   {"UUID", devices[i].uuid},
                   {"modelName", devices[i].name},
                   {"Hostname", hostname}});
  }
  return out;
}
}  // namespace

Metrics::Metrics(const std::vector<DeviceInfo>& devices, const std::string& hostname)
    : registry_(std::make_shared<prometheus::Registry>()),
      scrape_(std::make_shared<ScrapeCollector>(AllDeviceLabels(devices, hostname))) {
  rpc_requests_ = &prometheus::BuildCounter()
                       .Name("transposed_rpc_requests_total")
                       .Help("gRPC calls finished, by service, method and status code")
                       .Register(*registry_);
  rpc_latency_ = &prometheus::BuildHistogram()
                      .Name("transposed_rpc_latency_seconds")
                      .Help("gRPC call wall time from its start until its status was sent")
                      .Register(*registry_);
  auto& hits = prometheus::BuildCounter()
                   .Name("transposed_cache_hits_total")
                   .Help("Lookups answered from the store, per device: GetConfig requests and "
                         "TuneMany's problems that were cached")
                   .Register(*registry_);
  auto& misses = prometheus::BuildCounter()
                     .Name("transposed_cache_misses_total")
                     .Help("Lookups not answered from the store, per device: GetConfig requests "
                           "(CACHE_ONLY misses included) and TuneMany's problems that were not "
                           "cached (forced tunes are not lookups)")
                     .Register(*registry_);
  auto& started = prometheus::BuildCounter()
                      .Name("transposed_tunes_started_total")
                      .Help("Tunes that began measuring, per device")
                      .Register(*registry_);
  auto& completed = prometheus::BuildCounter()
                        .Name("transposed_tunes_completed_total")
                        .Help("Tunes that ended with a winner (stored), per device")
                        .Register(*registry_);
  auto& failed = prometheus::BuildCounter()
                     .Name("transposed_tunes_failed_total")
                     .Help("Tunes that ended with an error or were cancelled, per device")
                     .Register(*registry_);
  auto& seconds = prometheus::BuildHistogram()
                      .Name("transposed_tune_seconds")
                      .Help("Wall time of tunes that began measuring, per device")
                      .Register(*registry_);
  auto& refused = prometheus::BuildCounter()
                      .Name("transposed_connections_refused_total")
                      .Help("Connections closed at accept because a cap was reached, by cap "
                            "(per_client: --max-connections-per-client, total: --max-connections, "
                            "descriptors: the descriptor guard)")
                      .Register(*registry_);
  connections_refused_per_client_ = &refused.Add({{"cap", "per_client"}});
  connections_refused_total_ = &refused.Add({{"cap", "total"}});
  connections_refused_descriptors_ = &refused.Add({{"cap", "descriptors"}});
  auto& entries_refused =
      prometheus::BuildCounter()
          .Name("transposed_entries_refused_total")
          .Help("Entries from outside refused by validation and never stored, by door (import: "
                "ImportEntries, seed: --seed, peer: a peer's answer)")
          .Register(*registry_);
  for (const char* door : {"import", "seed", "peer"})
    entries_refused_[door] = &entries_refused.Add({{"door", door}});
  for (const prometheus::Labels& labels : AllDeviceLabels(devices, hostname)) {
    devices_.push_back(PerDevice{&hits.Add(labels), &misses.Add(labels), &started.Add(labels),
                                 &completed.Add(labels), &failed.Add(labels),
                                 &seconds.Add(labels, TuneBuckets())});
  }
}

Metrics::~Metrics() { Stop(); }

void Metrics::Attach(const TransposeService* service, Store* store,
                     ConnectionLimiter* connections, bool entry_ratios) {
  scrape_->Attach(service, store, connections, entry_ratios);
}

void Metrics::AttachShared(const FleetFlight* shared) { scrape_->AttachShared(shared); }

void Metrics::AttachHealth(const DeviceHealth* health) { scrape_->AttachHealth(health); }

StatusOr<int> Metrics::Serve(const std::string& listen) {
  MutexLock l(&mu_);
  if (exposer_ != nullptr) return Status::FailedPrecondition("metrics: already serving");
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One thread is plenty for a scraper every few seconds.
    exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return Status::Unavailable("--metrics-listen=" + listen + ": cannot listen: " + e.what());
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty())
    return Status::Unavailable("--metrics-listen=" + listen + ": no listening port");
  exposer->RegisterCollectable(registry_);
  exposer->RegisterCollectable(scrape_);
  exposer_ = std::move(exposer);
  return ports.front();
}

void Metrics::Stop() {
  std::unique_ptr<prometheus::Exposer> exposer;
  {
    MutexLock l(&mu_);
    exposer.swap(exposer_);
  }
  exposer.reset();  // joins its threads, outside mu_
}

std::string Metrics::Text() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : scrape_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

const Metrics::PerDevice* Metrics::Device(int device) const {
  if (device < 0 || device >= static_cast<int>(devices_.size())) return nullptr;
  return &devices_[device];
}

void Metrics::OnCacheLookup(int device, bool hit) {
  if (const PerDevice* d = Device(device)) (hit ? d->cache_hits : d->cache_misses)->Increment();
}

void Metrics::OnTuneStarted(int device) {
  if (const PerDevice* d = Device(device)) d->tunes_started->Increment();
}

void Metrics::OnTuneFinished(int device, const Status& status, double seconds) {
  const PerDevice* d = Device(device);
  if (d == nullptr) return;
  (status.ok() ? d->tunes_completed : d->tunes_failed)->Increment();
  d->tune_seconds->Observe(seconds);
}

void Metrics::OnEntryRefused(const char* door) {
  auto it = entries_refused_.find(door);
  if (it != entries_refused_.end()) it->second->Increment();
}

void Metrics::OnConnectionRefused(const char* cap) {
  const std::string_view c(cap);
  (c == "total"         ? connections_refused_total_
   : c == "descriptors" ? connections_refused_descriptors_
                        : connections_refused_per_client_)
      ->Increment();
}

RpcRecorder::Series* Metrics::SeriesOf(const std::string& service, const std::string& method,
                                       grpc::StatusCode code) {
  MutexLock l(&mu_);
  auto key = std::make_tuple(service, method, std::string(GrpcCodeName(code)));
  auto it = rpcs_.find(key);
  if (it == rpcs_.end()) {
    if (static_cast<int>(rpcs_.size()) >= kMaxRpcSeries) std::get<1>(key) = "other";
    it = rpcs_.find(key);
  }
  if (it == rpcs_.end()) {
    prometheus::Counter* requests = &rpc_requests_->Add(
        {{"service", std::get<0>(key)}, {"method", std::get<1>(key)}, {"code", std::get<2>(key)}});
    prometheus::Histogram* latency = &rpc_latency_->Add(
        {{"service", std::get<0>(key)}, {"method", std::get<1>(key)}}, LatencyBuckets());
    it = rpcs_.emplace(std::piecewise_construct, std::forward_as_tuple(std::move(key)),
                       std::forward_as_tuple(requests, latency))
             .first;
  }
  return &it->second;
}

}  // namespace transposed
