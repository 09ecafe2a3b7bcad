// SharedFlight: what the service asks of a fleet-wide store of tuned results on a local miss
// (server/fleet/fleet_flight.h implements it over Redis; the service knows only this interface).
//
// On a miss that would tune, the service hands the problem to Resolve() instead of its device
// queue. The answer comes back later, on the implementation's thread, as one of:
//   kFound:       another node of the class already measured it: the result (validated: this
//                 class, this problem, this kernel library), to store locally and answer with;
//   kLeased:      this daemon holds the class-wide lease: tune it, then Publish() (or Release()
//                 when the tune fails) with the lease token;
//   kUnavailable: the shared store cannot answer (down, slow, misconfigured): tune locally as if
//                 there were no shared store (and Publish() the result without a lease).
// While another node of the class holds the lease, Resolve() answers nothing: it waits for that
// node's result (or for its lease to expire, then takes it over), without any thread per waiting
// request. Resolve() never blocks its caller; it may be called with the service's lock held.
// A device busy with other work (server/polite.h) asks with ResolveDeferred(): when the class
// has neither a result nor a lease holder, it asks the class for an idle node to tune the
// problem (the nodes hear it through SetOnWanted's callback, and an idle one resolves it, takes
// the lease and tunes), and waits for that result before it takes the lease itself.
//
// Thread-safety: every method may be called from any thread at once. `done` runs on the
// implementation's thread without any of its locks held.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/problem.h"
#include "core/tune_result.h"

namespace transposed {

struct SharedOutcome {
  enum class Kind { kFound, kLeased, kUnavailable };
  Kind kind = Kind::kUnavailable;
  std::optional<TuneResult> result;  // kFound: the shared winner (result.device: where measured)
  std::string lease;                 // kLeased: the token to Publish() or Release() with
  std::string reason;                // kUnavailable: why, for the log
};

using SharedResolveFn = std::function<void(SharedOutcome)>;

class SharedFlight {
 public:
  virtual ~SharedFlight() = default;
  // Finds the shared result of `problem` for `device`'s class, or the lease to tune it.
  // `done` is called exactly once, unless Stop() comes first.
  virtual void Resolve(const DeviceInfo& device, const Problem& problem, SharedResolveFn done) = 0;
  // As Resolve, for a busy device: asks the class's idle nodes first and waits up to
  // `defer_seconds` for their result before taking the lease. The default: Resolve.
  virtual void ResolveDeferred(const DeviceInfo& device, const Problem& problem,
                               double defer_seconds, SharedResolveFn done) {
    (void)defer_seconds;
    Resolve(device, problem, std::move(done));
  }
  // Whom to tell (on the implementation's thread, no lock held; quick) when a node of
  // `device_class` asks for an idle node to tune `problem`. Set once, before any Resolve.
  using WantedFn = std::function<void(const std::string& device_class, const Problem& problem)>;
  virtual void SetOnWanted(WantedFn fn) { (void)fn; }
  // Offers a tuned winner (result.device: the instance that measured it) to the class: stored
  // only when faster than the stored one (never a downgrade); the lease, if this daemon holds
  // it, is released and the class's waiting nodes are told. Asynchronous; never blocks.
  virtual void Publish(const TuneResult& result, const std::string& lease) = 0;
  // Gives the lease up after a failed tune (another node of the class may take it over).
  virtual void Release(const DeviceInfo& device, const Problem& problem,
                       const std::string& lease) = 0;
  // Ends the implementation's thread; pending `done` callbacks are dropped. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace transposed
