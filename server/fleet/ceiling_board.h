// RedisCeilingBoard: the class's latest copy ceilings for the health probe
// (server/device_health.h), kept in the shared store (--shared-store), so that every device of
// a class, on every node, is compared with the fleet's median and not only with the GPUs of its
// own node.
//
// Layout (beside shared_store.h's; format 1): transposed:v1:health:<class>:<bucket>  hash
//   <device uuid> = "<GB/s>" (%.6g), the device's latest ceiling at sizes of 2^bucket bytes;
//   expires 7 days after its last write (devices gone from the fleet drop out with it).
// One round trip per tune (HSET, PEXPIRE, HGETALL pipelined) on a connection of its own, opened
// on first use and again after a failure, within --shared-store-timeout. What is read back is
// checked: a value that is not a finite positive number, or more than kMaxDevices fields, is
// left out (never a verdict from garbage). A failure is no verdict (the tune is unaffected).
//
// Thread-safety: safe to use from many threads (one mutex over the connection).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "server/device_health.h"
#include "server/fleet/shared_store.h"

namespace transposed {

class RedisCeilingBoard final : public CeilingBoard {
 public:
  static constexpr size_t kMaxDevices = 4096;
  explicit RedisCeilingBoard(SharedStoreOptions options) : options_(std::move(options)) {}

  StatusOr<std::vector<double>> Exchange(const std::string& device_class, int bucket,
                                         const std::string& uuid, double gbps) override
      EXCLUDES(mu_);

 private:
  const SharedStoreOptions options_;
  Mutex mu_;
  std::unique_ptr<RedisConnection> connection_ GUARDED_BY(mu_);
};

// The hash of a class's ceilings at a size bucket.
std::string CeilingBoardKey(const std::string& device_class, int bucket);

}  // namespace transposed
