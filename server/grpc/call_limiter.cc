#include "server/grpc/call_limiter.h"

namespace transposed {

CallLimiter::Slot& CallLimiter::Slot::operator=(Slot&& o) noexcept {
  if (this != &o) {
    Release();
    owner_ = o.owner_;
    client_ = std::move(o.client_);
    o.owner_ = nullptr;
  }
  return *this;
}

void CallLimiter::Slot::Release() {
  if (owner_ == nullptr) return;
  owner_->Give(client_);
  owner_ = nullptr;
}

std::string CallLimiter::ClientOf(std::string_view peer) {
  if (peer.rfind("ipv4:", 0) == 0) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) return std::string(peer.substr(0, colon));
  } else if (peer.rfind("ipv6:[", 0) == 0) {
    const size_t end = peer.rfind("]:");
    if (end != std::string_view::npos) return std::string(peer.substr(0, end + 1));
  }
  return std::string(peer);
}

StatusOr<CallLimiter::Slot> CallLimiter::Acquire(std::string_view peer) {
  std::string client = ClientOf(peer);
  MutexLock lock(&mu_);
  if (total_ > 0 && open_total_ >= total_) {
    return Status::ResourceExhausted(
        "the daemon has " + std::to_string(open_total_) +
        " calls waiting for tunes (at most " + std::to_string(total_) +
        ", --max-calls); retry later, or ask with policy CACHE_ONLY");
  }
  auto it = open_.find(client);
  const int mine = it == open_.end() ? 0 : it->second;
  if (per_client_ > 0 && mine >= per_client_) {
    return Status::ResourceExhausted(
        "this client (" + client + ") has " + std::to_string(mine) +
        " calls waiting for tunes (at most " + std::to_string(per_client_) +
        ", --max-calls-per-client); wait for one to finish, or ask with policy CACHE_ONLY");
  }
  ++open_[client];
  ++open_total_;
  return Slot(this, std::move(client));
}

void CallLimiter::Give(const std::string& client) {
  MutexLock lock(&mu_);
  auto it = open_.find(client);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
  --open_total_;
}

int CallLimiter::open(std::string_view peer) const {
  const std::string client = ClientOf(peer);
  MutexLock lock(&mu_);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : it->second;
}

int CallLimiter::open_total() const {
  MutexLock lock(&mu_);
  return open_total_;
}

}  // namespace transposed
