#include "server/fleet/shared_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/device_class.h"
#include "core/text.h"
#include "server/grpc/convert.h"

namespace transposed {

namespace {

// Fetch-or-lease. KEYS: result, lease. ARGV: format, token, lease ms, "1" to skip the stored value
// (it was refused). Returns {1, e, m} (found), {2, present, m} (leased: this token now holds it),
// or {3, present, pttl, m} (another node holds the lease). `present`: a value of another format
// or a skipped one is there (the caller counts it as refused); `m`: its median as stored.
constexpr const char* kFetchOrLeaseLua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'f', 'm', 'e')
local present = 0
if v[1] or v[3] then present = 1 end
if ARGV[4] ~= '1' and v[1] == ARGV[1] and v[3] then return {1, v[3], v[2] or ''} end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return {2, present, v[2] or ''} end
return {3, present, redis.call('PTTL', KEYS[2]), v[2] or ''}
)lua";

// Publish-if-faster. KEYS: result, lease. ARGV: format, median, entry, token ('' : none), channel,
// problem key, the `m` of a value this node refused ('' : none; replaced only if still there),
// '1' when the result was measured under contention (stored as field `c`).
// Writes when nothing of this format is stored, the stored median is not a number, the refused
// value is still the one stored, the stored value was measured under contention and the new one
// was not, or the new one is lower, unless it was measured under contention and the stored one
// was not: a contended measurement never replaces an idle one, an idle one always replaces a
// contended one, and otherwise never a slower result over a faster one.
// Releases the lease if the token still holds it. Tells the class only when it wrote or released
// (a publish that changed nothing wakes nobody). Returns 1 when written.
constexpr const char* kPublishLua = R"lua(
local cur = redis.call('HMGET', KEYS[1], 'f', 'm', 'c')
local m = tonumber(cur[2])
local new_c = ARGV[8] == '1'
local old_c = cur[3] == '1'
local written = 0
if cur[1] ~= ARGV[1] or not m or (ARGV[7] ~= '' and cur[2] == ARGV[7]) or (old_c and not new_c) or
   (tonumber(ARGV[2]) < m and (old_c or not new_c)) then
  redis.call('HSET', KEYS[1], 'f', ARGV[1], 'm', ARGV[2], 'e', ARGV[3], 'c', new_c and '1' or '0')
  written = 1
end
local released = 0
if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) == ARGV[4] then
  redis.call('DEL', KEYS[2])
  released = 1
end
if written == 1 or released == 1 then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return written
)lua";

// Renew or retake. KEYS: lease. ARGV: token, ms. 1 when the token still held the lease (now
// extended); 2 when nobody held it (expired, or a restarted Redis lost it) and the token took it
// again; 0 when another token holds it.
constexpr const char* kRenewLua = R"lua(
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end
return 0
)lua";

// Release. KEYS: lease. ARGV: token, channel, problem key. Drops the lease if the token holds it
// and then tells the class (a waiting node takes it over). 1 when released.
constexpr const char* kReleaseLua = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
)lua";

// A fetch that does not take a free lease: a busy node's (server/polite.h), or a node that holds
// its lease budget already (fleet_flight.h). As kFetchOrLease, but where it would take the free
// lease it asks the class's nodes instead (PUBLISH ARGV[4] on channel ARGV[3], only when ARGV[5]
// is '1' and no node of the class asked for it within ARGV[6] ms: the want key) and answers
// {4, present, m}. KEYS: result, lease, want.
constexpr const char* kFetchOrWantLua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'f', 'm', 'e')
local present = 0
if v[1] or v[3] then present = 1 end
if ARGV[2] ~= '1' and v[1] == ARGV[1] and v[3] then return {1, v[3], v[2] or ''} end
local ttl = redis.call('PTTL', KEYS[2])
if ttl ~= -2 then return {3, present, ttl, v[2] or ''} end
if ARGV[5] == '1' and redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[6]) then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return {4, present, v[2] or ''}
)lua";

// In SharedScript order.
constexpr const char* kScripts[] = {kFetchOrLeaseLua, kPublishLua, kRenewLua, kReleaseLua,
                                    kFetchOrWantLua};

timeval Remaining(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(
      deadline - std::chrono::steady_clock::now());
  // hiredis treats a zero timeout as none at all: at least one millisecond.
  left = std::max(left, std::chrono::microseconds(1000));
  timeval tv;
  tv.tv_sec = static_cast<time_t>(left.count() / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(left.count() % 1000000);
  return tv;
}

RedisValue Convert(const redisReply* r) {
  RedisValue v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = RedisValue::Type::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = RedisValue::Type::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = RedisValue::Type::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::Type::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Convert(r->element[i]));
      break;
    default:
      v.type = RedisValue::Type::kNil;
  }
  return v;
}

