// FleetFlight: one tune per device class across a fleet, over a shared Redis store
// (--shared-store; the Redis side is server/fleet/shared_store.h). Implements SharedFlight
// (server/shared_flight.h) for the service.
//
// One thread per daemon does all the Redis work, so no request thread ever waits on Redis:
//   Resolve(): one round trip, a Lua fetch-or-lease. Found -> kFound (validated; a refused value
//     is counted, never served, and the lease taken past it). The lease free -> SET NX PX with a
//     fresh token -> kLeased: this daemon tunes, and the thread renews the lease every third of
//     its life until Publish() or Release(). Another node holds it -> the request waits here,
//     holding no thread: the thread is subscribed to its classes' channels and re-asks (one
//     round trip) when the holder publishes or gives up, or when the lease would have expired
//     (the holder died: the first to re-ask takes the lease over). So a node that waits costs 2
//     round trips per miss, the holder 2 plus one per renewal, a late node 1.
//   Lease budget: a node takes at most `lease_budget` leases of a class at once (default: one per
//     device of the class). A miss that finds the lease free while this node holds its budget
//     does not take it: it asks the class (a `want`, published once per problem whatever the
//     number of nodes asking) and waits like a node whose class-mate holds the lease; when one of
//     this node's leases ends it takes one of those it left (chosen at random, so nodes that ask
//     the same list spread over it). So a job's shape list asked by every node is tuned one
//     problem per node at a time, and one node's list is picked up by the class's idle nodes
//     (the service decides which node is idle: SetOnWanted).
//   Publish(): a Lua compare-and-set on the winner's median: written only when faster than the
//     stored one (a node whose lease expired mid-tune cannot overwrite a faster result); then the
//     lease is dropped (if still its own) and, only if either happened, the class told.
// Why pub/sub and not polling: polling at a bounded rate costs round trips in proportion to the
// tune time (a 20 s tune polled every 100 ms is 200 round trips per node); a subscription costs
// one connection per daemon and one message per published problem. Keyspace notifications would
// need the server's notify-keyspace-events setting; BLPOP would need the holder to know how many
// nodes wait. Messages lost while the subscription reconnects are covered by the re-ask at lease
// expiry (and every re-subscription re-asks everything waiting).
//
// Never a single point of failure, and healing by itself (the connections' life: store_link.h):
// connect and every round trip have a deadline of `timeout_seconds` (a new miss waits at most that
// long for its first answer); a connection the server closed is noticed at once even while idle,
// a silent one by a PING after 5 s; a lost connection is made again at once, and if that fails
// the store is down: every miss (waiting ones too) is answered kUnavailable at once (the service
// tunes locally) while reconnects are tried with exponential backoff and jitter. Across a
// reconnect the leases held are kept (renewed, or taken again if a restarted Redis lost them) and
// the writes queued (publishes and releases: sent when it is back; one whose round trip failed
// is counted `unknown` and sent again, which is harmless: both are idempotent). The lease is short
// (3 s, renewed every second) so that a holder that died costs its class at most that. Going down
// and coming back are logged (down: a warning, repeated at most once a minute), counted, and
// reported to `on_availability` (the health status).
//
// Thread-safety: every public method may be called from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "server/fleet/shared_store.h"
#include "server/fleet/store_link.h"
#include "server/shared_flight.h"

