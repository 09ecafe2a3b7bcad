// StoreLink (store_link.h): connecting, noticing a dead connection, reconnecting with backoff and
// jitter, and saying so.
#include "server/fleet/store_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace transposed {

namespace {

using Clock = StoreLink::Clock;

// A connection that lived less than this before it was lost is not reconnected at once (a Redis
// that accepts and drops connections would otherwise be reconnected in a loop).
constexpr auto kStableAfter = std::chrono::seconds(1);
// A connection that lived this long resets the backoff.
constexpr auto kHealthyAfter = std::chrono::seconds(10);
// "still unavailable" warnings: at most one per this.
constexpr auto kWarnEvery = std::chrono::seconds(60);

std::string Strip(const std::string& reason) {
  return reason.rfind("shared store: ", 0) == 0 ? reason.substr(14) : reason;
}

}  // namespace

StoreLink::StoreLink(SharedStoreOptions options, std::vector<std::string> channels,
                     std::string owner,
                     std::function<void(bool, const std::string&)> on_availability,
                     Counters* counters)
    : options_(std::move(options)),
      channels_(std::move(channels)),
      owner_(std::move(owner)),
      on_availability_(std::move(on_availability)),
      counters_(counters),
      timeout_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(options_.timeout_seconds))),
      rng_(std::random_device{}()) {}

StoreLink::~StoreLink() = default;

Clock::duration StoreLink::Backoff(int attempt) {
  auto wait = std::chrono::duration_cast<Clock::duration>(kRetryFirst) *
              (int64_t{1} << std::min(attempt, 10));
  wait = std::min<Clock::duration>(wait, kRetryMax);
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return std::chrono::duration_cast<Clock::duration>(wait * jitter(rng_));
}

Clock::duration StoreLink::PingDelay() {
  std::uniform_real_distribution<double> jitter(0.75, 1.25);
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration_cast<Clock::duration>(kPingEvery) * jitter(rng_));
}

bool StoreLink::Ensure() {
  const auto now = Clock::now();
  if (!conn_ && (now < retry_at_ || !ConnectCommands())) return false;
  if (!sub_ && Clock::now() >= sub_retry_at_) Subscribe();
  return true;
}

bool StoreLink::TakeResubscribed() {
  const bool r = resubscribed_;
  resubscribed_ = false;
  return r;
}

bool StoreLink::ConnectCommands() {
  counters_->connects.fetch_add(1);
  SharedStoreOptions o = options_;
  o.client_name = owner_ + "/cmd";
  auto c = RedisConnection::Connect(o, Clock::now() + timeout_, shas_);
  if (!c.ok()) {
    Down(c.status().message());
    return false;
  }
  conn_ = std::move(c).value();
  counters_->scripts_loaded.fetch_add(conn_->scripts_loaded());
  shas_ = conn_->shas();
  if (generation_++ > 0) counters_->reconnects.fetch_add(1);
  connected_at_ = Clock::now();
  conn_ping_at_ = connected_at_ + PingDelay();
  Up();
  return true;
}

void StoreLink::Subscribe() {
  counters_->connects.fetch_add(1);
  SharedStoreOptions o = options_;
  o.client_name = owner_ + "/sub";
  auto sub = RedisSubscriber::Connect(o, channels_, Clock::now() + timeout_);
  if (!sub.ok()) {
    spdlog::debug("shared store: subscribing failed: {}", sub.status().ToString());
    sub_retry_at_ = Clock::now() + Backoff(sub_attempts_++);
    return;
  }
  sub_ = std::move(sub).value();
  subscribed_at_ = Clock::now();
  sub_ping_at_ = subscribed_at_ + PingDelay();
  sub_pong_by_ = Clock::time_point::max();
  pongs_seen_ = 0;
  resubscribed_ = true;
  counters_->subscribed.store(true);
}

void StoreLink::SubscriptionLost(const std::string& reason) {
  spdlog::debug("shared store: subscription lost: {}", reason);
  const auto now = Clock::now();
  if (now - subscribed_at_ >= kHealthyAfter) sub_attempts_ = 0;
  sub_retry_at_ = now - subscribed_at_ >= kStableAfter ? now : now + Backoff(sub_attempts_++);
  sub_.reset();
  counters_->subscribed.store(false);
  sub_pong_by_ = Clock::time_point::max();
  // Whatever closed the subscription (a restart) may have closed the commands too: ask now.
  conn_ping_at_ = now;
}