std::string ContextError(const redisContext* c, const std::string& what) {
  if (c == nullptr) return what + ": out of memory";
  std::string e = c->errstr;
  if (e.find("Resource temporarily unavailable") != std::string::npos) e = "timed out";
  return what + ": " + e;
}

// Connects (within the deadline) and authenticates; the context with a timeout set.
StatusOr<redisContext*> Open(const SharedStoreOptions& options, Deadline deadline,
                             std::vector<std::vector<std::string>>* setup) {
  redisContext* c =
      redisConnectWithTimeout(options.url.host.c_str(), options.url.port, Remaining(deadline));
  if (c == nullptr || c->err) {
    const std::string e = ContextError(c, "connecting to " + options.url.ToString());
    if (c != nullptr) redisFree(c);
    return Status::Unavailable(e);
  }
  // The kernel's keepalive notices a peer that vanished without a word, even on a connection
  // nobody uses (the subscription); FleetFlight's PINGs notice it sooner.
  (void)redisEnableKeepAlive(c);
  if (!options.password.empty()) {
    if (options.url.user.empty())
      setup->push_back({"AUTH", options.password});
    else
      setup->push_back({"AUTH", options.url.user, options.password});
  }
  if (options.url.db != 0) setup->push_back({"SELECT", std::to_string(options.url.db)});
  if (!options.client_name.empty()) {
    std::string name = options.client_name.substr(0, 128);
    for (char& ch : name)
      if (ch <= ' ' || ch > '~') ch = '_';
    setup->push_back({"CLIENT", "SETNAME", name});
  }
  return c;
}

// Sends `commands` on `c` and reads their replies (one round trip).
StatusOr<std::vector<RedisValue>> RoundTrip(redisContext* c,
                                            const std::vector<std::vector<std::string>>& commands,
                                            Deadline deadline, const std::string& where) {
  std::vector<RedisValue> out;
  if (commands.empty()) return out;
  if (redisSetTimeout(c, Remaining(deadline)) != REDIS_OK)
    return Status::Unavailable(ContextError(c, where));
  for (const auto& cmd : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK)
      return Status::Unavailable(ContextError(c, where));
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    void* reply = nullptr;
    if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr)
      return Status::Unavailable(ContextError(c, where));
    out.push_back(Convert(static_cast<redisReply*>(reply)));
    freeReplyObject(reply);
  }
  return out;
}

Status CheckSetupReplies(const std::vector<RedisValue>& replies, const RedisUrl& url) {
  for (const auto& r : replies) {
    if (r.type == RedisValue::Type::kError)
      return Status::Unavailable(url.ToString() + ": " + r.str);
  }
  return Status::OK();
}

}  // namespace

std::string RedisUrl::ToString() const {
  return "redis://" + (user.empty() ? "" : user + "@") + host + ":" + std::to_string(port) +
         (db != 0 ? "/" + std::to_string(db) : "");
}

StatusOr<RedisUrl> ParseRedisUrl(const std::string& url) {
  // The URL as given, but never a password in it.
  std::string shown = url.substr(0, 200);
  if (const auto at = shown.rfind('@'); at != std::string::npos) {
    const auto colon = shown.find(':', shown.find("://") == std::string::npos
                                           ? 0
                                           : shown.find("://") + 3);
    if (colon != std::string::npos && colon < at) shown.replace(colon + 1, at - colon - 1, "***");
  }
  auto bad = [&shown](const std::string& why) {
    return Status::InvalidArgument("--shared-store: " + why + ", got " + Quote(shown) +
                                   " (expected redis://[user@]host:port[/db])");
  };
  const std::string scheme = "redis://";
  if (url.size() > 300) return bad("too long");
  if (url.rfind(scheme, 0) != 0) {
    if (url.rfind("rediss://", 0) == 0)
      return bad("TLS (rediss://) is not supported by this build's hiredis; put a local TLS "
                 "tunnel (stunnel, spiped) in front and point at it");
    return bad("not a redis:// URL");
  }
  std::string rest = url.substr(scheme.size());
  RedisUrl out;
  if (const auto at = rest.rfind('@'); at != std::string::npos) {
    out.user = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (out.user.find(':') != std::string::npos)
      return bad("a password does not go in the URL (every local user can read a command "
                 "line): put it in --shared-store-password-file");
    if (out.user.empty()) return bad("empty user before '@'");
  }
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (db.empty() || db.size() > 5 || db.find_first_not_of("0123456789") != std::string::npos)
      return bad("the database must be a number");
    out.db = std::atoi(db.c_str());
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) return bad("unclosed '['");
    out.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("expected ':' after ']'");
      port = rest.substr(close + 2);
    }
  } else {
    const auto colon = rest.rfind(':');
    out.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
      return bad("the port must be a number");
    out.port = std::atoi(port.c_str());
  }
  if (out.port < 1 || out.port > 65535) return bad("the port must be in 1..65535");
  return out;
}

