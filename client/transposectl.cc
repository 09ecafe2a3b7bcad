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

#include <unistd.h>

#include "client/client.h"
#include "client/completion.h"
#include "client/fleet.h"
#include "client/format.h"
#include "core/version.h"
#include "proto/exported_entry_json.h"

namespace transposed {
namespace {

constexpr char kDefaultServer[] = "127.0.0.1:50051";

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

// The transport and token flags as client options. The token file holds one line.
StatusOr<ClientOptions> ConnectionOptions(const Globals& g) {
  ClientOptions o;
  o.deadline_seconds = g.timeout;
  o.tls = g.tls;
  o.tls_ca_file = g.tls_ca;
  o.tls_cert_file = g.tls_cert;
  o.tls_key_file = g.tls_key;
  o.tls_server_name = g.tls_server_name;
  if (!g.token_file.empty()) {
    std::ifstream in(g.token_file);
    std::string token;
    if (!in || !std::getline(in, token))
      return Status::InvalidArgument("--token-file: cannot read " + g.token_file);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.empty()) return Status::InvalidArgument("--token-file: " + g.token_file + " is empty");
    o.token = token;
  }
  return o;
}

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

void AddProblemFlags(CLI::App* cmd, ProblemFlags* f, bool required = true) {
  cmd->add_option("--rows", f->rows, "Rows of each input matrix")->required(required);
  cmd->add_option("--cols", f->cols, "Columns of each input matrix")->required(required);
  cmd->add_option("--dtype", f->dtype, "Element type: f16 bf16 f32 f64 i8 u8 i16 i32 i64 c64 c128")
      ->required(required);
  f->batch_opt = cmd->add_option("--batch", f->batch, "Number of matrices (default 1)");
  cmd->add_option("--ld-in", f->ld_in, "Input row stride in elements (0: dense)");
  cmd->add_option("--ld-out", f->ld_out, "Output row stride in elements (0: dense)");
  f->device_opt = cmd->add_option("--device", f->device, "Device index or UUID (default 0)");
  cmd->add_flag("--value-exact", f->value_exact,
                "Accept an answer that may change NaN payloads (every other element bit-exact): "
                "admits cuBLAS geam for f32/f64; cached apart from the bit-exact answer");
}

void AddFilterFlags(CLI::App* cmd, FilterFlags* f) {
  f->device_opt = cmd->add_option("--device", f->device, "Device index or UUID of this daemon");
  cmd->add_option("--fingerprint", f->fingerprint, "Device fingerprint (also of absent devices)");
  cmd->add_option("--dtype", f->dtype, "Element type");
  cmd->add_option("--rows", f->rows, "Rows");
  cmd->add_option("--cols", f->cols, "Columns");
  cmd->add_option("--variant", f->variant, "Variant name");
  cmd->add_option("--library-version", f->library_version, "Kernel library version");
  f->older_opt =
      cmd->add_option("--older-than-days", f->older_than_days, "Entries tuned more than D days ago")
          ->check(CLI::NonNegativeNumber);
}

v1::Problem BuildProblem(const ProblemFlags& f) {
  v1::Problem p;
  p.set_rows(f.rows);
  p.set_cols(f.cols);
  p.set_dtype(f.dtype);
  if (f.batch_opt->count() > 0) p.set_batch(f.batch);
  p.set_ld_in(f.ld_in);
  p.set_ld_out(f.ld_out);
  if (f.device_opt->count() > 0) *p.mutable_device() = DeviceFromString(f.device);
  if (f.value_exact) p.set_exactness(v1::EXACTNESS_VALUE);
  return p;
}

v1::EntryFilter BuildFilter(const FilterFlags& f) {
  v1::EntryFilter filter;
  if (f.device_opt->count() > 0) *filter.mutable_device() = DeviceFromString(f.device);
  filter.set_device_fingerprint(f.fingerprint);
  filter.set_dtype(f.dtype);
  filter.set_rows(f.rows);
  filter.set_cols(f.cols);
  filter.set_variant(f.variant);
  filter.set_library_version(f.library_version);
  if (f.older_opt->count() > 0) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    filter.set_tuned_before_unix_ms(now_ms -
                                    static_cast<int64_t>(f.older_than_days * 86400.0 * 1000.0));
  }
  return filter;
}

