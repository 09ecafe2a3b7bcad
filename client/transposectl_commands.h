// transposectl's subcommands (transposectl.cc parses the command line and calls one of them):
// the flags they share (global connection flags, a problem, an entry filter), how they become
// requests, and one Run function per subcommand. Each prints its result on stdout (text, or JSON
// with --json) and returns the process's exit status: 0 success, 1 the daemon answered with an
// error, 2 usage error, 3 the daemon could not be reached (UNAVAILABLE).
//
// Thread-safety: none needed; transposectl's main thread calls them, one per run.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "client/client.h"

namespace transposed::ctl {

struct Globals {
  std::string server;
  std::string servers_file;
  bool json = false;
  double timeout = 600;
  int parallel = 16;
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  std::string token_file;
};

struct ProblemFlags {
  int64_t rows = 0;
  int64_t cols = 0;
  std::string dtype;
  int64_t batch = 1;
  int64_t ld_in = 0;
  int64_t ld_out = 0;
  std::string device;
  bool value_exact = false;
  CLI::Option* batch_opt = nullptr;
  CLI::Option* device_opt = nullptr;
};

struct FilterFlags {
  std::string device;
  std::string fingerprint;
  std::string dtype;
  int64_t rows = 0;
  int64_t cols = 0;
  std::string variant;
  std::string library_version;
  double older_than_days = -1;
  CLI::Option* device_opt = nullptr;
  CLI::Option* older_opt = nullptr;
};

// Range checks with a plain message ("--timeout: must be more than 0 seconds, got 0"; CLI11's
// own PositiveNumber prints its range with a 309-digit bound).
CLI::Validator Above(double lo, const std::string& unit);
CLI::Validator AtLeast(double lo, const std::string& unit);

// The transport and token flags as client options. The token file holds one line.
StatusOr<ClientOptions> ConnectionOptions(const Globals& g);
// --rows, --cols, --dtype (required unless `required` is false), --batch, --ld-in, --ld-out,
// --device and --value-exact on `cmd`.
void AddProblemFlags(CLI::App* cmd, ProblemFlags* f, bool required = true);
// The entry filter flags of list and delete on `cmd`.
void AddFilterFlags(CLI::App* cmd, FilterFlags* f);
// Prints "transposectl: <message>" on stderr; returns 2.
int Usage(const std::string& message);
// Prints "transposectl: CODE: message" on stderr, with a hint line when the status says what went
// wrong on the way to the daemon: nothing listens at the address (how to start one), or the
// connection closed during a plaintext call (the daemon may require TLS: --tls-ca). Returns 3
// for UNAVAILABLE, else 1.
int Fail(const Status& s);
// get: one GetConfig with `policy`.
int RunGet(Client& client, const Globals& g, const ProblemFlags& f, v1::CachePolicy policy);
// `tune --from FILE`: pre-tunes every problem of the file through TuneMany, in calls of at most
// kMaxTuneManyProblems: the daemon skips the cached ones and tunes the others one after the
// other (joining a tune of the same problem in flight); with --force it re-tunes them all
// (admin). A progress bar on a terminal (stderr); with --json one transposed.v1.Answer per
// problem on stdout (the one JSON mapping, proto/json.h). With --value-exact, every problem of the
// file asks for value-exact answers (a JSON line may also set "exactness"). With --background the
// tunes are polite (docs/user/polite.md: they yield to other work on a busy GPU, and one abandoned
// fails as UNAVAILABLE). Exit 1 if any problem failed.
int RunTuneFrom(Client& client, const Globals& g, const std::string& path, double budget,
                bool exhaustive, bool force, bool background, bool value_exact);
// tune (one problem): streams the candidates, then the answer.
int RunTune(Client& client, const Globals& g, const ProblemFlags& f, double budget,
            bool exhaustive);
// devices, list, delete, export (JSON lines on stdout), import (a file or - for stdin).
int RunDevices(Client& client, const Globals& g);
int RunList(Client& client, const Globals& g, const FilterFlags& f, bool candidates, int limit);
int RunDelete(Client& client, const Globals& g, const FilterFlags& f, bool all);
int RunExport(Client& client, const std::string& device_class);
int RunImport(Client& client, const Globals& g, const std::string& path);
// With several daemons: list, devices or get --cache-only on each, merged (client/fleet.h).
int RunFleet(const std::vector<std::string>& servers, const Globals& g, CLI::App* get,
             const ProblemFlags& get_flags, bool cache_only, CLI::App* devices, CLI::App* list,
             const FilterFlags& list_flags, bool candidates, int limit);

}  // namespace transposed::ctl
