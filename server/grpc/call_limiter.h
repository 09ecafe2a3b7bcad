// CallLimiter: caps the long calls (GetConfig, Tune: they may wait for a tune) that are open at
// once, per client and in total, so that one client cannot fill the daemon with waiting calls.
//
// A client is its peer address without the port ("ipv4:10.0.0.7", "ipv6:[::1]", "unix:/path"),
// so all connections from one host share its allowance. A call beyond a cap is refused at once
// with RESOURCE_EXHAUSTED naming the cap and its flag; short calls (lookups of the cache, lists)
// are not counted. Connections themselves are capped per client and in total by
// ConnectionLimiter (server/grpc/connection_limiter.h), idle connections are closed after
// --connection-idle-timeout, and concurrent streams per connection by
// --max-streams-per-connection.
//
// Thread-safety: Acquire and Slot destruction may run on any thread; the limiter must outlive
// every Slot.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"

namespace transposed {

class CallLimiter {
 public:
  // 0: no cap.
  CallLimiter(int per_client, int total) : per_client_(per_client), total_(total) {}
  CallLimiter(const CallLimiter&) = delete;
  CallLimiter& operator=(const CallLimiter&) = delete;

  // One admitted call; gives its place back when destroyed (or Release()d).
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& o) noexcept : owner_(o.owner_), client_(std::move(o.client_)) { o.owner_ = nullptr; }
    Slot& operator=(Slot&& o) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class CallLimiter;
    Slot(CallLimiter* owner, std::string client) : owner_(owner), client_(std::move(client)) {}
    CallLimiter* owner_ = nullptr;
    std::string client_;
  };

  // A place for a call from `peer` (ServerContext::peer()), or RESOURCE_EXHAUSTED.
  StatusOr<Slot> Acquire(std::string_view peer) EXCLUDES(mu_);

  // Calls open now, from one client (as Acquire names it) and in total.
  int open(std::string_view peer) const EXCLUDES(mu_);
  int open_total() const EXCLUDES(mu_);

  // "ipv4:10.0.0.7:5000" -> "ipv4:10.0.0.7"; "ipv6:[::1]:5000" -> "ipv6:[::1]"; others as they are.
  static std::string ClientOf(std::string_view peer);

 private:
  void Give(const std::string& client) EXCLUDES(mu_);

  const int per_client_;
  const int total_;
  mutable Mutex mu_;
  std::map<std::string, int, std::less<>> open_ GUARDED_BY(mu_);
  int open_total_ GUARDED_BY(mu_) = 0;
};

}  // namespace transposed
