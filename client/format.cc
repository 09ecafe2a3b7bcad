#include "client/format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <map>
#include <utility>
#include <vector>

namespace transposed {
namespace {

using Json = nlohmann::ordered_json;

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, n);
  std::string out(n + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  va_end(ap);
  out.resize(n);
  return out;
}

// Params in name order (protobuf maps have no order).
Json ParamsToJson(const google::protobuf::Map<std::string, int64_t>& params) {
  std::map<std::string, int64_t> sorted(params.begin(), params.end());
  Json j = Json::object();
  for (const auto& [k, v] : sorted) j[k] = v;
  return j;
}

std::string ParamsToText(const google::protobuf::Map<std::string, int64_t>& params) {
  std::map<std::string, int64_t> sorted(params.begin(), params.end());
  std::string s;
  for (const auto& [k, v] : sorted) {
    if (!s.empty()) s += " ";
    s += k + "=" + std::to_string(v);
  }
  return s.empty() ? "(none)" : s;
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return Printf(u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

}  // namespace

std::string OriginName(v1::Origin origin) {
  switch (origin) {
    case v1::ORIGIN_TUNED:
      return "tuned";
    case v1::ORIGIN_IMPORTED:
      return "imported";
    case v1::ORIGIN_PEER:
      return "peer";
    case v1::ORIGIN_SHARED:
      return "shared";
    default:
      return "unspecified";
  }
}

std::string SourceName(v1::Source source) {
  switch (source) {
    case v1::SOURCE_CACHE:
      return "cache";
    case v1::SOURCE_TUNED:
      return "tuned";
    case v1::SOURCE_PEER:
      return "peer";
    case v1::SOURCE_NEAREST:
      return "nearest";
    case v1::SOURCE_HEURISTIC:
      return "heuristic";
    case v1::SOURCE_SHARED:
      return "shared";
    default:
      return "unspecified";
  }
}

std::string IsoTimeUtc(int64_t unix_ms) {
  int64_t secs = unix_ms / 1000;
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return "";
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return Printf("%s.%03" PRId64 "Z", buf, ms);
}

Json ProblemToJson(const v1::Problem& problem) {
  Json j;
  j["rows"] = problem.rows();
  j["cols"] = problem.cols();
  j["batch"] = problem.has_batch() ? problem.batch() : 1;
  j["dtype"] = problem.dtype();
  j["ld_in"] = problem.ld_in();
  j["ld_out"] = problem.ld_out();
  // The enum value's name, as protobuf's JSON printer writes it ("EXACTNESS_BIT").
  j["exactness"] = v1::Exactness_Name(problem.exactness());
  return j;
}

Json DeviceToJson(const v1::Device& device) {
  Json j;
  j["index"] = device.index();
  j["name"] = device.name();
  j["uuid"] = device.uuid();
  j["backend"] = device.backend();
  j["fingerprint"] = device.fingerprint();
  j["memory_bytes"] = device.memory_bytes();
  j["library_version"] = device.library_version();
  j["device_class"] = device.device_class();
  std::map<std::string, std::string> attrs(device.attributes().begin(), device.attributes().end());
  Json a = Json::object();
  for (const auto& [k, v] : attrs) a[k] = v;
  j["attributes"] = a;
  if (device.has_load()) {
    const v1::DeviceLoad& l = device.load();
    Json load;
    load["state"] = l.state();
    load["source"] = l.source();
    if (!l.detail().empty()) load["detail"] = l.detail();
    load["utilization_percent"] = l.utilization_percent();
    load["other_processes"] = l.other_processes();
    load["sampled_at_unix_ms"] = l.sampled_at_unix_ms();
    if (!l.tune_contention().empty()) load["tune_contention"] = l.tune_contention();
    if (l.tune_ceiling_gbps() > 0) load["tune_ceiling_gbps"] = l.tune_ceiling_gbps();
    if (l.idle_ceiling_gbps() > 0) load["idle_ceiling_gbps"] = l.idle_ceiling_gbps();
    load["background_waiting"] = l.background_waiting();
    load["background_abandoned"] = l.background_abandoned();
    if (!l.last_abandoned().empty()) load["last_abandoned"] = l.last_abandoned();
    j["load"] = std::move(load);
  }
  return j;
}

Json MeasurementToJson(const v1::Measurement& m) {
  Json j;
  j["valid"] = m.valid();
  if (!m.error().empty()) j["error"] = m.error();
  j["gbps"] = m.gbps();
  j["median_s"] = m.median_s();
  j["min_s"] = m.min_s();
  j["max_s"] = m.max_s();
  j["rel_spread"] = m.rel_spread();
  j["samples"] = m.samples();
  j["warmup"] = m.warmup();
  if (m.has_method()) {
    // protobuf's JSON printer (field names as in the proto, unset fields left out).
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    std::string text;
    if (google::protobuf::util::MessageToJsonString(m.method(), &text, options).ok())
      j["method"] = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
  return j;
}

Json CandidateToJson(const v1::CandidateResult& c) {
  Json j;
  j["variant"] = c.variant().name();
  j["params"] = ParamsToJson(c.variant().params());
  j["backend"] = c.variant().backend();
  j["phase"] = c.phase();
  j["valid"] = c.measurement().valid();
  j["gbps"] = c.measurement().gbps();
  j["rel_spread"] = c.measurement().rel_spread();
  if (!c.measurement().error().empty()) j["error"] = c.measurement().error();
  j["measurement"] = MeasurementToJson(c.measurement());
  return j;
}

Json AnswerToJson(const v1::Answer& a) {
  Json j;
  j["variant"] = a.variant().name();
  j["params"] = ParamsToJson(a.variant().params());
  j["backend"] = a.variant().backend();
  j["gbps"] = a.gbps();
  j["ceiling_gbps"] = a.ceiling_gbps();
  j["ratio"] = a.ratio();
  j["rel_spread"] = a.rel_spread();
  j["noisy"] = a.noisy();
  j["source"] = SourceName(a.source());
  if (a.has_nearest_problem()) j["nearest_problem"] = ProblemToJson(a.nearest_problem());
  j["device"] = DeviceToJson(a.device());
  if (a.has_measured_on()) j["measured_on"] = DeviceToJson(a.measured_on());
  j["origin"] = OriginName(a.origin());
  j["problem"] = ProblemToJson(a.problem());
  j["tuned_at"] = IsoTimeUtc(a.tuned_at_unix_ms());
  j["tuned_at_unix_ms"] = a.tuned_at_unix_ms();
  j["candidates_tried"] = a.candidates_tried();
  j["candidates_valid"] = a.candidates_valid();
  j["tune_seconds"] = a.tune_seconds();
  if (!a.contention().empty()) j["contention"] = a.contention();
  j["measurement"] = MeasurementToJson(a.measurement());
  j["ceiling"] = MeasurementToJson(a.ceiling());
  return j;
}

Json EntryToJson(const v1::Entry& entry) {
  Json j = AnswerToJson(entry.answer());
  if (entry.candidates_size() > 0) {
    Json c = Json::array();
    for (const auto& cand : entry.candidates()) c.push_back(CandidateToJson(cand));
    j["candidates"] = std::move(c);
  }
  return j;
}

Json ProgressToJson(const v1::TuneProgress& p) {
  Json j;
  j["index"] = p.index();
  j["total"] = p.total();
  Json body;
  if (p.has_answer()) {
    j["event"] = "answer";
    body = AnswerToJson(p.answer());
  } else {
    j["event"] = "candidate";
    body = CandidateToJson(p.candidate());
  }
  for (auto it = body.begin(); it != body.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::string VariantLabel(const v1::Variant& variant) {
  return variant.name().empty() ? "(none)" : variant.name();
}

std::string ProblemLabel(const v1::Problem& p) {
  std::string s;
  if (p.has_batch() && p.batch() != 1) s += std::to_string(p.batch()) + "x";
  s += std::to_string(p.rows()) + "x" + std::to_string(p.cols()) + " " + p.dtype();
  if (p.ld_in()) s += " ld_in=" + std::to_string(p.ld_in());
  if (p.ld_out()) s += " ld_out=" + std::to_string(p.ld_out());
  if (p.exactness() == v1::EXACTNESS_VALUE) s += " value-exact";
  return s;
}

std::string AnswerToText(const v1::Answer& a) {
  std::vector<std::pair<std::string, std::string>> rows = {
      {"problem", ProblemLabel(a.problem())},
      {"variant", VariantLabel(a.variant())},
      {"params", ParamsToText(a.variant().params())},
      {"backend", a.variant().backend()},
      {"bandwidth", Printf("%.1f GB/s", a.gbps())},
      {"ceiling", Printf("%.1f GB/s (copy)", a.ceiling_gbps())},
      {"ratio", Printf("%.3f", a.ratio())},
      {"rel_spread", Printf("%.4f%s", a.rel_spread(), a.noisy() ? " (noisy: approximate)" : "")},
      {"source", a.has_nearest_problem()
                     ? SourceName(a.source()) + " (from " + ProblemLabel(a.nearest_problem()) + ")"
                     : SourceName(a.source())},
      {"device", Printf("%d %s (%s, %s)", a.device().index(), a.device().name().c_str(),
                        a.device().backend().c_str(), a.device().uuid().c_str())},
      {"fingerprint", a.device().fingerprint()},
      {"device_class", a.device().device_class()},
      {"measured_on", a.measured_on().uuid() == a.device().uuid()
                          ? std::string("this device")
                          : a.measured_on().uuid() + " (" + OriginName(a.origin()) + ")"},
      {"tuned_at", IsoTimeUtc(a.tuned_at_unix_ms())},
      {"candidates", Printf("%d tried, %d valid", a.candidates_tried(), a.candidates_valid())},
      {"tune_seconds", Printf("%.3f", a.tune_seconds())},
  };
  if (!a.contention().empty()) rows.push_back({"contention", a.contention()});
  size_t width = 0;
  for (const auto& [k, v] : rows) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : rows) {
    out += k + ":" + std::string(width - k.size() + 2, ' ') + v + "\n";
  }
  return out;
}

std::string ProgressToText(const v1::TuneProgress& p) {
  if (p.has_answer()) {
    return Printf("[%d/%d] answer: %s  %.1f GB/s", p.index(), p.total(),
                  VariantLabel(p.answer().variant()).c_str(), p.answer().gbps());
  }
  const v1::CandidateResult& c = p.candidate();
  std::string line =
      Printf("[%d/%d] %s  %.1f GB/s  %s", p.index(), p.total(), VariantLabel(c.variant()).c_str(),
             c.measurement().gbps(), c.measurement().valid() ? "valid" : "invalid");
  if (!c.phase().empty()) line += "  " + c.phase();
  if (!c.measurement().valid() && !c.measurement().error().empty()) {
    line += "  (" + c.measurement().error() + ")";
  }
  return line;
}

std::string DeviceToText(const v1::Device& d) {
  std::string out = Printf("%d  %-6s %s  uuid=%s  memory=%s  fingerprint=%s  library=%s",
                           d.index(), d.backend().c_str(), d.name().c_str(), d.uuid().c_str(),
                           HumanBytes(d.memory_bytes()).c_str(), d.fingerprint().c_str(),
                           d.library_version().c_str());
  if (d.has_load()) {
    const v1::DeviceLoad& l = d.load();
    out += "\n   load=" + l.state();
    if (l.utilization_percent() >= 0)
      out += Printf("  utilization=%d%%  other_processes=%d", l.utilization_percent(),
                    l.other_processes());
    else if (!l.detail().empty())
      out += "  (" + l.detail() + ")";
    if (l.tune_ceiling_gbps() > 0 && l.idle_ceiling_gbps() > 0)
      out += Printf("  last_tune_ceiling=%.0f GB/s (idle %.0f)", l.tune_ceiling_gbps(),
                    l.idle_ceiling_gbps());
    if (!l.tune_contention().empty()) out += "  last_tune_contention=\"" + l.tune_contention() + "\"";
    out += Printf("  background_waiting=%d  background_abandoned=%lld", l.background_waiting(),
                  static_cast<long long>(l.background_abandoned()));
    if (!l.last_abandoned().empty()) out += "\n   last_abandoned: " + l.last_abandoned();
  }
  return out;
}

std::string EntryToText(const v1::Entry& entry) {
  const v1::Answer& a = entry.answer();
  std::string out = Printf(
      "device=%d  %-24s  %-32s  %9.1f GB/s  ratio=%.3f  %s  fingerprint=%s", a.device().index(),
      ProblemLabel(a.problem()).c_str(), VariantLabel(a.variant()).c_str(), a.gbps(), a.ratio(),
      IsoTimeUtc(a.tuned_at_unix_ms()).c_str(), a.device().fingerprint().c_str());
  for (const auto& c : entry.candidates()) {
    out += "\n" + Printf("    %-32s  %9.1f GB/s  %-7s  %s", VariantLabel(c.variant()).c_str(),
                         c.measurement().gbps(), c.measurement().valid() ? "valid" : "invalid",
                         c.phase().c_str());
    if (!c.measurement().valid() && !c.measurement().error().empty()) {
      out += "  (" + c.measurement().error() + ")";
    }
  }
  return out;
}

}  // namespace transposed
