// transposectl: the command-line client of the transposed daemon.
//
//   transposectl [--server ADDR] [--json] [--timeout S] get  --rows R --cols C --dtype T ...
//   transposectl tune --rows R --cols C --dtype T [--budget S] [--exhaustive]
//   transposectl tune --from FILE|- [--budget S] [--exhaustive] [--force | --background]
//   transposectl devices
//   transposectl list   [filters] [--candidates] [--limit N]
//   transposectl delete [filters] [--all]
//   transposectl export [--device-class C] > results.jsonl
//   transposectl import results.jsonl|-
//
// Many daemons at once: --server a:1,b:2 (or --servers-file FILE) asks every daemon in parallel
// for `list`, `devices` or `get --cache-only` and merges the rows, each naming its daemon
// (client/fleet.h); --json prints the merged v1::FleetReply through protobuf's JSON printer.
//
// Exit status: 0 success, 1 the daemon answered with an error, 2 usage error, 3 the daemon could
// not be reached (UNAVAILABLE). Errors go to stderr as "transposectl: CODE: message".
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/completion.h"
#include "client/fleet.h"
#include "client/format.h"
#include "client/transposectl_commands.h"
#include "core/suggest.h"
#include "core/version.h"
#include "proto/exported_entry_json.h"

namespace transposed {
namespace {

constexpr char kDefaultServer[] = "127.0.0.1:50051";

using ctl::AddFilterFlags;
using ctl::AddProblemFlags;
using ctl::ConnectionOptions;
using ctl::FilterFlags;
using ctl::Globals;
using ctl::ProblemFlags;
using ctl::RunDelete;
using ctl::RunDevices;
using ctl::RunExport;
using ctl::RunFleet;
using ctl::RunGet;
using ctl::RunImport;
using ctl::RunList;
using ctl::RunTune;
using ctl::RunTuneFrom;
using ctl::Usage;

// The first word of the command line that is not an option or an option's value, if it names no
// subcommand: "unknown command 'gett' (did you mean 'get'?)". Empty when the line is fine.
std::string UnknownCommand(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return "";
    if (arg.rfind("-", 0) == 0) {
      if (arg.find('=') != std::string::npos) continue;
      const CLI::Option* o = app.get_option_no_throw(arg);
      if (o != nullptr && o->get_items_expected_min() > 0 && i + 1 < argc) ++i;  // its value
      continue;
    }
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(arg)) return "";
    std::string message = "unknown command '" + arg + "'";
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    const std::string best = ClosestName(arg, names);
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    message += "; commands:";
    for (const CLI::App* sub : app.get_subcommands({})) message += " " + sub->get_name();
    return message;
  }
  return "";
}

// After CLI11 refused the line: the first flag that neither transposectl nor the command knows,
// with the flag it probably meant: "unknown flag '--rwos' (did you mean '--rows'?)". Empty when
// every flag is known (the error was something else). `near_global_only`: only an unknown flag
// near one of transposectl's own (before a command word: "--servr x devices").
std::string UnknownFlag(CLI::App& app, int argc, char** argv, bool near_global_only = false) {
  const CLI::App* command = nullptr;
  for (int i = 1; i < argc && command == nullptr; ++i)
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(argv[i])) command = sub;
  std::vector<std::string> names;
  for (const CLI::App* a : {static_cast<const CLI::App*>(&app), command}) {
    if (a == nullptr || (near_global_only && a != &app)) continue;
    for (const CLI::Option* o : a->get_options())
      for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(names.begin(), names.end(), arg) != names.end()) continue;
    if (near_global_only && command != nullptr && command->get_option_no_throw(arg) != nullptr)
      continue;
    std::string message = "unknown flag '" + arg + "'";
    const std::string best = ClosestName(arg, names);
    if (near_global_only && best.empty()) continue;
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    return message + "; see transposectl " + (command ? command->get_name() + " " : "") + "--help";
  }
  return "";
}