bool FilterEmpty(const v1::EntryFilter& f) {
  return f.device_fingerprint().empty() && !f.has_device() && f.dtype().empty() && f.rows() == 0 &&
         f.cols() == 0 && f.variant().empty() && f.tuned_before_unix_ms() == 0 &&
         f.library_version().empty();
}

int Fail(const Status& s) {
  std::cerr << "transposectl: " << s.ToString() << std::endl;
  return s.code() == StatusCode::kUnavailable ? 3 : 1;
}

int Usage(const std::string& message) {
  std::cerr << "transposectl: " << message << std::endl;
  return 2;
}

int RunGet(Client& client, const Globals& g, const ProblemFlags& f, v1::CachePolicy policy) {
  auto answer = client.GetConfig(BuildProblem(f), policy);
  if (!answer.ok()) return Fail(answer.status());
  if (g.json) {
    std::cout << AnswerToJson(*answer).dump(2) << std::endl;
  } else {
    std::cout << AnswerToText(*answer);
  }
  return 0;
}

// One problem of a `tune --from` file: "ROWS COLS DTYPE [BATCH]" or a transposed.v1.Problem in
// protobuf JSON ({"rows": 4096, "cols": 4096, "dtype": "f32"}).
StatusOr<v1::Problem> ParseProblemLine(const std::string& line) {
  v1::Problem p;
  if (line.front() == '{') {
    auto s = google::protobuf::util::JsonStringToMessage(line, &p);
    if (!s.ok()) return Status::InvalidArgument("not a transposed.v1.Problem: " + s.ToString());
    return p;
  }
  std::istringstream in(line);
  int64_t rows = 0, cols = 0, batch = 0;
  std::string dtype, rest;
  if (!(in >> rows >> cols >> dtype))
    return Status::InvalidArgument("expected ROWS COLS DTYPE [BATCH] or a JSON Problem");
  if (in >> batch) p.set_batch(batch);
  if (in >> rest) return Status::InvalidArgument("unexpected '" + rest + "' after the problem");
  p.set_rows(rows);
  p.set_cols(cols);
  p.set_dtype(dtype);
  return p;
}

