#include "bench/answer_eval.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>

#include "server/answer_now.h"
#include "transposed/kernels/config.h"

namespace transposed::bench {
namespace {

// One CSV line into fields (double quotes around a field, "" inside one).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        out.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.emplace_back();
    } else if (ch != '\r') {
      out.back() += ch;
    }
  }
  return out;
}

bool ParseInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return end != nullptr && *end == '\0';
}

}  // namespace

Status ParseAllConfigsCsv(const std::string& text, std::vector<MeasuredProblem>* into) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return Status::InvalidArgument("empty CSV: no header");
  const std::vector<std::string> header = SplitCsv(line);
  auto column = [&](const char* name) -> int {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int dtype = column("dtype"), rows = column("rows"), cols = column("cols"),
            batch = column("batch"), config = column("config"), gbps = column("gbps"),
            ld_in = column("ld_in"), ld_out = column("ld_out"), method = column("method"),
            error = column("error");
  for (const auto& [name, at] : {std::pair<const char*, int>{"dtype", dtype}, {"rows", rows},
                                 {"cols", cols}, {"batch", batch}, {"config", config},
                                 {"gbps", gbps}})
    if (at < 0) return Status::InvalidArgument(std::string("CSV header has no column ") + name);
  std::map<std::string, size_t> index;  // Key() -> position in *into
  std::map<std::pair<size_t, std::string>, int> counts;  // measurements averaged so far
  for (size_t i = 0; i < into->size(); ++i) index[(*into)[i].problem.Key()] = i;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> f = SplitCsv(line);
    auto field = [&](int at) -> std::string {
      return at >= 0 && at < static_cast<int>(f.size()) ? f[at] : std::string();
    };
    if (!field(error).empty()) continue;
    if (method >= 0 && field(method) != "family") continue;
    const std::string where = "line " + std::to_string(line_no) + ": ";
    Problem p;
    auto t = ParseDType(field(dtype));
    if (!t.has_value()) return Status::InvalidArgument(where + "dtype '" + field(dtype) + "'");
    p.dtype = *t;
    int64_t ldi = 0, ldo = 0;
    if (!ParseInt(field(rows), &p.rows) || !ParseInt(field(cols), &p.cols) ||
        !ParseInt(field(batch), &p.batch))
      return Status::InvalidArgument(where + "rows, cols and batch must be integers");
    if (ld_in >= 0 && !field(ld_in).empty() && !ParseInt(field(ld_in), &ldi))
      return Status::InvalidArgument(where + "ld_in must be an integer");
    if (ld_out >= 0 && !field(ld_out).empty() && !ParseInt(field(ld_out), &ldo))
      return Status::InvalidArgument(where + "ld_out must be an integer");
    p.ld_in = ldi == p.cols ? 0 : ldi;
    p.ld_out = ldo == p.rows ? 0 : ldo;
    if (Status s = ValidateProblem(p); !s.ok())
      return Status::InvalidArgument(where + s.message());
    char* end = nullptr;
    const std::string g = field(gbps);
    const double value = std::strtod(g.c_str(), &end);
    if (g.empty() || *end != '\0' || !(value >= 0))
      return Status::InvalidArgument(where + "gbps '" + g + "' is not a bandwidth");
    const std::string name = field(config);
    if (name.empty()) return Status::InvalidArgument(where + "empty config");
    auto [it, added] = index.emplace(p.Key(), into->size());
    if (added) into->push_back({p, {}});
    MeasuredProblem& m = (*into)[it->second];
    int& n = counts[{it->second, name}];
    if (n == 0 && m.gbps.count(name) != 0) n = 1;  // measured by an earlier call's file
    m.gbps[name] = (m.gbps[name] * n + value) / (n + 1);
    ++n;
  }
  return Status::OK();
}

std::vector<EvalRow> Evaluate(const std::vector<MeasuredProblem>& set, const EvalOptions& o,
                              int* skipped) {
  // Each problem's valid candidates (the daemon's list, measured ones only) and winner.
  struct Prepared {
    std::vector<Candidate> valid;
    Candidate winner;
    double winner_gbps = 0;
  };
  std::vector<Prepared> prepared(set.size());
  for (size_t i = 0; i < set.size(); ++i) {
    for (const kernels::TransposeConfig& c : kernels::CandidateConfigs(set[i].problem)) {
      if (c.vendor()) continue;  // the daemon offers them only where the library loads
      auto g = set[i].gbps.find(c.Name());
      if (g == set[i].gbps.end()) continue;
      prepared[i].valid.push_back({c.Name(), c.Params()});
      if (g->second > prepared[i].winner_gbps) {
        prepared[i].winner_gbps = g->second;
        prepared[i].winner = prepared[i].valid.back();
      }
    }
  }
  std::vector<EvalRow> rows;
  if (skipped != nullptr) *skipped = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    if (prepared[i].valid.empty()) {
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    // The other problems' winners, in set order (a sparse store: k of them, drawn by seed).
    std::vector<size_t> others;
    for (size_t j = 0; j < set.size(); ++j)
      if (j != i && !prepared[j].valid.empty()) others.push_back(j);
    if (o.store_size >= 0 && static_cast<size_t>(o.store_size) < others.size()) {
      std::mt19937_64 rng(o.seed * 1000003 + i);
      for (size_t k = 0; k < static_cast<size_t>(o.store_size); ++k)
        std::swap(others[k], others[k + rng() % (others.size() - k)]);
      others.resize(o.store_size);
      std::sort(others.begin(), others.end());
    }
    std::vector<TuneResult> stored;
    for (size_t j : others) {
      TuneResult r;
      r.problem = set[j].problem;
      r.best = prepared[j].winner;
      stored.push_back(std::move(r));
    }
    const FirstAnswer a = ChooseFirstAnswer(set[i].problem, stored, prepared[i].valid);
    EvalRow row;
    row.problem = set[i].problem;
    row.answer = a.candidate.name;
    row.winner = prepared[i].winner.name;
    row.source = a.source;
    if (a.nearest.has_value()) row.nearest = stored[*a.nearest].problem.ToString();
    row.answer_gbps = set[i].gbps.at(a.candidate.name);
    row.winner_gbps = prepared[i].winner_gbps;
    rows.push_back(std::move(row));
  }
  return rows;
}

EvalSummary Summarize(const std::vector<EvalRow>& rows) {
  EvalSummary s;
  s.n = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  std::vector<double> r;
  for (const EvalRow& row : rows) {
    r.push_back(row.ratio());
    s.at_least_0_9 += row.ratio() >= 0.9 ? 1 : 0;
    (row.source == AnswerSource::kNearest ? s.nearest : s.heuristic) += 1;
    if (r.size() == 1 || row.ratio() < s.worst) {
      s.worst = row.ratio();
      s.worst_problem = row.problem.ToString();
    }
  }
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  s.median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
  s.p10 = r[(n - 1) / 10];
  return s;
}

}  // namespace transposed::bench