int Main(int argc, char** argv) {
  Globals g;
  const char* env = std::getenv("TRANSPOSED_SERVER");
  g.server = (env != nullptr && *env != '\0') ? env : kDefaultServer;

  // The name, not argv[0]: usage lines show "transposectl", not the path it was started by.
  CLI::App app{"transposectl: ask the transposed daemon for the best GPU transpose configuration",
               "transposectl"};
  app.require_subcommand(1);
  // Global flags are accepted after the subcommand too ("transposectl devices --json").
  app.fallthrough();
  const std::string version =
      std::string("transposectl ") + kProjectVersion + " (kernel library " + kLibraryVersion + ")";
  app.set_version_flag("--version", version);
  app.add_option("--server", g.server,
                 "Daemon address HOST:PORT, or several separated by commas (env TRANSPOSED_SERVER)")
      ->capture_default_str();
  app.add_option("--servers-file", g.servers_file,
                 "File with one daemon address per line (# comments): ask them all")
      ->type_name("FILE");
  app.add_option("--parallel", g.parallel, "With several daemons: how many are asked at once")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxFleetParallelism));
  app.add_flag("--json", g.json, "Print JSON instead of text");
  app.add_flag("--tls", g.tls, "Connect with TLS (implied by --tls-ca and --tls-cert)");
  app.add_option("--tls-ca", g.tls_ca, "PEM CA that signed the daemon's certificate")
      ->type_name("FILE");
  app.add_option("--tls-cert", g.tls_cert, "PEM client certificate (mutual TLS)")
      ->type_name("FILE");
  app.add_option("--tls-key", g.tls_key, "PEM private key of --tls-cert")
      ->type_name("FILE");
  app.add_option("--tls-server-name", g.tls_server_name,
                 "Name the daemon's certificate must carry (default: the host of --server)");
  const char* token_env = std::getenv("TRANSPOSED_TOKEN_FILE");
  if (token_env != nullptr) g.token_file = token_env;
  app.add_option("--token-file", g.token_file,
                 "File with the daemon's admin token, needed by tune, delete, export, import and "
                 "tune --from --force (env TRANSPOSED_TOKEN_FILE)")
      ->type_name("FILE");
  app.add_option("--timeout", g.timeout, "Deadline of the call in seconds")
      ->capture_default_str()
      ->check(ctl::Above(0, "seconds"));

  ProblemFlags get_flags;
  bool cache_only = false;
  CLI::App* get = app.add_subcommand("get", "Best configuration for a problem (tunes on a miss)");
  AddProblemFlags(get, &get_flags);
  bool answer_now = false;
  auto* cache_only_flag =
      get->add_flag("--cache-only", cache_only, "Do not tune on a miss: NOT_FOUND instead");
  get->add_flag("--answer-now", answer_now,
                "Never wait: on a miss answer at once (nearest stored problem's winner, else the "
                "heuristic default) and tune in the background")
      ->excludes(cache_only_flag);

  ProblemFlags tune_flags;
  double budget = 0;
  bool exhaustive = false;
  std::string tune_from;
  CLI::App* tune = app.add_subcommand(
      "tune", "Tune a problem now, streaming the candidates; or pre-tune a list (--from)");
  AddProblemFlags(tune, &tune_flags, /*required=*/false);
  tune->add_option("--from", tune_from,
                   "File of problems, one per line: ROWS COLS DTYPE [BATCH] or a JSON Problem "
                   "(- for stdin); tunes those not cached yet, skips the others")
      ->type_name("FILE");
  tune->add_option("--budget", budget, "Tuning budget in seconds (0: the daemon's default)")
      ->check(ctl::AtLeast(0, "seconds"));
  tune->add_flag("--exhaustive", exhaustive, "Measure every candidate long (slow)");
  bool force = false;
  tune->add_flag("--force", force,
                 "With --from: re-tune the cached problems too (admin, as a single tune)");
  bool background = false;
  tune->add_flag("--background", background,
                 "With --from: tune politely, yielding to other work on a busy GPU (a prolog "
                 "beside running jobs; docs/user/polite.md)")
      ->excludes("--force");

  CLI::App* devices = app.add_subcommand("devices", "List the daemon's devices");

  FilterFlags list_flags;
  bool candidates = false;
  int limit = 0;
  CLI::App* list = app.add_subcommand("list", "List cached entries");
  AddFilterFlags(list, &list_flags);
  list->add_flag("--candidates", candidates, "Show every measured candidate of each entry");
  list->add_option("--limit", limit, "At most N entries (0: all)")
      ->check(ctl::AtLeast(0, "entries"));

  FilterFlags delete_flags;
  bool all = false;
  CLI::App* del = app.add_subcommand("delete", "Delete cached entries matching the filters");
  AddFilterFlags(del, &delete_flags);
  del->add_flag("--all", all, "Required to delete with an empty filter");

  std::string export_class;
  CLI::App* exp = app.add_subcommand(
      "export", "Write every stored entry with all its candidates, one JSON object per line");
  exp->add_option("--device-class", export_class, "Only entries of this device class");

  std::string import_path;
  CLI::App* imp = app.add_subcommand(
      "import", "Merge entries written by export (faster winner kept, never a downgrade)");
  imp->add_option("file", import_path, "The file export wrote (- for stdin)")
      ->required()
      ->type_name("FILE");

  std::string shell;
  CLI::App* completion = app.add_subcommand(
      "completion",
      "Print a shell completion script (bash, zsh, fish): source <(transposectl completion bash)");
  completion->add_option("shell", shell, "The shell: bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember(transposed::CompletionShells()));

  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Show the commands, or one command's flags");
  help->add_option("command", help_topic, "The command");
  CLI::App* version_cmd = app.add_subcommand("version", "Print the version");

  if (const std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
    // "--servr x devices": the flag is the mistake ('x' only looks like a command after it).
    const std::string flag = UnknownFlag(app, argc, argv, /*near_global_only=*/true);
    return Usage(flag.empty() ? unknown : flag);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An unknown flag first: "--rwos" is the mistake, not the --rows it left out.
    if (e.get_exit_code() != 0) {
      if (const std::string unknown = UnknownFlag(app, argc, argv); !unknown.empty())
        return Usage(unknown);
    }
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (help->parsed()) {
    if (help_topic.empty()) {
      // app.help() would show the selected subcommand (help itself): the formatter, for the app.
      std::cout << app.get_formatter()->make_help(&app, "transposectl", CLI::AppFormatMode::Normal);
      return 0;
    }
    for (CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(help_topic)) {
        std::cout << sub->help("transposectl");
        return 0;
      }
    return Usage(UnknownCommand(app, 2, std::vector<char*>{argv[0], help_topic.data()}.data()));
  }
  if (version_cmd->parsed()) {
    std::cout << version << std::endl;
    return 0;
  }
  if (completion->parsed()) {
    std::cout << transposed::CompletionScript(app, shell);
    return 0;
  }

  std::vector<std::string> servers;
  if (!g.servers_file.empty()) {
    auto from_file = ReadServersFile(g.servers_file);
    if (!from_file.ok()) return Usage(from_file.status().ToString());
    servers = std::move(from_file).value();
  } else {
    auto parsed = ParseServerList(g.server);
    if (!parsed.ok()) return Usage(parsed.status().ToString());
    servers = std::move(parsed).value();
  }
  if (servers.size() > 1 || !g.servers_file.empty()) {
    if (tune->parsed() || del->parsed() || exp->parsed() || imp->parsed()) {
      return Usage(std::string(tune->parsed()  ? "tune"
                               : del->parsed() ? "delete"
                               : exp->parsed() ? "export"
                                               : "import") +
                   ": asks one daemon; with several (--server a,b or --servers-file) only list, "
                   "devices and get --cache-only are allowed");
    }
    return RunFleet(servers, g, get, get_flags, cache_only, devices, list, list_flags, candidates,
                    limit);
  }

  auto options = ConnectionOptions(g);
  if (!options.ok()) return Usage(options.status().ToString());
  auto client = Client::Connect(servers.front(), *options);
  if (!client.ok()) return Usage(client.status().ToString());
  Client& c = **client;

  if (get->parsed())
    return RunGet(c, g, get_flags,
                  cache_only ? v1::CACHE_ONLY : answer_now ? v1::ANSWER_NOW : v1::TUNE_IF_MISSING);
  if (tune->parsed() && !tune_from.empty())
    return RunTuneFrom(c, g, tune_from, budget, exhaustive, force, background,
                       tune_flags.value_exact);
  if (tune->parsed() && force)
    return Usage("tune: --force goes with --from (a single tune always re-tunes)");
  if (tune->parsed() && background)
    return Usage("tune: --background goes with --from (a single tune is waited for)");
  if (tune->parsed()) {
    if (tune->get_option("--rows")->count() == 0 || tune->get_option("--cols")->count() == 0 ||
        tune->get_option("--dtype")->count() == 0)
      return Usage("tune: --rows, --cols and --dtype are required (or --from FILE)");
    return RunTune(c, g, tune_flags, budget, exhaustive);
  }
  if (devices->parsed()) return RunDevices(c, g);
  if (list->parsed()) return RunList(c, g, list_flags, candidates, limit);
  if (del->parsed()) return RunDelete(c, g, delete_flags, all);
  if (exp->parsed()) return RunExport(c, export_class);
  if (imp->parsed()) return RunImport(c, g, import_path);
  return Usage("no subcommand");
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) { return transposed::Main(argc, argv); }