// `tune --from FILE`: pre-tunes every problem of the file through TuneMany, in calls of at most
// kMaxTuneManyProblems: the daemon skips the cached ones and tunes the others one after the
// other (joining a tune of the same problem in flight); with --force it re-tunes them all
// (admin). A progress bar on a terminal (stderr); with --json one transposed.v1.Answer per
// problem on stdout (protobuf's JSON printer). With --value-exact, every problem of the file asks
// for value-exact answers (a JSON line may also set "exactness"). With --background the tunes
// are polite (docs/user/polite.md: they yield to other work on a busy GPU, and one abandoned
// fails as UNAVAILABLE). Exit 1 if any problem failed.
int RunTuneFrom(Client& client, const Globals& g, const std::string& path, double budget,
                bool exhaustive, bool force, bool background, bool value_exact) {
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) return Usage("--from: cannot read " + path);
  }
  std::istream& in = path == "-" ? std::cin : file;
  struct Line {
    int number;
    v1::Problem problem;
  };
  std::vector<Line> problems;
  std::string line;
  int errors = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    line = line.substr(start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    auto p = ParseProblemLine(line);
    if (!p.ok()) {
      std::cerr << "transposectl: " << path << ":" << number << ": " << p.status().message()
                << std::endl;
      ++errors;
      continue;
    }
    if (problems.size() >= 100000) return Usage("--from: more than 100000 problems");
    if (value_exact) p->set_exactness(v1::EXACTNESS_VALUE);
    problems.push_back({number, std::move(p).value()});
  }
  if (errors > 0) return 2;
  const bool bar = isatty(STDERR_FILENO) != 0;
  google::protobuf::util::JsonPrintOptions json;
  json.preserve_proto_field_names = true;
  size_t answered = 0;
  int tuned = 0, cached = 0, failed = 0;
  for (size_t first = 0; first < problems.size(); first += kMaxTuneManyProblems) {
    const size_t end = std::min(problems.size(), first + kMaxTuneManyProblems);
    v1::TuneManyRequest request;
    for (size_t i = first; i < end; ++i) *request.add_problems() = problems[i].problem;
    request.set_budget_seconds(budget);
    request.set_exhaustive(exhaustive);
    request.set_force(force);
    request.set_background(background);
    Status s = client.TuneMany(request, [&](const v1::TuneManyProgress& m) -> Status {
      const size_t i = first + static_cast<size_t>(m.problem_index());
      if (m.problem_index() < 0 || i >= end)
        return Status::Internal("TuneMany answered for problem_index " +
                                std::to_string(m.problem_index()) + " of a call of " +
                                std::to_string(end - first));
      const std::string where = path + ":" + std::to_string(problems[i].number) + ": " +
                                ProblemLabel(problems[i].problem);
      if (m.has_error()) {
        ++failed, ++answered;
        if (bar) std::cerr << "\r\033[K";
        const grpc::Status e(static_cast<grpc::StatusCode>(m.error().code()), m.error().message());
        std::cerr << "transposectl: " << where << ": " << FromGrpcStatus(e).ToString()
                  << std::endl;
        return Status::OK();
      }
      const v1::TuneProgress& p = m.progress();
      if (!p.has_answer()) {
        if (bar) {
          const size_t width = 30, done = width * answered / problems.size();
          std::cerr << "\r[" << std::string(done, '#') << std::string(width - done, ' ') << "] "
                    << answered << "/" << problems.size() << " tuning "
                    << ProblemLabel(problems[i].problem) << " (" << p.candidate().phase() << " "
                    << p.index() << "/" << p.total() << ")\033[K" << std::flush;
        }
        return Status::OK();
      }
      ++answered;
      const v1::Answer& answer = p.answer();
      (answer.source() == v1::SOURCE_CACHE ? cached : tuned) += 1;
      if (g.json) {
        std::string out;
        (void)google::protobuf::util::MessageToJsonString(answer, &out, json);
        std::cout << out << std::endl;
      } else if (!bar) {
        std::cout << ProblemLabel(problems[i].problem) << ": " << answer.variant().name() << " "
                  << (answer.source() == v1::SOURCE_CACHE ? "(cached, skipped)" : "(tuned)")
                  << std::endl;
      }
      return Status::OK();
    });
    if (!s.ok()) {
      if (bar) std::cerr << "\r\033[K";
      // "problems[3].rows: ..." names a problem of this call: say which line it came from.
      std::smatch m;
      if (std::regex_search(s.message(), m, std::regex(R"(^problems\[(\d+)\])")) &&
          first + std::stoul(m[1]) < end) {
        const Line& bad = problems[first + std::stoul(m[1])];
        s = Status(s.code(), path + ":" + std::to_string(bad.number) + ": " + s.message());
      }
      std::cerr << answered << " of " << problems.size() << " problems answered before the error"
                << std::endl;
      return Fail(s);
    }
  }
  if (bar) std::cerr << "\r\033[K";
  std::cerr << problems.size() << " problems: " << tuned << (force ? " re-tuned, " : " tuned, ")
            << cached << " already cached (skipped), " << failed << " failed" << std::endl;
  return failed > 0 ? 1 : 0;
}

