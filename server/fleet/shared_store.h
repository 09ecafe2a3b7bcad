// The shared store's Redis side: the URL of --shared-store, the keys and the one value format of
// a shared winner, and two hiredis connections (commands, pipelined; and the subscription that
// hears of new winners). server/fleet/fleet_flight.h drives them from one thread.
//
// Layout (format 1; the format is part of every key, so another format never collides):
//   transposed:v1:{<library>:<class>:<problem key>}:r  hash  f = "1" (format), m = the winner's
//       median seconds (%.17g: the Lua scripts compare it, lower is faster), e = the winner as a
//       binary transposed.v1.ExportedEntry without its candidates (ExportedEntryToProto, read
//       back through ExportedEntryFromProto: one mapping, validated like any import).
//   transposed:v1:{...}:l  string  the lease holder's token, with a TTL (SET NX PX).
//   transposed:v1:{...}:w  string  "1" while a `want` of the problem was published (one per
//       lease life, whatever the number of nodes that ask: kFetchOrWant).
//   channel transposed:v1:done:<library>:<class>  message: the problem key, when a winner is
//       written or a lease given up (never for a publish that changed nothing); or
//       "want|<problem>" (EncodeWant) when a busy node asks
//       the class's idle nodes to tune a problem (server/polite.h).
// The braces are a Redis Cluster hash tag: a problem's two keys always share a slot.
//
// Every command goes through a Lua script, so each step is one atomic round trip: fetch-or-lease,
// publish-if-faster, renew (or retake), release. Scripts run by hash (EVALSHA): loaded (SCRIPT
// LOAD) by a daemon's first connection only; a later connection reuses the hashes, and a script
// the server does not have (NOSCRIPT: a restarted or flushed Redis) is sent once as EVAL, which
// caches it there.
//
// Thread-compatible: one thread drives a connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tune_result.h"

struct redisContext;

namespace transposed {

// redis://[user@]host:port[/db]. The password never appears here (it is read from a file).
struct RedisUrl {
  std::string user;
  std::string host;
  int port = 6379;
  int db = 0;
  std::string ToString() const;  // without any secret
};
// INVALID_ARGUMENT "--shared-store: ..." for anything else, including a URL with a password
// (user:password@): a password on the command line is visible to every local user.
StatusOr<RedisUrl> ParseRedisUrl(const std::string& url);

struct SharedStoreOptions {
  RedisUrl url;
  std::string password;          // empty: no AUTH
  // Connect, and each round trip. 0.5 s: a Redis 200 ms away (or busy with a 1,000-node burst)
  // is still used; a hung one costs a new miss at most this once.
  double timeout_seconds = 0.5;
  std::string client_name;  // CLIENT SETNAME (spaces replaced); empty: none
};

inline constexpr int kSharedFormat = 1;

struct SharedKeys {
  std::string result;
  std::string lease;
  std::string want;
  std::string channel;
  std::string problem_key;
};
SharedKeys SharedKeysFor(const std::string& library_version, const std::string& device_class,
                         const Problem& problem);
// The channel of a class's notifications.
std::string SharedChannelFor(const std::string& library_version, const std::string& device_class);

// The message by which a busy node asks its class's idle nodes to tune `problem`: "want|" and
// the problem (a binary transposed.v1.Problem, hex); DecodeWant: the problem of such a message
// (validated), nullopt for any other message (a done notification's problem key).
std::string EncodeWant(const Problem& problem);
std::optional<Problem> DecodeWant(const std::string& message);

// The `e` field of a result (candidates left out: they stay on the node that measured them).
std::string EncodeSharedEntry(const TuneResult& result);
// The median_s the scripts compare, as written in `m`.
std::string EncodeMedian(double median_s);
// A stored `e` back into a result, refused (INVALID_ARGUMENT saying why) unless it parses,
// validates, and is of exactly this class, problem and kernel library version.
StatusOr<TuneResult> DecodeSharedEntry(const std::string& bytes, const std::string& device_class,
                                       const std::string& library_version,
                                       const Problem& problem);

// One reply, owned.
struct RedisValue {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  long long integer = 0;
  std::vector<RedisValue> elements;
};

// The scripts, by name, for RedisConnection::Script.
enum class SharedScript { kFetchOrLease, kPublish, kRenew, kRelease, kFetchOrWant };

using Deadline = std::chrono::steady_clock::time_point;

// A command connection. Connect() authenticates, selects the db, names the client and either
// loads the scripts (`shas` empty) or takes their hashes from `shas` (a earlier connection's
// shas()), all in one round trip. Any I/O error or timeout breaks the connection (hiredis
// contexts cannot continue after one): make a new one.
class RedisConnection {
 public:
  static StatusOr<std::unique_ptr<RedisConnection>> Connect(
      const SharedStoreOptions& options, Deadline deadline,
      const std::vector<std::string>& shas = {});
  ~RedisConnection();
  const std::vector<std::string>& shas() const { return shas_; }
  int fd() const;
  // SCRIPT LOAD and EVAL (the NOSCRIPT fallback) commands this connection sent.
  int64_t scripts_loaded() const { return scripts_loaded_; }

  // The argv of EVALSHA for a script, its keys and arguments.
  std::vector<std::string> Script(SharedScript script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) const;
  // Sends every command at once and reads every reply: one round trip. UNAVAILABLE (the
  // connection is then broken) on an I/O error or when `deadline` passes. Error replies are
  // returned as values, not as a failed Status. An EVALSHA answered NOSCRIPT is sent again as
  // EVAL with the script (a second round trip, same deadline).
  StatusOr<std::vector<RedisValue>> Pipeline(const std::vector<std::vector<std::string>>& commands,
                                             Deadline deadline);
  int64_t round_trips() const { return round_trips_; }

 private:
  RedisConnection() = default;
  redisContext* context_ = nullptr;
  std::vector<std::string> shas_;  // by SharedScript
  int64_t round_trips_ = 0;
  int64_t scripts_loaded_ = 0;
};

// The subscription to the classes' channels. fd() is polled by the caller; Read() takes the
// messages that arrived (never blocks once poll said readable); Ping() asks the server for a
// "pong" (counted by pongs() when Read() sees it): a subscription that stays silent after one is
// dead.
class RedisSubscriber {
 public:
  static StatusOr<std::unique_ptr<RedisSubscriber>> Connect(
      const SharedStoreOptions& options, const std::vector<std::string>& channels,
      Deadline deadline);
  ~RedisSubscriber();
  int fd() const;
  struct Message {
    std::string channel;
    std::string payload;
  };
  // Appends the messages received; UNAVAILABLE when the connection closed or failed.
  Status Read(std::vector<Message>* out);
  // Sends PING (non-blocking; UNAVAILABLE when the socket cannot take it).
  Status Ping();
  int64_t pongs() const { return pongs_; }

 private:
  RedisSubscriber() = default;
  redisContext* context_ = nullptr;
  int64_t pongs_ = 0;
};

}  // namespace transposed
