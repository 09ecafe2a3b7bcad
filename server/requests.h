// The request and answer types of the daemon's tunes: what a caller asks (ConfigRequest,
// ForcedTuneRequest, the device it names), what it is answered (ConfigAnswer) and the callbacks
// that carry the answer. Shared by the service (server/service.h), the device tuners
// (server/device_tuner.h) and their jobs (server/tune_job.h), so that none of those includes
// another only for its types.
//
// Thread-safety: plain values.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/problem.h"
#include "core/status.h"
#include "tuner/backend.h"
#include "tuner/tuner.h"

namespace transposed {

// Selects one of the daemon's devices. Neither set: device 0.
struct DeviceRef {
  std::optional<int> index;
  std::optional<std::string> uuid;
};

struct ConfigRequest {
  Problem problem;
  DeviceRef device;
  // Instead of `device`: the first device of this daemon of that class (peers ask this way);
  // NOT_FOUND "device_class: ..." when there is none.
  std::string device_class;
  bool cache_only = false;
  // ANSWER_NOW: a miss answers at once with the nearest stored problem's winner or the heuristic
  // default (never waits for a tune) and queues the tune in the background.
  bool answer_now = false;
  // Of the tune a miss starts (a tune it joins keeps its own): budget (<= 0: the service's
  // default; at most kMaxTuneBudgetSeconds) and exhaustive measurement (TuneMany sets them).
  double budget_seconds = 0;
  bool exhaustive = false;
  // A cache hit is answered with ConfigAnswer::stored, the answer cache's own entry, instead of
  // a copy in `result` (the gRPC GetConfig, which keeps each hit's encoded answer).
  bool shared_hit = false;
  // The caller waits for the answer but not urgently (TuneMany from a job's prolog that asked
  // for background): the tune a miss starts is polite (server/polite.h) as an ANSWER_NOW one.
  bool background = false;
};

struct ForcedTuneRequest {
  Problem problem;
  DeviceRef device;
  double budget_seconds = 0;  // <= 0: the service's default
  bool exhaustive = false;
};

// The answer to GetConfig or Tune: the stored or freshly tuned result, where it came from, and the
// device it is for (result.device is the live device, with its index).
// result.device is the device answered for (this daemon's, with its index); measured_on is the
// instance the result was measured on: the same device, or another of its class (index -1 unless
// it is one of this daemon's).
struct ConfigAnswer {
  TuneResult result;
  AnswerSource source = AnswerSource::kCache;
  int device_index = 0;
  DeviceInfo measured_on;
  // A cache hit of a request with shared_hit: the stored entry (measured on stored->device),
  // shared with the answer cache and never changed; `result` and `measured_on` are then empty
  // but for measured_on.index (stored->device's index among this daemon's devices, else -1).
  // While the cache holds the entry, the same pointer is handed out, and a new one once the
  // store changed: a caller may keep what it derives from it keyed by the pointer (holding it).
  std::shared_ptr<const TuneResult> stored = nullptr;
  // kNearest: the stored problem whose winner this is. For kNearest and kHeuristic, `result`
  // holds the problem, device and chosen candidate only (nothing was measured for this problem).
  std::optional<Problem> nearest_problem = std::nullopt;
};

// A request's `progress` is the tuner's ProgressFn (tuner/tuner.h), called on the device's tune
// thread, in order, all before the answer.
// The answer to one request, called exactly once unless the request detached first.
using AnswerFn = std::function<void(StatusOr<ConfigAnswer>)>;
// Whether a request may wait for a tune (the gRPC layer's per-client cap on waiting calls,
// server/grpc/call_limiter.h): OK, or the status it is refused with. Asked only of a request about
// to join or queue a tune, never of a hit, a CACHE_ONLY miss or an ANSWER_NOW answer.
using AdmitFn = std::function<Status()>;

}  // namespace transposed