int RunTune(Client& client, const Globals& g, const ProblemFlags& f, double budget,
            bool exhaustive) {
  v1::TuneRequest request;
  *request.mutable_problem() = BuildProblem(f);
  request.set_budget_seconds(budget);
  request.set_exhaustive(exhaustive);
  auto answer = client.Tune(request, [&](const v1::TuneProgress& p) {
    if (g.json) {
      std::cout << ProgressToJson(p).dump() << std::endl;  // one object per line, flushed
    } else if (!p.has_answer()) {
      std::cout << ProgressToText(p) << std::endl;
    }
  });
  if (!answer.ok()) return Fail(answer.status());
  if (!g.json) std::cout << "\n" << AnswerToText(*answer);
  return 0;
}

int RunDevices(Client& client, const Globals& g) {
  auto devices = client.ListDevices();
  if (!devices.ok()) return Fail(devices.status());
  if (g.json) {
    nlohmann::ordered_json j;
    j["devices"] = nlohmann::ordered_json::array();
    for (const auto& d : *devices) j["devices"].push_back(DeviceToJson(d));
    std::cout << j.dump(2) << std::endl;
  } else {
    for (const auto& d : *devices) std::cout << DeviceToText(d) << "\n";
    if (devices->empty()) std::cout << "no devices\n";
  }
  return 0;
}

int RunList(Client& client, const Globals& g, const FilterFlags& f, bool candidates, int limit) {
  v1::ListEntriesRequest request;
  *request.mutable_filter() = BuildFilter(f);
  request.set_include_candidates(candidates);
  request.set_limit(limit);
  auto entries = client.ListEntries(request);
  if (!entries.ok()) return Fail(entries.status());
  if (g.json) {
    nlohmann::ordered_json j;
    j["entries"] = nlohmann::ordered_json::array();
    for (const auto& e : *entries) j["entries"].push_back(EntryToJson(e));
    std::cout << j.dump(2) << std::endl;
  } else {
    for (const auto& e : *entries) std::cout << EntryToText(e) << "\n";
    std::cout << entries->size() << (entries->size() == 1 ? " entry" : " entries") << "\n";
  }
  return 0;
}

int RunDelete(Client& client, const Globals& g, const FilterFlags& f, bool all) {
  v1::DeleteEntriesRequest request;
  *request.mutable_filter() = BuildFilter(f);
  request.set_all(all);
  if (FilterEmpty(request.filter()) && !all) {
    return Usage("delete: an empty filter matches every entry; pass --all to delete them all");
  }
  auto deleted = client.DeleteEntries(request);
  if (!deleted.ok()) return Fail(deleted.status());
  if (g.json) {
    nlohmann::ordered_json j;
    j["deleted"] = *deleted;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "deleted " << *deleted << (*deleted == 1 ? " entry" : " entries") << "\n";
  }
  return 0;
}

// --- export / import: one v1.ExportedEntry per line, protobuf's JSON ---------------------------

// Rows per ImportEntries call (the daemon takes at most 1000).
constexpr int kImportBatch = 500;

int RunExport(Client& client, const std::string& device_class) {
  v1::ExportEntriesRequest request;
  request.set_device_class(device_class);
  auto n = client.ExportEntries(request, [&](const v1::ExportedEntry& entry) -> Status {
    TR_ASSIGN_OR_RETURN(std::string line, ExportedEntryToLine(entry));
    std::cout << line << '\n';
    if (!std::cout) return Status::Unavailable("stdout: write failed");
    return Status::OK();
  });
  std::cout.flush();
  if (!n.ok()) return Fail(n.status());
  std::cerr << "exported " << *n << (*n == 1 ? " entry" : " entries") << std::endl;
  return 0;
}