std::string EncodeWant(const Problem& problem) {
  const std::string bytes = ProblemToProto(problem).SerializeAsString();
  static const char kHex[] = "0123456789abcdef";
  std::string out = "want|";
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::optional<Problem> DecodeWant(const std::string& message) {
  constexpr size_t kPrefix = 5;  // "want|"
  if (message.rfind("want|", 0) != 0 || (message.size() - kPrefix) % 2 != 0 ||
      message.size() > kPrefix + 2048)
    return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string bytes;
  for (size_t i = kPrefix; i < message.size(); i += 2) {
    const int hi = nibble(message[i]), lo = nibble(message[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes += static_cast<char>(hi * 16 + lo);
  }
  pb::Problem msg;
  if (!msg.ParseFromString(bytes)) return std::nullopt;
  auto p = ProblemFromProto(msg);
  if (!p.ok() || !ValidateProblem(*p).ok()) return std::nullopt;
  return *p;
}

std::string SharedChannelFor(const std::string& library_version, const std::string& device_class) {
  return "transposed:v" + std::to_string(kSharedFormat) + ":done:" + library_version + ":" +
         device_class;
}

SharedKeys SharedKeysFor(const std::string& library_version, const std::string& device_class,
                         const Problem& problem) {
  SharedKeys k;
  k.problem_key = problem.Key();
  const std::string base = "transposed:v" + std::to_string(kSharedFormat) + ":{" +
                           library_version + ":" + device_class + ":" + k.problem_key + "}";
  k.result = base + ":r";
  k.lease = base + ":l";
  k.want = base + ":w";
  k.channel = SharedChannelFor(library_version, device_class);
  return k;
}

std::string EncodeSharedEntry(const TuneResult& result) {
  TuneResult winner = result;
  winner.candidates.clear();
  std::string bytes;
  ExportedEntryToProto(winner).SerializeToString(&bytes);
  return bytes;
}

std::string EncodeMedian(double median_s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", median_s);
  return buf;
}

StatusOr<TuneResult> DecodeSharedEntry(const std::string& bytes, const std::string& device_class,
                                       const std::string& library_version,
                                       const Problem& problem) {
  pb::ExportedEntry entry;
  if (bytes.size() > (1 << 20) || !entry.ParseFromString(bytes))
    return Status::InvalidArgument("not a transposed.v1.ExportedEntry (" +
                                   std::to_string(bytes.size()) + " bytes)");
  TR_ASSIGN_OR_RETURN(TuneResult r, ExportedEntryFromProto(entry));
  if (r.device.library_version != library_version)
    return Status::InvalidArgument("measured with kernel library " +
                                   Quote(r.device.library_version) + ", not " +
                                   Quote(library_version));
  if (const std::string cls = ClassOf(r.device).key; cls != device_class)
    return Status::InvalidArgument("measured on device class " + cls + ", not " + device_class);
  if (!(r.problem == problem))
    return Status::InvalidArgument("a result of " + r.problem.ToString() + ", not of " +
                                   problem.ToString());
  return r;
}

StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(
    const SharedStoreOptions& options, Deadline deadline, const std::vector<std::string>& shas) {
  std::vector<std::vector<std::string>> setup;
  TR_ASSIGN_OR_RETURN(redisContext * c, Open(options, deadline, &setup));
  std::unique_ptr<RedisConnection> conn(new RedisConnection());
  conn->context_ = c;
  const size_t first_script = setup.size();
  constexpr size_t kCount = sizeof(kScripts) / sizeof(kScripts[0]);
  const bool load = shas.size() != kCount;
  if (load) {
    for (const char* script : kScripts) setup.push_back({"SCRIPT", "LOAD", script});
    conn->scripts_loaded_ += static_cast<int64_t>(kCount);
  } else {
    conn->shas_ = shas;
    setup.push_back({"PING"});  // proves the connection (and AUTH/SELECT) in the same round trip
  }
  TR_ASSIGN_OR_RETURN(auto replies, RoundTrip(c, setup, deadline, options.url.ToString()));
  TR_RETURN_IF_ERROR(CheckSetupReplies(replies, options.url));
  if (load)
    for (size_t i = first_script; i < replies.size(); ++i) conn->shas_.push_back(replies[i].str);
  return conn;
}

RedisConnection::~RedisConnection() {
  if (context_ != nullptr) redisFree(context_);
}

int RedisConnection::fd() const { return context_->fd; }

std::vector<std::string> RedisConnection::Script(SharedScript script,
                                                 const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"EVALSHA", shas_[static_cast<int>(script)],
                                   std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

StatusOr<std::vector<RedisValue>> RedisConnection::Pipeline(
    const std::vector<std::vector<std::string>>& commands, Deadline deadline) {
  ++round_trips_;
  TR_ASSIGN_OR_RETURN(auto replies, RoundTrip(context_, commands, deadline, "shared store"));
  // NOSCRIPT (a restarted or flushed Redis): the same commands as EVAL, which also caches the
  // script on the server, so the next EVALSHA finds it.
  std::vector<size_t> again;
  std::vector<std::vector<std::string>> evals;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].type != RedisValue::Type::kError || replies[i].str.rfind("NOSCRIPT", 0) != 0 ||
        commands[i].size() < 2 || commands[i][0] != "EVALSHA")
      continue;
    const auto sha = std::find(shas_.begin(), shas_.end(), commands[i][1]);
    if (sha == shas_.end()) continue;
    std::vector<std::string> eval = commands[i];
    eval[0] = "EVAL";
    eval[1] = kScripts[sha - shas_.begin()];
    evals.push_back(std::move(eval));
    again.push_back(i);
  }
  if (evals.empty()) return replies;
  ++round_trips_;
  scripts_loaded_ += static_cast<int64_t>(evals.size());
  TR_ASSIGN_OR_RETURN(auto retried, RoundTrip(context_, evals, deadline, "shared store"));
  for (size_t j = 0; j < again.size(); ++j) replies[again[j]] = std::move(retried[j]);
  return replies;
}

StatusOr<std::unique_ptr<RedisSubscriber>> RedisSubscriber::Connect(
    const SharedStoreOptions& options, const std::vector<std::string>& channels,
    Deadline deadline) {
  std::vector<std::vector<std::string>> setup;
  TR_ASSIGN_OR_RETURN(redisContext * c, Open(options, deadline, &setup));
  std::unique_ptr<RedisSubscriber> sub(new RedisSubscriber());
  sub->context_ = c;
  std::vector<std::string> subscribe = {"SUBSCRIBE"};
  subscribe.insert(subscribe.end(), channels.begin(), channels.end());
  setup.push_back(subscribe);
  auto replies = RoundTrip(c, setup, deadline, "subscribing");
  if (!replies.ok()) return replies.status();
  TR_RETURN_IF_ERROR(CheckSetupReplies(*replies, options.url));
  // SUBSCRIBE answers once per channel: the first was read above, read the others too.
  for (size_t i = 1; i < channels.size(); ++i) {
    void* reply = nullptr;
    if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr)
      return Status::Unavailable(ContextError(c, "subscribing"));
    freeReplyObject(reply);
  }
  return sub;
}

