// StoreLink: one daemon's two connections to the shared store (server/fleet/shared_store.h) and
// their life, for FleetFlight's thread (fleet_flight_thread.cc):
//   - connecting: the command connection (the scripts loaded by the first one only; later ones
//     reuse the hashes, NOSCRIPT falls back to EVAL), then the subscription to the classes'
//     channels; both named with CLIENT SETNAME (<owner>/cmd, <owner>/sub) for CLIENT LIST;
//   - noticing a dead connection while idle: the server closing either socket (a restart,
//     Redis's `timeout`, CLIENT KILL) is seen by poll at once; a PING on each after kPingEvery of
//     silence (jittered) catches a peer that vanished without a word (and the kernel's
//     keepalive, set on both);
//   - reconnecting: once at once after a loss (a killed connection costs one round trip, not an
//     outage), then with exponential backoff from kRetryFirst to kRetryMax, each wait drawn at
//     random between half and all of it, so a fleet whose Redis restarted does not reconnect in
//     lock step;
//   - saying so: `on_availability` (health) on every change, a warning when it goes down
//     (repeated at most once a minute while down), an info line when it is back, counters.
//
// Thread-compatible: one thread drives a StoreLink.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/fleet/shared_store.h"

namespace transposed {

class StoreLink {
 public:
  using Clock = std::chrono::steady_clock;
  // Written by the link's thread, read by anyone.
  struct Counters {
    std::atomic<int64_t> connects{0};        // connection attempts (commands and subscription)
    std::atomic<int64_t> reconnects{0};      // command connections made after a loss
    std::atomic<int64_t> pings{0};           // idle PINGs sent (both connections)
    std::atomic<int64_t> scripts_loaded{0};  // SCRIPT LOAD and NOSCRIPT-fallback EVAL commands
    std::atomic<bool> available{false};
    std::atomic<bool> subscribed{false};
  };
  // After a loss: the first retry waits kRetryFirst (times a random 0.5..1), each next one twice
  // as long, at most kRetryMax.
  static constexpr auto kRetryFirst = std::chrono::milliseconds(250);
  static constexpr auto kRetryMax = std::chrono::seconds(4);
  // A connection silent this long gets a PING (times a random 0.75..1.25).
  static constexpr auto kPingEvery = std::chrono::seconds(5);

  StoreLink(SharedStoreOptions options, std::vector<std::string> channels, std::string owner,
            std::function<void(bool, const std::string&)> on_availability, Counters* counters);
  ~StoreLink();

  // Connects what is down and due (the command connection, then the subscription). True when the
  // command connection is up.
  bool Ensure();
  bool up() const { return conn_ != nullptr; }
  bool subscribed() const { return sub_ != nullptr; }
  // "shared store unavailable: <why>" while down.
  const std::string& reason() const { return reason_; }

  // The argv of a script's EVALSHA (only while up()).
  std::vector<std::string> Script(SharedScript script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) const;
  // One round trip on the command connection (see RedisConnection::Pipeline). On failure the
  // connection is broken: the caller answers what it must, then calls Lost().
  StatusOr<std::vector<RedisValue>> Pipeline(const std::vector<std::vector<std::string>>& commands,
                                             Deadline deadline);
  // Round trips made (a NOSCRIPT fallback counts twice).
  int64_t round_trips() const { return round_trips_; }

  // The command connection is gone (`reason`): reconnects once at once (unless it lived less
  // than a second), else goes down (every caller tunes locally) and retries with backoff. True
  // when connected again.
  bool Lost(const std::string& reason);

  // Counts the command connections made; a caller that sees it change knows the connection was
  // new (leases to renew at once, waiting misses to re-ask).
  int64_t generation() const { return generation_; }
  // True once after a new subscription was made (messages may have been missed meanwhile).
  bool TakeResubscribed();

  // poll(): the fds to watch (appended), then what they said.
  void AddPollFds(std::vector<pollfd>* fds);
  struct Events {
    std::vector<RedisSubscriber::Message> messages;
    bool lost = false;  // the command connection was lost (and reconnected or not: up())
  };
  // `fds`: the vector AddPollFds appended to, after poll. Also sends the PINGs that are due, and
  // notices a subscription whose PING went unanswered.
  Events AfterPoll(const std::vector<pollfd>& fds);
  // When AfterPoll/Ensure next has something to do (a retry, a PING, a PING's deadline).
  Clock::time_point NextTimer() const;

 private:
  bool ConnectCommands();
  void Subscribe();
  void SubscriptionLost(const std::string& reason);
  void Down(const std::string& reason);
  void Up();
  Clock::duration Backoff(int attempt);
  Clock::duration PingDelay();

  const SharedStoreOptions options_;
  const std::vector<std::string> channels_;
  const std::string owner_;
  const std::function<void(bool, const std::string&)> on_availability_;
  Counters* const counters_;
  const Clock::duration timeout_;
  std::mt19937_64 rng_;

  std::unique_ptr<RedisConnection> conn_;
  std::unique_ptr<RedisSubscriber> sub_;
  std::vector<std::string> shas_;  // the scripts' hashes, once a connection loaded them
  int64_t round_trips_ = 0;
  int64_t generation_ = 0;
  bool resubscribed_ = false;
  Clock::time_point connected_at_{};
  Clock::time_point subscribed_at_{};
  int poll_conn_ = -1;  // indexes into AddPollFds's vector, -1: not added
  int poll_sub_ = -1;
  int attempts_ = 0;  // failed connection attempts since the last success
  Clock::time_point retry_at_{};
  int sub_attempts_ = 0;
  Clock::time_point sub_retry_at_{};
  Clock::time_point conn_ping_at_{};  // PING the command connection when silent until then
  Clock::time_point sub_ping_at_{};
  Clock::time_point sub_pong_by_{Clock::time_point::max()};  // a PING's answer due by then
  int64_t pongs_seen_ = 0;
  std::string reason_ = "shared store unavailable: not connected yet";
  bool warned_ = false;
  Clock::time_point last_warning_{};
};

}  // namespace transposed