int RunImport(Client& client, const Globals& g, const std::string& path) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file) return Fail(Status::NotFound("import: cannot read " + path));
    in = &file;
  }
  v1::ImportEntriesResponse total;
  int64_t unparsable = 0;
  auto add = [&](const v1::ImportEntriesResponse& r) {
    total.set_received(total.received() + r.received());
    total.set_imported(total.imported() + r.imported());
    total.set_kept_existing(total.kept_existing() + r.kept_existing());
    total.set_refused_library_version(total.refused_library_version() +
                                      r.refused_library_version());
    total.set_invalid(total.invalid() + r.invalid());
    for (const auto& e : r.errors())
      if (total.errors_size() < 20) total.add_errors(e);
  };
  v1::ImportEntriesRequest batch;
  std::vector<int64_t> batch_lines;
  auto flush = [&]() -> Status {
    if (batch.entries_size() == 0) return Status::OK();
    TR_ASSIGN_OR_RETURN(v1::ImportEntriesResponse r, client.ImportEntries(batch));
    // The daemon names rows by their index in the batch: name them by line instead.
    for (auto& e : *r.mutable_errors()) {
      const auto close = e.find(']');
      if (e.rfind("entries[", 0) == 0 && close != std::string::npos) {
        const int64_t i = std::atoll(e.substr(8, close - 8).c_str());
        if (i >= 0 && i < static_cast<int64_t>(batch_lines.size()))
          e = path + ":" + std::to_string(batch_lines[i]) + ": " + e;
      }
    }
    add(r);
    batch.Clear();
    batch_lines.clear();
    return Status::OK();
  };
  std::string line;
  int64_t number = 0;
  while (std::getline(*in, line)) {
    ++number;
    if (IsBlankLine(line)) continue;
    auto entry = ExportedEntryFromLine(line);
    if (!entry.ok()) {
      ++unparsable;
      if (total.errors_size() < 20)
        total.add_errors(path + ":" + std::to_string(number) + ": " + entry.status().message());
      continue;
    }
    *batch.add_entries() = std::move(entry).value();
    batch_lines.push_back(number);
    if (batch.entries_size() >= kImportBatch) {
      Status f = flush();
      if (!f.ok()) return Fail(f);
    }
  }
  Status f = flush();
  if (!f.ok()) return Fail(f);
  total.set_received(total.received() + unparsable);
  total.set_invalid(total.invalid() + unparsable);
  if (g.json) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;
    std::string out;
    (void)google::protobuf::util::MessageToJsonString(total, &out, options);
    std::cout << out << std::endl;
  } else {
    std::cout << "read " << total.received() << " rows: imported " << total.imported()
              << ", kept " << total.kept_existing() << " (the stored winner was as fast or faster)"
              << ", refused " << total.refused_library_version()
              << " (unknown kernel library version), invalid " << total.invalid() << "\n";
    for (const auto& e : total.errors()) std::cout << "  " << e << "\n";
  }
  // Anything refused or invalid: exit 1, so that a script notices.
  return total.refused_library_version() + total.invalid() > 0 ? 1 : 0;
}

// --- many daemons (client/fleet.h) -------------------------------------------------------------

int PrintFleet(const Globals& g, const v1::FleetReply& reply, const std::string& what) {
  if (g.json) {
    auto json = FleetToJson(reply);
    if (!json.ok()) return Fail(json.status());
    std::cout << *json << std::endl;
  } else {
    std::cout << FleetToText(reply, what);
  }
  // Text output shows errors as rows; JSON output keeps stdout machine-readable, so say it here too.
  for (const auto& row : reply.rows()) {
    if (g.json && row.has_error() && row.error().code() != "NOT_FOUND")
      std::cerr << "transposectl: " << row.node() << ": " << row.error().code() << ": "
                << row.error().message() << std::endl;
  }
  // 3: no daemon could be reached; 1: some daemon failed (or, get --cache-only, none had it).
  bool all_unavailable = reply.failed() == reply.nodes();
  for (const auto& row : reply.rows())
    all_unavailable = all_unavailable && (!row.has_error() || row.error().code() == "UNAVAILABLE");
  if (reply.failed() > 0 && all_unavailable) return 3;
  if (reply.failed() > 0) return 1;
  if (reply.missed() > 0 && reply.missed() == reply.nodes()) return 1;
  return 0;
}

