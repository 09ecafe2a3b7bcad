#include "server/device_health.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace transposed {

StatusOr<std::vector<double>> LocalCeilingBoard::Exchange(const std::string& device_class,
                                                          int bucket, const std::string& uuid,
                                                          double gbps) {
  MutexLock l(&mu_);
  auto& devices = latest_[{device_class, bucket}];
  devices[uuid] = gbps;
  std::vector<double> others;
  for (const auto& [id, g] : devices)
    if (id != uuid) others.push_back(g);
  return others;
}

int SizeBucket(int64_t bytes) {
  int b = 0;
  while (bytes > 1) {
    bytes >>= 1;
    ++b;
  }
  return b;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

DeviceHealth::DeviceHealth(int devices, HealthOptions options, CeilingBoard* board,
                           ChangeFn on_change)
    : options_(options),
      board_(board),
      on_change_(std::move(on_change)),
      status_(static_cast<size_t>(std::max(devices, 0))) {}

DeviceHealthStatus DeviceHealth::Observe(int index, const std::string& device_class,
                                         const std::string& uuid, int64_t bytes,
                                         double ceiling_gbps, bool contended) {
  if (index < 0 || contended || bytes < options_.min_bytes || !(ceiling_gbps > 0) ||
      !std::isfinite(ceiling_gbps))
    return Get(index);
  const int bucket = SizeBucket(bytes);
  StatusOr<std::vector<double>> others = board_->Exchange(device_class, bucket, uuid, ceiling_gbps);
  if (!others.ok() || others->empty()) return Get(index);
  const double median = Median(*others);
  if (!(median > 0)) return Get(index);
  const double ratio = ceiling_gbps / median;
  const bool below = ratio < 1 - options_.margin;

  DeviceHealthStatus after;
  bool changed = false, any = false;
  {
    MutexLock l(&mu_);
    if (static_cast<size_t>(index) >= status_.size()) return DeviceHealthStatus{};
    DeviceHealthStatus& s = status_[static_cast<size_t>(index)];
    const bool was_slow = s.slow;
    Update(s, ceiling_gbps, median, ratio, bucket, below, others->size());
    changed = s.slow != was_slow;
    after = s;
    for (const auto& t : status_) any = any || t.slow;
  }
  if (changed) {
    if (after.slow)
      spdlog::warn("device {} flagged SLOW: {}", index, after.reason);
    else
      spdlog::info("device {} no longer slow: {}", index, after.reason);
    if (on_change_) on_change_(index, after, any);
  }
  return after;
}

void DeviceHealth::Update(DeviceHealthStatus& s, double ceiling_gbps, double median, double ratio,
                          int bucket, bool below, size_t others) const {
  ++s.verdicts;
  s.ratio = ratio;
  s.class_devices = static_cast<int>(others);
  if (below) {
    ++s.below_in_a_row;
    s.within_in_a_row = 0;
  } else {
    ++s.within_in_a_row;
    s.below_in_a_row = 0;
  }
  if (!s.slow && s.below_in_a_row >= options_.confirm) s.slow = true;
  if (s.slow && s.within_in_a_row >= options_.confirm) s.slow = false;
  char text[320];
  std::snprintf(text, sizeof(text),
                "copy ceiling %.1f GB/s is %.0f%% %s the median %.1f GB/s of %d other device%s of "
                "its class at %lld-%lld MiB; %d verdict%s in a row %s the %.0f%% margin",
                ceiling_gbps, std::fabs(1 - ratio) * 100, ratio < 1 ? "below" : "above", median,
                s.class_devices, s.class_devices == 1 ? "" : "s",
                static_cast<long long>((int64_t{1} << bucket) >> 20),
                static_cast<long long>((int64_t{2} << bucket) >> 20),
                below ? s.below_in_a_row : s.within_in_a_row,
                (below ? s.below_in_a_row : s.within_in_a_row) == 1 ? "" : "s",
                below ? "below" : "within", options_.margin * 100);
  s.reason = text;
}

DeviceHealthStatus DeviceHealth::Get(int index) const {
  MutexLock l(&mu_);
  if (index < 0 || static_cast<size_t>(index) >= status_.size()) return DeviceHealthStatus{};
  return status_[static_cast<size_t>(index)];
}

std::vector<DeviceHealthStatus> DeviceHealth::All() const {
  MutexLock l(&mu_);
  return status_;
}

}  // namespace transposed
