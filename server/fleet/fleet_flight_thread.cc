// FleetFlight's thread (fleet_flight.h): the one thread that does a daemon's Redis work. Its
// ThreadState is the state machine of the misses in progress (fetch-or-lease, waiting on the
// class's channel, deferral to idle nodes), the leases held and renewed, the writes queued, and
// the connection and subscription going down and coming back. The public methods, which only queue
// work for it, are in fleet_flight.cc.
#include "server/fleet/fleet_flight.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace transposed {

namespace {

using Clock = std::chrono::steady_clock;

// Reconnect attempts while the store is down, and the subscription's when only it is down.
constexpr auto kRetryEvery = std::chrono::seconds(1);
// A waiting miss re-asks at least this often while the subscription is down.
constexpr auto kPollWithoutSubscription = std::chrono::seconds(1);
// "still unavailable" and "refused a value" warnings: at most one per this.
constexpr auto kWarnEvery = std::chrono::seconds(60);

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

// The thread's state: the connections, the misses in progress, the leases held.
class FleetFlight::ThreadState {
 public:
  explicit ThreadState(FleetFlight* flight)
      : f_(flight),
        opts_(flight->options_),
        lease_(Ms(opts_.lease_seconds)),
        timeout_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(opts_.store.timeout_seconds))) {
    for (const auto& [lib, cls] : opts_.classes) {
      channels_.push_back(SharedChannelFor(lib, cls));
      class_of_channel_[channels_.back()] = cls;
    }
    std::random_device rd;
    token_base_ = opts_.owner + "/" + std::to_string(rd()) + std::to_string(rd());
  }

  void Run() {
    std::vector<NewResolve> resolves;
    std::vector<Write> writes;
    while (f_->TakeInbox(&resolves, &writes)) {
      const auto now = Clock::now();
      for (auto& r : resolves) Add(std::move(r));
      resolves.clear();
      ReadSubscription();
      Step(now, &writes);
      writes.clear();
      WaitForWork();
    }
  }

 private:
  struct Pending {
    SharedKeys keys;
    std::string device_class;
    std::string library_version;
    Problem problem;
    std::vector<SharedResolveFn> dones;
    Deadline first_deadline;  // until it had one answer from Redis
    bool answered_once = false;
    bool waiting = false;  // another node holds the lease
    Clock::time_point next_check;
    bool skip_value = false;  // the stored value was refused: go past it to the lease
    std::string refused_median;
    // ResolveDeferred (a busy device): until then it asks the class's idle nodes (once) instead
    // of taking the free lease.
    Clock::time_point defer_until{};
    bool want_sent = false;
  };
  struct Held {
    SharedKeys keys;
    Clock::time_point next_renew;
  };
  // What each command of a pipeline is for.
  struct Sent {
    enum class Kind { kFetch, kRenew, kWrite } kind;
    std::string key;  // pending_ key (kFetch), token (kRenew, kWrite kPublish)
    std::string token;
    bool publish = false;
  };

  void Add(NewResolve r) {
    f_->counts_.resolves.fetch_add(1);
    auto it = pending_.find(r.keys.result);
    if (it != pending_.end()) {  // two devices of one class missed the same problem
      it->second.dones.push_back(std::move(r.done));
      return;
    }
    Pending p;
    p.keys = r.keys;
    p.device_class = r.device_class;
    p.library_version = r.library_version;
    p.problem = r.problem;
    p.dones.push_back(std::move(r.done));
    p.first_deadline = r.deadline;
    p.next_check = Clock::now();
    if (r.defer_seconds > 0)
      p.defer_until = p.next_check + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(r.defer_seconds));
    pending_.emplace(r.keys.result, std::move(p));
  }

  void ReadSubscription() {
    if (!sub_ || !sub_readable_) return;
    sub_readable_ = false;
    std::vector<RedisSubscriber::Message> messages;
    Status s = sub_->Read(&messages);
    for (const auto& m : messages) {
      f_->counts_.notifications.fetch_add(1);
      if (auto wanted = DecodeWant(m.payload)) {
        // A busy node of the class asks for an idle node to tune it: the service decides.
        f_->counts_.wanted.fetch_add(1);
        auto cls = class_of_channel_.find(m.channel);
        WantedFn fn;
        {
          MutexLock l(&f_->mu_);
          fn = f_->on_wanted_;
        }
        if (fn && cls != class_of_channel_.end()) fn(cls->second, *wanted);
        continue;
      }
      for (auto& [key, p] : pending_)
        if (p.keys.channel == m.channel && p.keys.problem_key == m.payload)
          p.next_check = Clock::now();
    }
    if (!s.ok()) {
      spdlog::debug("shared store: subscription lost: {}", s.ToString());
      sub_.reset();
      sub_retry_at_ = Clock::now();
      // Messages may be lost meanwhile: everything waiting re-asks now.
      for (auto& [key, p] : pending_) p.next_check = Clock::now();
    }
  }

  // Answers every due miss kUnavailable and drops every write.
  void FailAll(const std::vector<std::string>& due, std::vector<Write>* writes,
               const std::string& reason) {
    for (const auto& key : due) {
      auto it = pending_.find(key);
      if (it == pending_.end()) continue;
      std::vector<SharedResolveFn> dones = std::move(it->second.dones);
      pending_.erase(it);
      for (auto& done : dones) {
        f_->counts_.unavailable.fetch_add(1);
        SharedOutcome o;
        o.kind = SharedOutcome::Kind::kUnavailable;
        o.reason = reason;
        done(std::move(o));
      }
    }
    f_->counts_.dropped.fetch_add(static_cast<int64_t>(writes->size()));
    writes->clear();
  }

  void Down(const std::string& reason) {
    conn_.reset();
    sub_.reset();
    retry_at_ = Clock::now() + kRetryEvery;
    reason_ = "shared store unavailable: " +
              (reason.rfind("shared store: ", 0) == 0 ? reason.substr(14) : reason);
    // The leases held are lost with the store (they expire there); the tunes go on locally.
    held_.clear();
    refused_by_token_.clear();
    if (f_->counts_.available.exchange(false) || !warned_once_ ||
        Clock::now() - last_down_warning_ > kWarnEvery) {
      spdlog::warn("{}; answering from the local cache and local tunes, retrying every {} s",
                   reason_, std::chrono::duration_cast<std::chrono::seconds>(kRetryEvery).count());
      warned_once_ = true;
      last_down_warning_ = Clock::now();
      if (opts_.on_availability) opts_.on_availability(false, reason_);
    }
  }

  void Up() {
    if (!f_->counts_.available.exchange(true)) {
      spdlog::info("shared store {} available: sharing tuned results with the class",
                   opts_.store.url.ToString());
      if (opts_.on_availability) opts_.on_availability(true, "");
    }
  }

  bool Connect(Deadline deadline) {
    f_->counts_.connects.fetch_add(1);
    auto c = RedisConnection::Connect(opts_.store, deadline);
    if (!c.ok()) {
      Down(c.status().message());
      return false;
    }
    conn_ = std::move(c).value();
    Up();
    return true;
  }

  void Step(Clock::time_point now, std::vector<Write>* writes) {
    bool work = !writes->empty();
    for (const auto& [key, p] : pending_) work = work || p.next_check <= now;
    for (const auto& [token, h] : held_) work = work || h.next_renew <= now;
    if (!conn_) {
      // Down: every miss (waiting ones too) tunes locally now rather than waiting for a store
      // that may not come back in time. Reconnecting is tried once a second, work or not.
      if (now < retry_at_ || !Connect(now + timeout_)) {
        FailAll(AllPending(), writes, reason_);
        return;
      }
      now = Clock::now();
    }
    if (!sub_ && now >= sub_retry_at_) {
      Subscribe();
      now = Clock::now();
    }
    if (!work) return;
    // A new miss waits for its first answer until its deadline (the store's timeout after it
    // came), not a moment longer: one that cannot get it any more tunes locally now.
    std::vector<std::string> due, late;
    Deadline deadline = now + timeout_;
    for (auto& [key, p] : pending_) {
      if (!p.answered_once && p.first_deadline <= now + std::chrono::milliseconds(2)) {
        late.push_back(key);
      } else if (p.next_check <= now) {
        due.push_back(key);
        if (!p.answered_once) deadline = std::min(deadline, p.first_deadline);
      }
    }
    if (!late.empty()) {
      std::vector<Write> none;
      FailAll(late, &none, "shared store: no answer within " +
                               std::to_string(Ms(opts_.store.timeout_seconds).count()) + " ms");
    }
    std::vector<std::string> renew;
    for (auto& [token, h] : held_)
      if (h.next_renew <= now) renew.push_back(token);
    if (due.empty() && renew.empty() && writes->empty()) return;

    std::vector<std::vector<std::string>> commands;
    std::vector<Sent> sent;
    const std::string lease_ms = std::to_string(lease_.count());
    for (const auto& key : due) {
      Pending& p = pending_[key];
      const std::string token = token_base_ + "/" + std::to_string(++token_seq_);
      if (p.defer_until > now) {
        commands.push_back(conn_->Script(
            SharedScript::kFetchOrWant, {p.keys.result, p.keys.lease},
            {std::to_string(kSharedFormat), p.skip_value ? "1" : "0", p.keys.channel,
             EncodeWant(p.problem), p.want_sent ? "0" : "1"}));
        sent.push_back({Sent::Kind::kFetch, key, token});
        continue;
      }
      commands.push_back(conn_->Script(SharedScript::kFetchOrLease, {p.keys.result, p.keys.lease},
                                       {std::to_string(kSharedFormat), token, lease_ms,
                                        p.skip_value ? "1" : "0"}));
      sent.push_back({Sent::Kind::kFetch, key, token});
    }
    for (const auto& token : renew) {
      commands.push_back(
          conn_->Script(SharedScript::kRenew, {held_[token].keys.lease}, {token, lease_ms}));
      sent.push_back({Sent::Kind::kRenew, token, token});
    }
    for (const auto& w : *writes) {
      if (w.kind == Write::Kind::kPublish) {
        commands.push_back(conn_->Script(
            SharedScript::kPublish, {w.keys.result, w.keys.lease},
            {std::to_string(kSharedFormat), w.median, w.entry, w.lease, w.keys.channel,
             w.keys.problem_key, RefusedMedian(w.lease)}));
      } else {
        commands.push_back(conn_->Script(SharedScript::kRelease, {w.keys.lease},
                                         {w.lease, w.keys.channel, w.keys.problem_key}));
      }
      if (!w.lease.empty()) {
        held_.erase(w.lease);
        refused_by_token_.erase(w.lease);
      }
      sent.push_back({Sent::Kind::kWrite, w.keys.problem_key, w.lease,
                      w.kind == Write::Kind::kPublish});
    }
    auto replies = conn_->Pipeline(commands, deadline);
    f_->counts_.round_trips.fetch_add(1);
    if (!replies.ok()) {
      Down(replies.status().message());
      FailAll(AllPending(), writes, reason_);
      return;
    }
    Up();
    for (size_t i = 0; i < sent.size(); ++i) Handle(sent[i], (*replies)[i]);
  }

  std::vector<std::string> AllPending() const {
    std::vector<std::string> keys;
    for (const auto& [key, p] : pending_) keys.push_back(key);
    return keys;
  }

  // The `m` of the value a lease's holder refused, so that its publish may replace it.
  std::string RefusedMedian(const std::string& token) {
    auto it = refused_by_token_.find(token);
    if (it == refused_by_token_.end()) return "";
    std::string m = it->second;
    refused_by_token_.erase(it);
    return m;
  }

  void Refused(Pending* p, const std::string& median, const std::string& why) {
    f_->counts_.refused.fetch_add(1);
    p->skip_value = true;
    p->refused_median = median;
    if (Clock::now() - last_refused_warning_ > kWarnEvery) {
      last_refused_warning_ = Clock::now();
      spdlog::warn("shared store: refused the stored value of {} (class {}): {}; it is never "
                   "served, this node tunes and replaces it (further refusals: the metric "
                   "transposed_shared_store_refused_total)",
                   p->problem.ToString(), p->device_class, why);
    }
  }

  void Handle(const Sent& s, const RedisValue& v) {
    if (s.kind == Sent::Kind::kWrite) {
      if (v.type == RedisValue::Type::kError) {
        spdlog::warn("shared store: writing {} failed: {}", s.key, v.str);
      } else if (s.publish) {
        (v.integer == 1 ? f_->counts_.published_written : f_->counts_.published_kept).fetch_add(1);
      }
      return;
    }
    if (s.kind == Sent::Kind::kRenew) {
      auto it = held_.find(s.token);
      if (it == held_.end()) return;
      if (v.type == RedisValue::Type::kInteger && v.integer == 1) {
        it->second.next_renew = Clock::now() + lease_ / 3;
      } else {
        f_->counts_.leases_lost.fetch_add(1);
        spdlog::warn("shared store: the lease of {} expired while this node tuned it (another "
                     "node may tune it too; the faster result is kept)",
                     it->second.keys.problem_key);
        held_.erase(it);
      }
      return;
    }
    auto it = pending_.find(s.key);
    if (it == pending_.end()) return;
    Pending& p = it->second;
    const auto now = Clock::now();
    if (v.type != RedisValue::Type::kArray || v.elements.empty() ||
        v.elements[0].type != RedisValue::Type::kInteger) {
      // A script error (NOSCRIPT after a SCRIPT FLUSH, OOM, ...): this miss tunes locally.
      const std::string why = v.type == RedisValue::Type::kError ? v.str : "unexpected reply";
      spdlog::warn("shared store: fetch of {} failed: {}", p.keys.problem_key, why);
      if (why.rfind("NOSCRIPT", 0) == 0) conn_.reset();  // reconnecting loads the scripts
      std::vector<Write> none;
      FailAll({s.key}, &none, "shared store: " + why);
      return;
    }
    p.answered_once = true;
    const long long kind = v.elements[0].integer;
    const auto str = [&v](size_t i) { return i < v.elements.size() ? v.elements[i].str : ""; };
    if (kind == 1) {
      auto result = DecodeSharedEntry(str(1), p.device_class, p.library_version, p.problem);
      if (!result.ok()) {
        Refused(&p, str(2), result.status().message());
        p.next_check = now;  // at once, past the refused value
        return;
      }
      std::vector<SharedResolveFn> dones = std::move(p.dones);
      pending_.erase(it);
      for (auto& done : dones) {
        f_->counts_.found.fetch_add(1);
        SharedOutcome o;
        o.kind = SharedOutcome::Kind::kFound;
        o.result = *result;
        done(std::move(o));
      }
      return;
    }
    const bool present = v.elements.size() > 1 && v.elements[1].integer == 1;
    if (present && !p.skip_value)
      Refused(&p, kind == 2 || kind == 4 ? str(2) : str(3), "another format");
    if (kind == 4) {
      // Asked the class's idle nodes: wait for a result (the done notification) until the
      // deferral ends, then take the lease here.
      if (!p.want_sent) f_->counts_.wants.fetch_add(1);
      p.want_sent = true;
      p.waiting = true;
      p.next_check = p.defer_until;
      return;
    }
    if (kind == 2) {
      f_->counts_.leases.fetch_add(1);
      held_[s.token] = Held{p.keys, now + lease_ / 3};
      if (p.skip_value) refused_by_token_[s.token] = p.refused_median;
      SharedResolveFn done = std::move(p.dones.front());
      p.dones.erase(p.dones.begin());
      if (p.dones.empty()) {
        pending_.erase(it);
      } else {  // another device of the class: waits for this one's result
        p.waiting = true;
        p.next_check = now + lease_;
      }
      SharedOutcome o;
      o.kind = SharedOutcome::Kind::kLeased;
      o.lease = s.token;
      done(std::move(o));
      return;
    }
    // Another node holds the lease: re-ask when told, or when it would have expired.
    if (!p.waiting) f_->counts_.waits.fetch_add(1);
    p.waiting = true;
    const long long pttl = v.elements.size() > 2 ? v.elements[2].integer : 0;
    auto next = std::chrono::milliseconds(std::clamp<long long>(pttl, 0, lease_.count()) + 10);
    if (!sub_)
      next = std::min<std::chrono::milliseconds>(
          next, std::chrono::duration_cast<std::chrono::milliseconds>(kPollWithoutSubscription));
    p.next_check = now + next;
  }

  void Subscribe() {
    f_->counts_.connects.fetch_add(1);
    auto sub = RedisSubscriber::Connect(opts_.store, channels_, Clock::now() + timeout_);
    if (!sub.ok()) {
      spdlog::debug("shared store: subscribing failed: {}", sub.status().ToString());
      sub_retry_at_ = Clock::now() + kRetryEvery;
      return;
    }
    sub_ = std::move(sub).value();
    // A publish may have come while there was no subscription: everything waiting re-asks.
    for (auto& [key, p] : pending_)
      if (p.waiting) p.next_check = Clock::now();
  }

  void WaitForWork() {
    auto now = Clock::now();
    auto until = now + std::chrono::hours(1);
    for (const auto& [key, p] : pending_)
      until = std::min(until, p.answered_once ? p.next_check : std::min(p.next_check,
                                                                         p.first_deadline));
    for (const auto& [token, h] : held_) until = std::min(until, h.next_renew);
    if (!conn_)
      until = std::min(until, retry_at_);
    else if (!sub_)
      until = std::min(until, sub_retry_at_);
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1, 0,
        3600 * 1000));
    pollfd fds[2] = {{f_->wake_fd_, POLLIN, 0}, {sub_ ? sub_->fd() : -1, POLLIN, 0}};
    if (poll(fds, 2, timeout_ms) > 0) {
      if (fds[0].revents & POLLIN) {
        uint64_t n;
        (void)!read(f_->wake_fd_, &n, sizeof(n));
      }
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) sub_readable_ = true;
    }
  }

  FleetFlight* const f_;
  const FleetOptions& opts_;
  const std::chrono::milliseconds lease_;
  const Clock::duration timeout_;
  std::vector<std::string> channels_;
  std::map<std::string, std::string> class_of_channel_;  // channel -> device class key
  std::string token_base_;
  uint64_t token_seq_ = 0;

  std::unique_ptr<RedisConnection> conn_;
  std::unique_ptr<RedisSubscriber> sub_;
  bool sub_readable_ = false;
  Clock::time_point retry_at_{};
  Clock::time_point sub_retry_at_{};
  std::string reason_ = "shared store unavailable: not connected yet";
  bool warned_once_ = false;
  Clock::time_point last_down_warning_{};
  Clock::time_point last_refused_warning_{};

  std::map<std::string, Pending> pending_;               // by result key
  std::map<std::string, Held> held_;                     // by token
  std::map<std::string, std::string> refused_by_token_;  // token -> refused median
};

void FleetFlight::Loop() {
  ThreadState state(this);
  state.Run();
}

}  // namespace transposed