RedisSubscriber::~RedisSubscriber() {
  if (context_ != nullptr) redisFree(context_);
}

int RedisSubscriber::fd() const { return context_->fd; }

Status RedisSubscriber::Read(std::vector<Message>* out) {
  if (redisBufferRead(context_) != REDIS_OK)
    return Status::Unavailable(ContextError(context_, "the subscription"));
  while (true) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(context_, &reply) != REDIS_OK)
      return Status::Unavailable(ContextError(context_, "the subscription"));
    if (reply == nullptr) return Status::OK();
    RedisValue v = Convert(static_cast<redisReply*>(reply));
    freeReplyObject(reply);
    if (v.type == RedisValue::Type::kArray && v.elements.size() == 3 &&
        v.elements[0].str == "message")
      out->push_back(Message{v.elements[1].str, v.elements[2].str});
    else if (v.type == RedisValue::Type::kArray && !v.elements.empty() &&
             v.elements[0].str == "pong")
      ++pongs_;
  }
}

Status RedisSubscriber::Ping() {
  if (redisAppendCommand(context_, "PING") != REDIS_OK)
    return Status::Unavailable(ContextError(context_, "the subscription"));
  // A few bytes on an idle socket: written at once (the send buffer is empty).
  int done = 0;
  for (int i = 0; i < 4 && !done; ++i)
    if (redisBufferWrite(context_, &done) != REDIS_OK)
      return Status::Unavailable(ContextError(context_, "the subscription"));
  if (!done) return Status::Unavailable("the subscription: PING not sent");
  return Status::OK();
}

}  // namespace transposed
