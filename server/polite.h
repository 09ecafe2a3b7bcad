// Polite tuning (issue 26): the daemon tunes on the GPU its users' jobs run on, so a tune that
// nobody waits for must not make a job's GPU the straggler.
//
// LoadBoard holds the one busy signal per device (core/device_load.h): each device's tune thread
// samples its backend (the worker asks NVML) while it has nothing to run, faster while a
// background tune waits for an idle window or throttles, and before each tune; the tunes' own
// evidence of contention is added (spreads, a slowed final pass, and a copy ceiling that fell far
// below the device's idle ceiling at that size: LoadBoard keeps those idle ceilings,
// core/idle_ceilings.h, recalled from the store at start); ListDevices, the metrics and the log
// read it. A
// sample with a utilization at or above PoliteOptions::busy_utilization_percent while another
// process holds the device is busy; without a source, a tune's evidence of contention in the last
// evidence_seconds stands for it (GPU backends only: the CPU backend's host is shared by design, so
// its tunes are neither marked nor made polite by their own spreads).
//
// The policy (applied by each device's DeviceTuner, server/device_tuner.h): a background tune
// (an ANSWER_NOW miss's, a TuneMany that asked for `background`, a re-measurement) on a busy
// device either waits for an idle window (duty_cycle 0) or runs through PoliteBackend, which
// caps the share of the device's time its measurements take at duty_cycle while the device stays
// busy; either way it is abandoned, with the reason, once max_wait_seconds pass without an idle
// window. A tune a caller waits for runs at once; when the device was busy, or the tune's own
// measurements show contention, its result is marked (TuneResult::contention), never replaces a
// winner measured on an idle device, and is measured again once the device is idle.
// With a shared store (server/shared_flight.h), a miss on a busy device first asks the class's
// idle nodes: one whose device is idle, with no tune a caller waits for and room in its queue,
// takes the class-wide lease and tunes it there, and the busy node gets the result
// (fleet_defer_seconds).
//
// Thread-safety: LoadBoard's methods may be called from any thread. A PoliteBackend is used by
// one tune on its device's tune thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device_load.h"
#include "core/idle_ceilings.h"
#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "tuner/backend.h"

namespace transposed {

struct PoliteOptions {
  // A device is busy while its utilization is at least this (and another process holds it).
  double busy_utilization_percent = 20;
  // The share of the device's time a background tune may take while the device is busy (0 < x
  // <= 1); 0: it waits for an idle window instead.
  double duty_cycle = 0.05;
  // A background tune that finds no idle window within this long (waiting, or throttled) is
  // abandoned with the reason.
  double max_wait_seconds = 600;
  // How often a tune thread samples its device while it idles (and a tune running at full
  // speed checks whether a job came).
  double sample_interval_seconds = 2;
  // How often it samples while a background tune waits for an idle window or throttles, and
  // while a busy sample right after the daemon's own work settles (at most sample_interval_
  // seconds): the deferred tunes start this soon after the job goes idle. Each sample is one
  // request to the device's worker (an NVML query, no GPU work).
  double window_sample_interval_seconds = 0.2;
  // The driver's utilization counts the daemon's own kernels for a while after they ran (on an
  // H200 a sample right after a tune read 96-98%, one 2 s later 0%): a busy sample taken less
  // than this long after the daemon's own work on the device is taken again once it has passed.
  double settle_seconds = 1;
  // Without a load source, a tune's evidence of contention counts as busy for this long.
  double evidence_seconds = 60;
  // A tune whose copy ceiling falls more than this share below the device's idle ceiling at its
  // size (IdleCeilings) is evidence of contention (0: the ceiling is not judged).
  double ceiling_drop = 0.5;
  // Re-measure results marked as measured under contention once the device is idle...
  bool remeasure_contended = true;
  // ...for this long without a busy sample (sampled at the window interval meanwhile): a job
  // that runs in bursts reads idle between them, and a re-measure started there runs beside
  // its next burst, marked again, and costs the job its share (0: the first idle sample).
  double remeasure_idle_seconds = 5;
  // With a shared store: a miss on a busy device first asks the class's idle nodes to tune it,
  // and waits this long for their result before taking the class-wide lease itself (0: never).
  double fleet_defer_seconds = 10;
};

// INVALID_ARGUMENT naming the flag for an option out of range.
Status CheckPoliteOptions(const PoliteOptions& o);
// How often a device is sampled while a background tune waits or throttles: the window
// interval, never slower than the idle one.
double WindowInterval(const PoliteOptions& o);

class LoadBoard {
 public:
  LoadBoard(size_t devices, PoliteOptions options);

