// FleetFlight's thread (fleet_flight.h): the one thread that does a daemon's Redis work. Its
// ThreadState is the state machine of the misses in progress (fetch-or-lease, waiting on the
// class's channel, deferral to idle nodes, the lease budget), the leases held and renewed, and the
// writes queued (kept across a reconnect). The connections' life is StoreLink's (store_link.h);
// the public methods, which only queue work for it, are in fleet_flight.cc.
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "server/fleet/fleet_flight.h"

namespace transposed {

namespace {

using Clock = std::chrono::steady_clock;

// A waiting miss re-asks at least this often while the subscription is down.
constexpr auto kPollWithoutSubscription = std::chrono::seconds(1);
// "refused a value" warnings: at most one per this.
constexpr auto kWarnEvery = std::chrono::seconds(60);
// Writes kept while the store is down: at most this many (the oldest given up first), each at
// most this long, and sent at most this many times (a failed round trip leaves it unknown).
constexpr size_t kMaxQueuedWrites = 4096;
constexpr auto kWriteMaxAge = std::chrono::minutes(10);
constexpr int kMaxWriteAttempts = 5;

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

// The thread's state: the misses in progress, the leases held, the writes queued.
class FleetFlight::ThreadState {
 public:
  explicit ThreadState(FleetFlight* flight)
      : f_(flight),
        opts_(flight->options_),
        lease_(Ms(opts_.lease_seconds)),
        timeout_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(opts_.store.timeout_seconds))),
        link_(opts_.store, Channels(opts_), opts_.owner, opts_.on_availability,
              &flight->counts_.link),
        rng_(std::random_device{}()) {
    for (const auto& [lib, cls] : opts_.classes)
      class_of_channel_[SharedChannelFor(lib, cls)] = cls;
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
      Queue(now, &writes);
      Step(now);
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
    bool waiting = false;  // another node holds the lease, or this one left it to the class
    Clock::time_point next_check;
    bool skip_value = false;  // the stored value was refused: go past it to the lease
    std::string refused_median;
    // ResolveDeferred (a busy device): until then it asks the class's idle nodes (once) instead
    // of taking the free lease.
    Clock::time_point defer_until{};
    bool want_sent = false;
    bool budget_blocked = false;  // the lease was free but this node held its budget
  };
  struct Held {
    SharedKeys keys;
    std::string device_class;
    Clock::time_point next_renew;
  };
  struct Queued {
    Write write;
    Clock::time_point since;
    int attempts = 0;
  };
  // What each command of a pipeline is for.
  struct Sent {
    enum class Kind { kFetch, kRenew, kWrite } kind;
    std::string key;  // pending_ key (kFetch), problem key (kWrite)
    std::string token;
    bool publish = false;
    size_t queued = 0;  // kWrite: its index in `sending`
  };

  static std::vector<std::string> Channels(const FleetOptions& o) {
    std::vector<std::string> channels;
    for (const auto& [lib, cls] : o.classes) channels.push_back(SharedChannelFor(lib, cls));
    return channels;
  }

  int BudgetOf(const std::string& cls) const {
    auto it = opts_.lease_budget.find(cls);
    return it == opts_.lease_budget.end() ? 1 : it->second;
  }
  int HeldIn(const std::string& cls) const {
    int n = 0;
    for (const auto& [token, h] : held_) n += h.device_class == cls ? 1 : 0;
    return n;
  }

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

  // New writes join the queue; the lease of each is no longer this node's to renew (its tune
  // ended), so it leaves the lease budget now, store up or down.
  void Queue(Clock::time_point now, std::vector<Write>* writes) {
    for (auto& w : *writes) {
      if (!w.lease.empty()) held_.erase(w.lease);
      queued_.push_back(Queued{std::move(w), now, 0});
    }
    writes->clear();
    while (!queued_.empty() &&
           (queued_.size() > kMaxQueuedWrites || now - queued_.front().since > kWriteMaxAge)) {
      GiveUp(queued_.front(), "kept too long while the store was down");
      queued_.pop_front();
    }
  }