void StoreLink::Down(const std::string& reason) {
  conn_.reset();
  sub_.reset();
  counters_->subscribed.store(false);
  sub_pong_by_ = Clock::time_point::max();
  const auto now = Clock::now();
  retry_at_ = now + Backoff(attempts_++);
  sub_retry_at_ = now;
  reason_ = "shared store unavailable: " + Strip(reason);
  if (counters_->available.exchange(false) || !warned_ || now - last_warning_ > kWarnEvery) {
    spdlog::warn(
        "{}; answering from the local cache and local tunes, reconnecting with backoff "
        "(next try in {} ms)",
        reason_, std::chrono::duration_cast<std::chrono::milliseconds>(retry_at_ - now).count());
    warned_ = true;
    last_warning_ = now;
    if (on_availability_) on_availability_(false, reason_);
  }
}

void StoreLink::Up() {
  if (!counters_->available.exchange(true)) {
    spdlog::info("shared store {} available: sharing tuned results with the class",
                 options_.url.ToString());
    if (on_availability_) on_availability_(true, "");
  }
}

bool StoreLink::Lost(const std::string& reason) {
  conn_.reset();
  const auto now = Clock::now();
  const auto lived = now - connected_at_;
  if (lived >= kHealthyAfter) attempts_ = 0;
  if (lived < kStableAfter) {
    Down(reason);
    return false;
  }
  spdlog::info("shared store: connection lost ({}); reconnecting", Strip(reason));
  return ConnectCommands();
}

std::vector<std::string> StoreLink::Script(SharedScript script,
                                           const std::vector<std::string>& keys,
                                           const std::vector<std::string>& args) const {
  return conn_->Script(script, keys, args);
}

StatusOr<std::vector<RedisValue>> StoreLink::Pipeline(
    const std::vector<std::vector<std::string>>& commands, Deadline deadline) {
  const int64_t trips = conn_->round_trips(), loaded = conn_->scripts_loaded();
  auto replies = conn_->Pipeline(commands, deadline);
  round_trips_ += conn_->round_trips() - trips;
  counters_->scripts_loaded.fetch_add(conn_->scripts_loaded() - loaded);
  if (!replies.ok()) {
    conn_.reset();
    return replies.status();
  }
  conn_ping_at_ = Clock::now() + PingDelay();
  return replies;
}

void StoreLink::AddPollFds(std::vector<pollfd>* fds) {
  poll_conn_ = poll_sub_ = -1;
  if (conn_) {
    poll_conn_ = static_cast<int>(fds->size());
    fds->push_back({conn_->fd(), POLLIN, 0});
  }
  if (sub_) {
    poll_sub_ = static_cast<int>(fds->size());
    fds->push_back({sub_->fd(), POLLIN, 0});
  }
}

StoreLink::Events StoreLink::AfterPoll(const std::vector<pollfd>& fds) {
  Events ev;
  constexpr short kReady = POLLIN | POLLHUP | POLLERR;
  if (poll_sub_ >= 0 && sub_ && (fds[poll_sub_].revents & kReady)) {
    Status s = sub_->Read(&ev.messages);
    if (!s.ok()) {
      SubscriptionLost(s.message());
    } else {
      sub_ping_at_ = Clock::now() + PingDelay();  // it spoke: no PING needed yet
      if (sub_->pongs() != pongs_seen_) {
        pongs_seen_ = sub_->pongs();
        sub_pong_by_ = Clock::time_point::max();
      }
    }
  }
  // Between round trips nothing is owed on the command connection: readable means closed.
  if (poll_conn_ >= 0 && conn_ && (fds[poll_conn_].revents & kReady)) {
    ev.lost = true;
    Lost("the server closed the connection");
  }
  poll_conn_ = poll_sub_ = -1;
  auto now = Clock::now();
  if (conn_ && now >= conn_ping_at_) {
    counters_->pings.fetch_add(1);
    auto pong = conn_->Pipeline({{"PING"}}, now + timeout_);
    if (!pong.ok()) {
      ev.lost = true;
      Lost(pong.status().message());
    } else {
      conn_ping_at_ = Clock::now() + PingDelay();
    }
    now = Clock::now();
  }
  if (sub_ && now >= sub_pong_by_) {
    SubscriptionLost("no answer to PING");
  } else if (sub_ && now >= sub_ping_at_ && sub_pong_by_ == Clock::time_point::max()) {
    counters_->pings.fetch_add(1);
    Status s = sub_->Ping();
    if (!s.ok()) {
      SubscriptionLost(s.message());
    } else {
      sub_ping_at_ = now + PingDelay();
      sub_pong_by_ = now + std::max<Clock::duration>(4 * timeout_, std::chrono::seconds(2));
    }
  }
  return ev;
}

Clock::time_point StoreLink::NextTimer() const {
  auto t = Clock::time_point::max();
  if (!conn_) return retry_at_;
  if (!sub_) t = std::min(t, sub_retry_at_);
  t = std::min(t, conn_ping_at_);
  if (sub_) t = std::min(t, std::min(sub_ping_at_, sub_pong_by_));
  return t;
}

}  // namespace transposed
