#include "client/transposectl_commands.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "client/fleet.h"
#include "client/format.h"
#include "proto/exported_entry_json.h"
#include "proto/json.h"

namespace transposed::ctl {

namespace {

// Whether this run's connection is plaintext (for Fail's TLS hint).
bool plaintext = true;

CLI::Validator Bound(double lo, bool inclusive, const std::string& unit) {
  char shown[32];
  std::snprintf(shown, sizeof shown, "%g", lo);
  const std::string want = std::string(inclusive ? "at least " : "more than ") + shown + " " + unit;
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(inclusive ? v >= lo : v > lo))
          return "must be " + want + ", got " + value;
        return "";
      },
      want);
}

}  // namespace

CLI::Validator Above(double lo, const std::string& unit) { return Bound(lo, false, unit); }
CLI::Validator AtLeast(double lo, const std::string& unit) { return Bound(lo, true, unit); }

// The transport and token flags as client options. The token file holds one line.
StatusOr<ClientOptions> ConnectionOptions(const Globals& g) {
  ClientOptions o;
  plaintext = !g.tls && g.tls_ca.empty() && g.tls_cert.empty();
  o.deadline_seconds = g.timeout;
  o.tls = g.tls;
  o.tls_ca_file = g.tls_ca;
  o.tls_cert_file = g.tls_cert;
  o.tls_key_file = g.tls_key;
  o.tls_server_name = g.tls_server_name;
  if (!g.token_file.empty()) {
    std::ifstream in(g.token_file);
    if (!in)
      return Status::InvalidArgument("--token-file: cannot read " + g.token_file + ": " +
                                     std::strerror(errno));
    std::string token;
    if (!std::getline(in, token))
      return Status::InvalidArgument("--token-file: " + g.token_file + " is empty");
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.empty()) return Status::InvalidArgument("--token-file: " + g.token_file + " is empty");
    o.token = token;
  }
  return o;
}



void AddProblemFlags(CLI::App* cmd, ProblemFlags* f, bool required) {
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
          ->check(AtLeast(0, "days"));
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
  if (s.code() == StatusCode::kUnavailable) {
    const std::string& m = s.message();
    if (m.find("Connection refused") != std::string::npos) {
      std::cerr << "transposectl: hint: no daemon listens there; start one (transposed --listen "
                   "HOST:PORT, default 127.0.0.1:50051) or name another with --server or "
                   "TRANSPOSED_SERVER (docs/user/cli.md)"
                << std::endl;
    } else if (plaintext && (m.find("Socket closed") != std::string::npos ||
                             m.find("Connection reset") != std::string::npos)) {
      std::cerr << "transposectl: hint: the daemon may require TLS: --tls-ca FILE (the CA that "
                   "signed its certificate; docs/user/security.md)"
                << std::endl;
    }
  }
  return s.code() == StatusCode::kUnavailable ? 3 : 1;
}

int Usage(const std::string& message) {
  std::cerr << "transposectl: " << message << std::endl;
  return 2;
}

// A reply on stdout in the one JSON mapping (proto/json.h).
int PrintJson(const google::protobuf::Message& message, JsonLayout layout) {
  auto json = ProtoToJson(message, layout);
  if (!json.ok()) return Fail(json.status());
  std::cout << *json << std::endl;
  return 0;
}

int RunGet(Client& client, const Globals& g, const ProblemFlags& f, v1::CachePolicy policy) {
  auto answer = client.GetConfig(BuildProblem(f), policy);
  if (!answer.ok()) return Fail(answer.status());
  if (g.json) return PrintJson(*answer, JsonLayout::kIndented);
  std::cout << AnswerToText(*answer);
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
    if (!file) return Usage("--from: cannot read " + path + ": " + std::strerror(errno));
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
        if (PrintJson(answer, JsonLayout::kLine) != 0) return Status::Internal("JSON printer");
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
      (void)PrintJson(p, JsonLayout::kLine);  // one TuneProgress per line, flushed
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
    v1::ListDevicesResponse reply;
    for (const auto& d : *devices) *reply.add_devices() = d;
    return PrintJson(reply, JsonLayout::kIndented);
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
    v1::ListEntriesResponse reply;
    for (const auto& e : *entries) *reply.add_entries() = e;
    return PrintJson(reply, JsonLayout::kIndented);
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
    v1::DeleteEntriesResponse reply;
    reply.set_deleted(*deleted);
    return PrintJson(reply, JsonLayout::kIndented);
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
    if (!file)
      return Fail(Status::NotFound("import: cannot read " + path + ": " + std::strerror(errno)));
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
    if (PrintJson(total, JsonLayout::kIndented) != 0) return 1;
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

}  // namespace transposed::ctl
