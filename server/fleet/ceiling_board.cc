#include "server/fleet/ceiling_board.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace transposed {
namespace {

constexpr char kExpiryMs[] = "604800000";  // 7 days

// A stored ceiling back, or 0 when it is not a finite positive number.
double ParseGbps(const std::string& s) {
  if (s.empty() || s.size() > 32) return 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || !(v > 0)) return 0;
  return v;
}

}  // namespace

std::string CeilingBoardKey(const std::string& device_class, int bucket) {
  return "transposed:v" + std::to_string(kSharedFormat) + ":health:" + device_class + ":" +
         std::to_string(bucket);
}

StatusOr<std::vector<double>> RedisCeilingBoard::Exchange(const std::string& device_class,
                                                          int bucket, const std::string& uuid,
                                                          double gbps) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options_.timeout_seconds));
  const std::string key = CeilingBoardKey(device_class, bucket);
  char value[32];
  std::snprintf(value, sizeof(value), "%.6g", gbps);
  MutexLock l(&mu_);
  if (connection_ == nullptr) {
    auto c = RedisConnection::Connect(options_, deadline);
    if (!c.ok()) return c.status();
    connection_ = std::move(c).value();
  }
  auto replies = connection_->Pipeline(
      {{"HSET", key, uuid, value}, {"PEXPIRE", key, kExpiryMs}, {"HGETALL", key}}, deadline);
  if (!replies.ok()) {
    connection_.reset();  // broken: a new one next time
    return replies.status();
  }
  if (replies->size() != 3 || (*replies)[2].type != RedisValue::Type::kArray)
    return Status::Unavailable("health board: unexpected reply to HGETALL " + key);
  const auto& fields = (*replies)[2].elements;
  std::vector<double> others;
  for (size_t i = 0; i + 1 < fields.size() && others.size() < kMaxDevices; i += 2) {
    if (fields[i].str == uuid) continue;
    const double g = ParseGbps(fields[i + 1].str);
    if (g > 0) others.push_back(g);
  }
  return others;
}

}  // namespace transposed
