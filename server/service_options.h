// ServiceOptions: how the daemon's service and its device tuners work (budgets, queue bound,
// peers, the shared store, polite tuning), with the hooks they call (ServiceObserver for the
// metrics, PeerLookupFn for the peers). Set by the daemon (server/daemon/daemon.cc) from its flags.
//
// Thread-safety: plain values; a ServiceObserver's methods are called from any thread.
#pragma once

#include <functional>
#include <optional>

#include "core/problem.h"
#include "core/status.h"
#include "server/device_health.h"
#include "server/polite.h"
#include "server/shared_flight.h"
#include "tuner/backend.h"
#include "tuner/tuner.h"

namespace transposed {

// Hooks for metrics: the service calls them as things happen, from the thread where they happen
// (request threads, device tune threads), never with a service lock held. Implementations must be
// thread-safe and quick.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  // A store lookup of GetConfig (CACHE_ONLY included); a miss that joins a tune counts once.
  virtual void OnCacheLookup(int device, bool hit) = 0;
  // A tune began measuring.
  virtual void OnTuneStarted(int device) = 0;
  // A tune that began measuring ended: OK (and stored), or failed/cancelled; its wall time.
  virtual void OnTuneFinished(int device, const Status& status, double seconds) = 0;
  // An entry from outside (door "import", "seed" or "peer") failed validation and was refused.
  virtual void OnEntryRefused(const char* door) { (void)door; }
};

// Asks peer daemons (server/fleet/peers.h) for a stored result of `problem` measured on a device of
// `device`'s class; nullopt when none has one. Called on a device's tune thread before a tune.
using PeerLookupFn =
    std::function<std::optional<TuneResult>(const DeviceInfo& device, const Problem& problem)>;

struct ServiceOptions {
  double tune_budget_seconds = 20.0;    // default budget of one tune (TuneOptions::budget_seconds)
  TuneOptions tune;                     // everything else about a tune
  ServiceObserver* observer = nullptr;  // optional; must outlive the service
  // Tunes waiting per device behind the running one; a new tune beyond this is refused with
  // RESOURCE_EXHAUSTED and a retry hint (joining a queued or running tune is always possible).
  int max_queued_tunes = 8;
  // Empty: no peers. A GetConfig miss (not cache-only, not a forced Tune) asks the peers first
  // and tunes only when none has the result; a peer's result is stored with origin kPeer.
  PeerLookupFn peer_lookup;
  // Null: no shared store. Otherwise a miss that would tune asks it first (server/shared_flight.h):
  // a shared result is stored (origin kShared) and answered (kShared); the class's lease tunes
  // here; another node's lease waits for its result without a device slot. Every tune's winner
  // is offered to it. Must outlive the service; Shutdown() stops it.
  SharedFlight* shared = nullptr;
  // The busy signal and how background tunes yield to other work on the device (polite.h).
  PoliteOptions polite;
  // Null: no health probe. Otherwise every tune's copy ceiling is judged against the class's
  // (device_health.h: a device far below, 3 tunes in a row, is flagged slow). Must outlive the
  // service.
  DeviceHealth* health = nullptr;
};

}  // namespace transposed
