// FleetFlight (fleet_flight.h): the options checked, the thread started and stopped, and the
// public methods, which queue a daemon's misses and writes for the thread and wake it. What the
// thread does with them: fleet_flight_thread.cc.
#include "server/fleet/fleet_flight.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "core/device_class.h"

namespace transposed {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

StatusOr<std::unique_ptr<FleetFlight>> FleetFlight::Create(FleetOptions options) {
  if (options.classes.empty()) return Status::InvalidArgument("shared store: no device class");
  if (!(options.lease_seconds >= 0.3) || options.lease_seconds > 3600)
    return Status::InvalidArgument("--shared-store-lease: must be in [0.3, 3600] seconds, got " +
                                   std::to_string(options.lease_seconds));
  if (!(options.store.timeout_seconds >= 0.001) || options.store.timeout_seconds > 10)
    return Status::InvalidArgument("--shared-store-timeout: must be in [0.001, 10] seconds, got " +
                                   std::to_string(options.store.timeout_seconds));
  for (const auto& [cls, budget] : options.lease_budget)
    if (budget < 1 || budget > 1024)
      return Status::InvalidArgument("shared store: the lease budget of class " + cls +
                                     " must be in [1, 1024], got " + std::to_string(budget));
  std::unique_ptr<FleetFlight> f(new FleetFlight(std::move(options)));
  if (f->wake_fd_ < 0) return Status::Internal("shared store: eventfd failed");
  f->thread_ = std::thread([p = f.get()] { p->Loop(); });
  return f;
}

FleetFlight::FleetFlight(FleetOptions options)
    : options_(std::move(options)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

FleetFlight::~FleetFlight() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void FleetFlight::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

bool FleetFlight::TakeInbox(std::vector<NewResolve>* resolves, std::vector<Write>* writes) {
  MutexLock l(&mu_);
  if (stop_) return false;
  resolves->swap(new_);
  writes->swap(writes_);
  return true;
}

void FleetFlight::Resolve(const DeviceInfo& device, const Problem& problem, SharedResolveFn done) {
  ResolveDeferred(device, problem, /*defer_seconds=*/0, std::move(done));  // 0: no deferral
}

void FleetFlight::ResolveDeferred(const DeviceInfo& device, const Problem& problem,
                                  double defer_seconds, SharedResolveFn done) {
  NewResolve r;
  r.device_class = ClassOf(device).key;
  r.library_version = device.library_version;
  r.keys = SharedKeysFor(r.library_version, r.device_class, problem);
  r.problem = problem;
  r.done = std::move(done);
  r.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(options_.store.timeout_seconds));
  r.defer_seconds = defer_seconds;
  {
    MutexLock l(&mu_);
    if (stop_) return;
    new_.push_back(std::move(r));
  }
  Wake();
}

void FleetFlight::SetOnWanted(WantedFn fn) {
  MutexLock l(&mu_);
  on_wanted_ = std::move(fn);
}

void FleetFlight::Publish(const TuneResult& result, const std::string& lease) {
  Write w;
  w.kind = Write::Kind::kPublish;
  w.keys = SharedKeysFor(result.device.library_version, ClassOf(result.device).key, result.problem);
  w.lease = lease;
  w.median = EncodeMedian(result.best_measurement.median_s);
  w.entry = EncodeSharedEntry(result);
  w.contended = !result.contention.empty();
  {
    MutexLock l(&mu_);
    if (stop_) return;
    writes_.push_back(std::move(w));
  }
  Wake();
}

void FleetFlight::Release(const DeviceInfo& device, const Problem& problem,
                          const std::string& lease) {
  if (lease.empty()) return;
  Write w;
  w.kind = Write::Kind::kRelease;
  w.keys = SharedKeysFor(device.library_version, ClassOf(device).key, problem);
  w.lease = lease;
  {
    MutexLock l(&mu_);
    if (stop_) return;
    writes_.push_back(std::move(w));
  }
  Wake();
}

void FleetFlight::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  Wake();
  MutexLock j(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

FleetCounters FleetFlight::counters() const {
  FleetCounters c;
  c.round_trips = counts_.round_trips.load();
  c.connects = counts_.link.connects.load();
  c.reconnects = counts_.link.reconnects.load();
  c.pings = counts_.link.pings.load();
  c.scripts_loaded = counts_.link.scripts_loaded.load();
  c.unknown = counts_.unknown.load();
  c.leases_retaken = counts_.leases_retaken.load();
  c.budget_waits = counts_.budget_waits.load();
  c.resolves = counts_.resolves.load();
  c.found = counts_.found.load();
  c.leases = counts_.leases.load();
  c.waits = counts_.waits.load();
  c.refused = counts_.refused.load();
  c.unavailable = counts_.unavailable.load();
  c.published_written = counts_.published_written.load();
  c.published_kept = counts_.published_kept.load();
  c.dropped = counts_.dropped.load();
  c.leases_lost = counts_.leases_lost.load();
  c.notifications = counts_.notifications.load();
  c.wants = counts_.wants.load();
  c.wanted = counts_.wanted.load();
  c.available = counts_.link.available.load();
  c.subscribed = counts_.link.subscribed.load();
  return c;
}

}  // namespace transposed