int RunFleet(const std::vector<std::string>& servers, const Globals& g, CLI::App* get,
             const ProblemFlags& get_flags, bool cache_only, CLI::App* devices, CLI::App* list,
             const FilterFlags& list_flags, bool candidates, int limit) {
  FleetOptions options;
  auto connection = ConnectionOptions(g);
  if (!connection.ok()) return Usage(connection.status().ToString());
  options.client = *connection;
  options.parallelism = g.parallel;
  if (devices->parsed()) {
    auto results = FanOut(servers, options, [](Client& c, std::vector<v1::FleetRow>* rows) -> Status {
      TR_ASSIGN_OR_RETURN(auto devices, c.ListDevices());
      for (auto& d : devices) *rows->emplace_back().mutable_device() = std::move(d);
      return Status::OK();
    });
    return PrintFleet(g, MergeFleet(results, FleetOrder::kNodeOrder, false), "devices");
  }
  if (list->parsed()) {
    v1::ListEntriesRequest request;
    *request.mutable_filter() = BuildFilter(list_flags);
    request.set_include_candidates(candidates);
    request.set_limit(limit);
    auto results = FanOut(servers, options, [&](Client& c, std::vector<v1::FleetRow>* rows) -> Status {
      TR_ASSIGN_OR_RETURN(auto entries, c.ListEntries(request));
      for (auto& e : entries) *rows->emplace_back().mutable_entry() = std::move(e);
      return Status::OK();
    });
    return PrintFleet(g, MergeFleet(results, FleetOrder::kNewestFirst, false), "entries");
  }
  if (get->parsed()) {
    if (!cache_only) {
      return Usage("get: with several daemons only --cache-only is allowed (a miss would tune on "
                   "every one of them)");
    }
    const v1::Problem problem = BuildProblem(get_flags);
    auto results = FanOut(servers, options, [&](Client& c, std::vector<v1::FleetRow>* rows) -> Status {
      TR_ASSIGN_OR_RETURN(auto answer, c.GetConfig(problem, v1::CACHE_ONLY));
      *rows->emplace_back().mutable_answer() = std::move(answer);
      return Status::OK();
    });
    return PrintFleet(g, MergeFleet(results, FleetOrder::kNodeOrder, true), "answers");
  }
  return Usage("with several daemons (--server a,b or --servers-file) only list, devices and "
               "get --cache-only are allowed");
}

// Levenshtein distance, for naming the command a typo meant.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

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
    std::string best;
    size_t best_d = 3;  // at most two edits away
    for (const CLI::App* sub : app.get_subcommands({})) {
      const size_t d = EditDistance(arg, sub->get_name());
      if (d < best_d || sub->get_name().rfind(arg, 0) == 0) best_d = d, best = sub->get_name();
    }
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    message += "; commands:";
    for (const CLI::App* sub : app.get_subcommands({})) message += " " + sub->get_name();
    return message;
  }
  return "";
}

int Main(int argc, char** argv) {
  Globals g;
  const char* env = std::getenv("TRANSPOSED_SERVER");
  g.server = (env != nullptr && *env != '\0') ? env : kDefaultServer;

  CLI::App app{"transposectl: ask the transposed daemon for the best GPU transpose configuration"};
  app.require_subcommand(1);
  // Global flags are accepted after the subcommand too ("transposectl devices --json").
  app.fallthrough();
  app.set_version_flag("--version", std::string("transposectl ") + kProjectVersion +
                                        " (kernel library " + kLibraryVersion + ")");
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
      ->check(CLI::PositiveNumber);

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
      ->check(CLI::NonNegativeNumber);
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
  list->add_option("--limit", limit, "At most N entries (0: all)")->check(CLI::NonNegativeNumber);

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

  if (const std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty())
    return Usage(unknown);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
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