namespace transposed {

struct FleetOptions {
  SharedStoreOptions store;
  // The lease's life; renewed every third of it while tuning. Short, so that a holder that died
  // (kill -9, a lost node) keeps its class waiting at most this long.
  double lease_seconds = 3;
  // Leases of a class this node holds at once (device class key -> count; a class not named: 1).
  // The daemon gives its number of devices of the class.
  std::map<std::string, int> lease_budget;
  // The (kernel library version, device class key) pairs of this daemon's devices: their
  // channels are subscribed to.
  std::vector<std::pair<std::string, std::string>> classes;
  std::string owner;  // names this daemon in lease tokens (host, pid, instance)
  // Called on the flight's thread when the store becomes available or unavailable (the first
  // successful connection included), with the reason when unavailable. Must be quick.
  std::function<void(bool available, const std::string& reason)> on_availability;
};

// Monotonic counts, for metrics and the logs.
struct FleetCounters {
  int64_t round_trips = 0;        // command round trips (pipelined commands count once)
  int64_t connects = 0;           // connection attempts (commands and subscription)
  int64_t resolves = 0;           // misses handed to Resolve()
  int64_t found = 0;              // answered with a shared result
  int64_t leases = 0;             // leases taken (this daemon tuned for the class)
  int64_t waits = 0;              // misses that waited for another node's tune
  int64_t refused = 0;            // stored values refused (format, garbage, class, problem)
  int64_t unavailable = 0;        // misses answered kUnavailable (tuned locally)
  int64_t published_written = 0;  // winners written (faster than the stored one, or first)
  int64_t published_kept = 0;     // winners not written: the stored one was as fast or faster
  int64_t dropped = 0;            // publishes and releases given up (never carried out)
  int64_t unknown = 0;            // writes whose round trip failed: maybe carried out; sent again
  int64_t leases_lost = 0;        // leases another node took while this daemon held them
  int64_t leases_retaken = 0;     // leases gone from Redis (restarted, expired) and taken again
  int64_t budget_waits = 0;       // misses that left a free lease to the class (lease budget)
  int64_t reconnects = 0;         // command connections made again after a loss
  int64_t pings = 0;              // PINGs of idle connections
  int64_t scripts_loaded = 0;     // SCRIPT LOAD and NOSCRIPT-fallback EVAL commands
  int64_t notifications = 0;      // messages received on the subscription
  int64_t wants = 0;              // busy-device misses that asked the class's idle nodes first
  int64_t wanted = 0;             // such asks heard from the class (this node's included)
  bool available = false;
  bool subscribed = false;  // the subscription to the classes' channels is up
};

class FleetFlight final : public SharedFlight {
 public:
  // Starts the thread, which connects at once (in the background). INVALID_ARGUMENT for bad
  // options (no class, a lease shorter than 0.3 s, a timeout outside [0.001, 10] s, a lease
  // budget below 1).
  static StatusOr<std::unique_ptr<FleetFlight>> Create(FleetOptions options);
  ~FleetFlight() override;  // Stop()

  void Resolve(const DeviceInfo& device, const Problem& problem, SharedResolveFn done) override
      EXCLUDES(mu_);
  void ResolveDeferred(const DeviceInfo& device, const Problem& problem, double defer_seconds,
                       SharedResolveFn done) override EXCLUDES(mu_);
  void SetOnWanted(WantedFn fn) override EXCLUDES(mu_);
  void Publish(const TuneResult& result, const std::string& lease) override EXCLUDES(mu_);
  void Release(const DeviceInfo& device, const Problem& problem, const std::string& lease) override
      EXCLUDES(mu_);
  void Stop() override EXCLUDES(mu_);

  FleetCounters counters() const;

 private:
  struct NewResolve {
    SharedKeys keys;
    std::string device_class;
    std::string library_version;
    Problem problem;
    SharedResolveFn done;
    Deadline deadline;  // of its first answer
    double defer_seconds = 0;  // ResolveDeferred: ask the class's idle nodes first
  };
  struct Write {
    enum class Kind { kPublish, kRelease } kind;
    SharedKeys keys;
    std::string lease;
    std::string median;  // kPublish
    std::string entry;   // kPublish
    bool contended = false;  // kPublish: measured under contention (never replaces an idle one)
  };
  class ThreadState;  // the thread's own state (no lock: only the thread touches it)

  explicit FleetFlight(FleetOptions options);
  void Loop();
  // Takes what Resolve/Publish/Release queued; false once stopping.
  bool TakeInbox(std::vector<NewResolve>* resolves, std::vector<Write>* writes) EXCLUDES(mu_);
  void Wake();

  const FleetOptions options_;
  int wake_fd_ = -1;  // eventfd: new work or Stop()

  Mutex mu_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<NewResolve> new_ GUARDED_BY(mu_);
  std::vector<Write> writes_ GUARDED_BY(mu_);
  WantedFn on_wanted_ GUARDED_BY(mu_);

  // Counters (written by the thread, read by anyone).
  struct Atomics {
    std::atomic<int64_t> round_trips{0}, resolves{0}, found{0}, leases{0}, waits{0}, refused{0},
        unavailable{0}, published_written{0}, published_kept{0}, dropped{0}, unknown{0},
        leases_lost{0}, leases_retaken{0}, budget_waits{0}, notifications{0}, wants{0}, wanted{0};
    StoreLink::Counters link;  // connects, reconnects, pings, scripts, available
  };
  mutable Atomics counts_;

  Mutex join_mu_;
  std::thread thread_;
};

}  // namespace transposed
