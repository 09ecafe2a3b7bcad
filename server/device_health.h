// DeviceHealth: the tuner as a health probe. Every tune measures its device's copy ceiling at
// the problem's size; a device of a class whose ceiling stays more than 10% below the median of
// the other devices of its class (at sizes of the same power of two), in 3 tunes in a row, is
// flagged slow (a GPU that passes its diagnostics while running slow: NVIDIA/DCGM#122), and
// cleared after 3 tunes in a row within the margin.
//
// The class's figures are a CeilingBoard: each device's latest ceiling per (class, size bucket).
// LocalCeilingBoard holds those of this daemon's devices (a multi-GPU node compares its GPUs);
// the fleet's (every node of the class) is the shared store's (server/fleet/).
// Not observations: tunes measured under contention (a busy device is not a slow one), ceilings
// of problems below HealthOptions::min_bytes (launch-bound, noisy), and tunes without a valid
// ceiling. Without another device of the class at the size there is no verdict (the streak
// stays as it was).
// Only the copy ceiling is compared across devices: the class shares its winners, so two devices
// of a class never measure the same problem's winner (a winner's bandwidth depends on the shape).
//
// What an operator sees (docs/user/deploy.md, "Slow devices"): the metric
// transposed_device_slow (and transposed_device_class_ceiling_ratio), the health service
// `transposed.devices` (NOT_SERVING while any device is flagged), `transposectl devices`
// (health and reason per device), a warning log line with the reason.
//
// Thread-safety: DeviceHealth and LocalCeilingBoard are safe to use from many threads (one
// mutex each; a CeilingBoard is called outside DeviceHealth's lock).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"

namespace transposed {

struct HealthOptions {
  double margin = 0.10;          // flagged below (1 - margin) x the class median
  int confirm = 3;               // tunes in a row below (to flag) or within (to clear)
  int64_t min_bytes = 16 << 20;  // smaller problems are no observation
};

struct DeviceHealthStatus {
  bool slow = false;
  // Why it is flagged (or, not flagged, the latest verdict); empty before the first verdict.
  std::string reason;
  double ratio = 0;         // the latest ceiling over the class median (0: no verdict yet)
  int below_in_a_row = 0;   // verdicts below the margin in a row
  int within_in_a_row = 0;  // verdicts within the margin in a row
  int verdicts = 0;         // observations compared with the class
  int class_devices = 0;    // other devices of the class in the latest verdict
};

// The class's latest ceilings. Exchange records `uuid`'s ceiling (GB/s) for (class, bucket) and
// returns the latest of every other device there.
class CeilingBoard {
 public:
  virtual ~CeilingBoard() = default;
  virtual StatusOr<std::vector<double>> Exchange(const std::string& device_class, int bucket,
                                                 const std::string& uuid, double gbps) = 0;
};

class LocalCeilingBoard final : public CeilingBoard {
 public:
  StatusOr<std::vector<double>> Exchange(const std::string& device_class, int bucket,
                                         const std::string& uuid, double gbps) override
      EXCLUDES(mu_);

 private:
  Mutex mu_;
  // (class, bucket) -> uuid -> latest GB/s
  std::map<std::pair<std::string, int>, std::map<std::string, double>> latest_ GUARDED_BY(mu_);
};

// floor(log2(bytes)): ceilings are compared between sizes of the same power of two.
int SizeBucket(int64_t bytes);
// The median of `v` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> v);

class DeviceHealth {
 public:
  // Called (without DeviceHealth's lock) when a device becomes slow or stops being slow; `any`:
  // whether any device of the daemon is slow after the change.
  using ChangeFn = std::function<void(int index, const DeviceHealthStatus& status, bool any)>;

  // `board` must outlive this object; devices are this daemon's indexes 0..devices-1. `on_change`
  // may be empty. The flag's changes are logged (warning: "device N flagged SLOW: <reason>").
  DeviceHealth(int devices, HealthOptions options, CeilingBoard* board, ChangeFn on_change = {});

  // A tune of `bytes` on device `index` (of class `device_class`, instance `uuid`) measured its
  // copy ceiling at `ceiling_gbps`; `contended`: it was measured under contention. Returns the
  // device's status after it (unchanged when it is no observation).
  DeviceHealthStatus Observe(int index, const std::string& device_class, const std::string& uuid,
                             int64_t bytes, double ceiling_gbps, bool contended) EXCLUDES(mu_);
  DeviceHealthStatus Get(int index) const EXCLUDES(mu_);
  std::vector<DeviceHealthStatus> All() const EXCLUDES(mu_);
  const HealthOptions& options() const { return options_; }

 private:
  // One verdict into `s` (the flag, the streaks, the reason).
  void Update(DeviceHealthStatus& s, double ceiling_gbps, double median, double ratio, int bucket,
              bool below, size_t others) const;

  const HealthOptions options_;
  CeilingBoard* const board_;
  const ChangeFn on_change_;
  mutable Mutex mu_;
  std::vector<DeviceHealthStatus> status_ GUARDED_BY(mu_);
};

}  // namespace transposed
