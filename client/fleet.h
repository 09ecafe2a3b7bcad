// Fleet: one question asked of many daemons at once (`transposectl --server a,b,c` or
// `--servers-file FILE`), the answers merged into rows that each name the daemon they came from.
//
// FanOut runs one call per daemon on a bounded pool of threads, each with its own Client (and so
// its own deadline); a daemon that fails becomes an error row, the others still answer. The
// merged result is a v1::FleetReply (proto/transposed/v1/fleet.proto), printed as text by
// FleetToText or as JSON by protobuf's JSON printer (FleetToJson).
//
// Thread-safety: the functions are reentrant; FanOut calls `call` from several threads at once,
// each time with a different Client.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/status.h"
#include "transposed/v1/fleet.pb.h"

namespace transposed {

// At most this many daemons in one fleet question, and this many asked at once.
inline constexpr size_t kMaxFleetNodes = 4096;
inline constexpr int kMaxFleetParallelism = 64;

// "a:1,b:2, c:3" -> {"a:1","b:2","c:3"}: trimmed, duplicates dropped (first kept).
// INVALID_ARGUMENT naming `field` for an empty element or too many daemons.
StatusOr<std::vector<std::string>> ParseServerList(const std::string& list,
                                                   const std::string& field = "--server");
// One address per line; blank lines and lines starting with '#' are skipped. NOT_FOUND when the
// file cannot be read, INVALID_ARGUMENT (naming the file and line) for a line with a space.
StatusOr<std::vector<std::string>> ReadServersFile(const std::string& path);

struct FleetOptions {
  ClientOptions client;  // for every daemon
  int parallelism = 16;  // daemons asked at once, 1..kMaxFleetParallelism
};

// What one daemon answered: the rows it contributed (their `node` is filled in by FanOut), or
// its error.
struct NodeResult {
  std::string node;
  Status status;
  std::vector<v1::FleetRow> rows;
};
using NodeCall = std::function<Status(Client& client, std::vector<v1::FleetRow>* rows)>;

// Calls `call` once per address (concurrently, at most options.parallelism at a time) and returns
// the results in the order of `addresses`.
std::vector<NodeResult> FanOut(const std::vector<std::string>& addresses,
                               const FleetOptions& options, const NodeCall& call);

enum class FleetOrder {
  kNodeOrder,    // rows in the order of the daemons, each daemon's rows as it sent them
  kNewestFirst,  // entries: by tuned_at_unix_ms descending across daemons (ties: node order)
};
// Merges the results into one reply: rows ordered by `order`, one error row per failed daemon
// (after the data rows). A NOT_FOUND counts as `missed` when `not_found_is_miss` (get
// --cache-only), as `failed` otherwise.
v1::FleetReply MergeFleet(const std::vector<NodeResult>& results, FleetOrder order,
                          bool not_found_is_miss);

// One line per row: "NODE  <the single-daemon text of the row>", then a summary line.
std::string FleetToText(const v1::FleetReply& reply, const std::string& what);
// The reply in the one JSON mapping (proto/json.h), indented.
StatusOr<std::string> FleetToJson(const v1::FleetReply& reply);

}  // namespace transposed