  // Samples device `d` through `backend` (a request to its worker), records the result and logs
  // a change of state. Returns the device's signal after the sample. A busy sample less than
  // settle_seconds after the daemon's own work is taken again every window_sample_interval_seconds
  // until it reads idle or that time has passed (settle = false: it is recorded as it is).
  DeviceLoad Sample(int d, Backend& backend, bool settle = true) EXCLUDES(mu_);
  // The daemon's own work on device `d` (a tune, a measurement) just ended: see settle_seconds.
  void MarkOwnWork(int d) EXCLUDES(mu_);
  // A tune of device `d` ended with this evidence of contention (empty: none), its copy ceiling
  // and the idle ceiling it was judged against (GB/s; 0: not known).
  void RecordTune(int d, const std::string& contention, double ceiling_gbps = 0,
                  double idle_ceiling_gbps = 0) EXCLUDES(mu_);
  // An idle ceiling of device `d` (a tune on the idle device, or one stored before a restart).
  void AddIdleCeiling(int d, int64_t bytes, double gbps) EXCLUDES(mu_);
  // Device `d`'s idle ceiling at a copy of `bytes` (IdleCeilings::ReferenceFor; 0: not known).
  double IdleCeilingFor(int d, int64_t bytes) const EXCLUDES(mu_);
  // A background tune of device `d` began (+1) or stopped (-1) waiting or throttling.
  void AddWaiting(int d, int delta) EXCLUDES(mu_);
  // A background tune of device `d` was abandoned (logged, counted, kept as the last one).
  void RecordAbandoned(int d, const std::string& problem, const std::string& reason)
      EXCLUDES(mu_);

  DeviceLoad Get(int d) const EXCLUDES(mu_);
  std::vector<DeviceLoad> All() const EXCLUDES(mu_);
  const PoliteOptions& options() const { return options_; }

 private:
  // The state of a record: its sample's, else the tune evidence's while it is recent.
  LoadState StateOf(const DeviceLoad& l, int64_t now_ms) const;

  const PoliteOptions options_;
  mutable Mutex mu_;
  std::vector<DeviceLoad> loads_ GUARDED_BY(mu_);
  std::vector<std::chrono::steady_clock::time_point> own_work_ GUARDED_BY(mu_);
  std::vector<IdleCeilings> idle_ceilings_ GUARDED_BY(mu_);
};

// A Backend that runs a background tune's device calls politely: after each call, while the
// device is busy, it sleeps so that the calls take at most duty_cycle of the time, sampling the
// device every window_sample_interval_seconds as it sleeps: an idle sample ends the sleep and the
// throttling (a busy one, maybe its own call still in the driver's window, keeps it throttled,
// as it was). At full speed it samples every sample_interval_seconds (settling, as LoadBoard::
// Sample does) and throttles again when the device is busy. Once `waited_for()` turns true (a
// caller joined the tune) it runs at full speed. When max_wait_seconds pass from `since` with the
// device still busy, it gives up: it sets *cancel (the tuner then stops with CANCELLED) and
// abandoned() says why.
class PoliteBackend : public Backend {
 public:
  PoliteBackend(Backend* inner, LoadBoard* board, int device,
                std::chrono::steady_clock::time_point since, std::atomic<bool>* cancel,
                std::function<bool()> waited_for);
  ~PoliteBackend() override;

  const DeviceInfo& device() const override { return inner_->device(); }
  std::vector<Candidate> Candidates(const Problem& p) const override {
    return inner_->Candidates(p);
  }
  StatusOr<std::unique_ptr<Session>> Open(const Problem& p) override;
  LoadSample SampleLoad() override { return inner_->SampleLoad(); }

  // Why it gave up (empty: it did not); whether it ever slowed down for a busy device; the
  // time it slept.
  std::string abandoned() const { return abandoned_; }
  bool throttled() const { return throttled_; }
  double slept_seconds() const { return slept_s_; }

 private:
  class PoliteSession;
  // After a device call that took `call_s`: sample when due, then sleep or give up.
  void After(double call_s);
  // Samples the device (settling as LoadBoard::Sample does, or not) into state_ / last_load_.
  void Resample(bool settle);

  Backend* const inner_;
  LoadBoard* const board_;
  const int device_;
  const std::chrono::steady_clock::time_point since_;
  std::atomic<bool>* const cancel_;
  const std::function<bool()> waited_for_;
  std::chrono::steady_clock::time_point last_sample_;
  LoadState state_ = LoadState::kBusy;  // as when it was chosen; re-sampled on the first call
  std::string last_load_;
  std::string abandoned_;
  bool throttled_ = false;
  double slept_s_ = 0;
};

}  // namespace transposed