  void GiveUp(const Queued& q, const std::string& why) {
    f_->counts_.dropped.fetch_add(1);
    refused_by_token_.erase(q.write.lease);
    spdlog::debug("shared store: gave up writing {}: {}", q.write.keys.problem_key, why);
  }

  void OnMessages(const std::vector<RedisSubscriber::Message>& messages) {
    for (const auto& m : messages) {
      f_->counts_.notifications.fetch_add(1);
      if (auto wanted = DecodeWant(m.payload)) {
        // A node of the class asks for another (idle) node to tune it: the service decides.
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
  }

  // Answers each of `keys` kUnavailable (it tunes locally).
  void FailAll(const std::vector<std::string>& keys, const std::string& reason) {
    for (const auto& key : keys) {
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
  }

  // A new connection: the leases held are renewed (or taken again) at once, and everything
  // waiting re-asks (a restarted Redis lost the lease it waited on).
  void OnNewConnection(Clock::time_point now) {
    for (auto& [token, h] : held_) h.next_renew = now;
    for (auto& [key, p] : pending_)
      if (p.waiting) p.next_check = now;
  }

  void Step(Clock::time_point now) {
    const int64_t generation = link_.generation();
    if (!link_.Ensure()) {
      // Down: every miss (waiting ones too) tunes locally now rather than waiting for a store
      // that may not come back in time; writes and leases wait for it.
      FailAll(AllPending(), link_.reason());
      return;
    }
    now = Clock::now();
    if (link_.generation() != generation && generation > 0) OnNewConnection(now);
    if (link_.TakeResubscribed()) {
      // A publish may have come while there was no subscription: everything waiting re-asks.
      for (auto& [key, p] : pending_)
        if (p.waiting) p.next_check = now;
    }
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
    if (!late.empty())
      FailAll(late, "shared store: no answer within " +
                        std::to_string(Ms(opts_.store.timeout_seconds).count()) + " ms");
    std::vector<std::string> renew;
    for (auto& [token, h] : held_)
      if (h.next_renew <= now) renew.push_back(token);
    if (due.empty() && renew.empty() && queued_.empty()) return;

    std::vector<std::vector<std::string>> commands;
    std::vector<Sent> sent;
    const std::string lease_ms = std::to_string(lease_.count());
    // Leases this node may still take, per class; which misses try first is drawn at random, so
    // that nodes asking the same list at once try different problems.
    std::map<std::string, int> free;
    std::shuffle(due.begin(), due.end(), rng_);
    for (const auto& key : due) {
      Pending& p = pending_[key];
      if (!free.count(p.device_class))
        free[p.device_class] = BudgetOf(p.device_class) - HeldIn(p.device_class);
      const std::string token = token_base_ + "/" + std::to_string(++token_seq_);
      const bool deferred = p.defer_until > now;
      if (deferred || free[p.device_class] <= 0) {
        commands.push_back(
            link_.Script(SharedScript::kFetchOrWant, {p.keys.result, p.keys.lease, p.keys.want},
                         {std::to_string(kSharedFormat), p.skip_value ? "1" : "0", p.keys.channel,
                          EncodeWant(p.problem), p.want_sent ? "0" : "1", lease_ms}));
        sent.push_back({Sent::Kind::kFetch, key, token});
        continue;
      }
      --free[p.device_class];
      commands.push_back(
          link_.Script(SharedScript::kFetchOrLease, {p.keys.result, p.keys.lease},
                       {std::to_string(kSharedFormat), token, lease_ms, p.skip_value ? "1" : "0"}));
      sent.push_back({Sent::Kind::kFetch, key, token});
    }
    for (const auto& token : renew) {
      commands.push_back(
          link_.Script(SharedScript::kRenew, {held_[token].keys.lease}, {token, lease_ms}));
      sent.push_back({Sent::Kind::kRenew, token, token});
    }
    std::vector<Queued> sending(std::make_move_iterator(queued_.begin()),
                                std::make_move_iterator(queued_.end()));
    queued_.clear();
    for (size_t i = 0; i < sending.size(); ++i) {
      const Write& w = sending[i].write;
      ++sending[i].attempts;
      if (w.kind == Write::Kind::kPublish) {
        commands.push_back(
            link_.Script(SharedScript::kPublish, {w.keys.result, w.keys.lease},
                         {std::to_string(kSharedFormat), w.median, w.entry, w.lease, w.keys.channel,
                          w.keys.problem_key, RefusedMedian(w.lease), w.contended ? "1" : "0"}));
      } else {
        commands.push_back(link_.Script(SharedScript::kRelease, {w.keys.lease},
                                        {w.lease, w.keys.channel, w.keys.problem_key}));
      }
      sent.push_back(
          {Sent::Kind::kWrite, w.keys.problem_key, w.lease, w.kind == Write::Kind::kPublish, i});
    }
    const int64_t trips = link_.round_trips();
    auto replies = link_.Pipeline(commands, deadline);
    f_->counts_.round_trips.fetch_add(link_.round_trips() - trips);
    if (!replies.ok()) {
      Failed(replies.status().message(), due, &sending);
      return;
    }
    for (size_t i = 0; i < sent.size(); ++i) Handle(sent[i], (*replies)[i]);
    WakeBudgetBlocked();
  }

  // A round trip failed: what it carried is unknown. Writes go back to the queue (counted
  // unknown: Redis may have carried them out; sending them again is harmless), leases are
  // renewed on the next connection, and the misses that were asked: re-asked there, or failed if
  // the store is down (or, for new ones, their deadline passed).
  void Failed(const std::string& reason, const std::vector<std::string>& due,
              std::vector<Queued>* sending) {
    for (auto& q : *sending) {
      f_->counts_.unknown.fetch_add(1);
      if (q.attempts >= kMaxWriteAttempts)
        GiveUp(q, "sent " + std::to_string(q.attempts) + " times without an answer");
      else
        queued_.push_back(std::move(q));
    }
    const auto now = Clock::now();
    std::vector<std::string> late;
    for (const auto& key : due) {
      auto it = pending_.find(key);
      if (it != pending_.end() && !it->second.answered_once &&
          it->second.first_deadline <= now + std::chrono::milliseconds(5))
        late.push_back(key);
    }
    FailAll(late, "shared store: " + reason);
    if (!link_.Lost(reason)) {
      FailAll(AllPending(), link_.reason());
      return;
    }
    OnNewConnection(Clock::now());
    for (const auto& key : due)
      if (auto it = pending_.find(key); it != pending_.end()) it->second.next_check = Clock::now();
  }

  // Budget freed (a lease published, released or lost, or a lease attempt that found a holder):
  // as many of the misses this node left to the class are asked again, drawn at random.
  void WakeBudgetBlocked() {
    std::map<std::string, std::vector<Pending*>> blocked;
    const auto now = Clock::now();
    for (auto& [key, p] : pending_)
      if (p.budget_blocked && p.next_check > now) blocked[p.device_class].push_back(&p);
    for (auto& [cls, list] : blocked) {
      int free = BudgetOf(cls) - HeldIn(cls);
      std::shuffle(list.begin(), list.end(), rng_);
      for (Pending* p : list) {
        if (free-- <= 0) break;
        p->next_check = now;
      }
    }
  }

  std::vector<std::string> AllPending() const {
    std::vector<std::string> keys;
    for (const auto& [key, p] : pending_) keys.push_back(key);
    return keys;
  }

  // The `m` of the value a lease's holder refused, so that its publish may replace it.
  std::string RefusedMedian(const std::string& token) {
    auto it = refused_by_token_.find(token);
    return it == refused_by_token_.end() ? "" : it->second;
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
      refused_by_token_.erase(s.token);
      if (v.type == RedisValue::Type::kError) {
        f_->counts_.dropped.fetch_add(1);
        spdlog::warn("shared store: writing {} failed: {}", s.key, v.str);
      } else if (s.publish) {
        (v.integer == 1 ? f_->counts_.published_written : f_->counts_.published_kept).fetch_add(1);
      }
      return;
    }
    if (s.kind == Sent::Kind::kRenew) {
      auto it = held_.find(s.token);
      if (it == held_.end()) return;
      if (v.type == RedisValue::Type::kInteger && (v.integer == 1 || v.integer == 2)) {
        if (v.integer == 2) f_->counts_.leases_retaken.fetch_add(1);
        it->second.next_renew = Clock::now() + lease_ / 3;
      } else {
        f_->counts_.leases_lost.fetch_add(1);
        spdlog::warn(
            "shared store: another node took the lease of {} while this node tuned it "
            "(the faster result is kept)",
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
      // A script error (OOM, ...): this miss tunes locally.
      const std::string why = v.type == RedisValue::Type::kError ? v.str : "unexpected reply";
      spdlog::warn("shared store: fetch of {} failed: {}", p.keys.problem_key, why);
      FailAll({s.key}, "shared store: " + why);
      return;
    }
    p.answered_once = true;
    p.budget_blocked = false;
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
      p.waiting = true;
      if (p.defer_until > now) {
        // A busy device asked the class's idle nodes: wait for a result (the done
        // notification) until the deferral ends, then take the lease here.
        if (!p.want_sent) f_->counts_.wants.fetch_add(1);
        p.want_sent = true;
        p.next_check = p.defer_until;
        return;
      }
      // This node holds its lease budget: left to the class until one of its leases ends
      // (WakeBudgetBlocked), or a node of the class takes it (the done notification), or, should
      // both messages be lost, a lease's life from now.
      if (!p.want_sent) f_->counts_.budget_waits.fetch_add(1);
      p.want_sent = true;
      p.budget_blocked = true;
      p.next_check = now + lease_;
      return;
    }
    if (kind == 2) {
      f_->counts_.leases.fetch_add(1);
      held_[s.token] = Held{p.keys, p.device_class, now + lease_ / 3};
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
    if (!link_.subscribed())
      next = std::min<std::chrono::milliseconds>(
          next, std::chrono::duration_cast<std::chrono::milliseconds>(kPollWithoutSubscription));
    p.next_check = now + next;
  }

  void WaitForWork() {
    auto now = Clock::now();
    auto until = now + std::chrono::hours(1);
    for (const auto& [key, p] : pending_)
      until = std::min(until, p.answered_once ? p.next_check : std::min(p.next_check,
                                                                         p.first_deadline));
    if (link_.up()) {  // while down, renewals and writes wait for the reconnection (NextTimer)
      for (const auto& [token, h] : held_) until = std::min(until, h.next_renew);
      if (!queued_.empty()) until = now;  // writes queued while a round trip failed
    }
    until = std::min(until, link_.NextTimer());
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1, 0,
        3600 * 1000));
    std::vector<pollfd> fds = {{f_->wake_fd_, POLLIN, 0}};
    link_.AddPollFds(&fds);
    if (poll(fds.data(), fds.size(), timeout_ms) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t n;
      (void)!read(f_->wake_fd_, &n, sizeof(n));
    }
    const int64_t generation = link_.generation();
    StoreLink::Events ev = link_.AfterPoll(fds);
    OnMessages(ev.messages);
    if (ev.lost) {
      if (!link_.up())
        FailAll(AllPending(), link_.reason());
      else if (link_.generation() != generation)
        OnNewConnection(Clock::now());
    }
  }

  FleetFlight* const f_;
  const FleetOptions& opts_;
  const std::chrono::milliseconds lease_;
  const Clock::duration timeout_;
  StoreLink link_;
  std::mt19937_64 rng_;
  std::map<std::string, std::string> class_of_channel_;  // channel -> device class key
  std::string token_base_;
  uint64_t token_seq_ = 0;
  Clock::time_point last_refused_warning_{};

  std::map<std::string, Pending> pending_;               // by result key
  std::map<std::string, Held> held_;                     // by token: tunes in progress
  std::deque<Queued> queued_;                            // writes not yet carried out
  std::map<std::string, std::string> refused_by_token_;  // token -> refused median
};

void FleetFlight::Loop() {
  ThreadState state(this);
  state.Run();
}

}  // namespace transposed
