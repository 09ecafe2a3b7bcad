#include "client/format.h"

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
    case v1::SOURCE_PREVIOUS:
      return "previous";
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
  // An ANSWER_NOW heuristic default (or any answer nobody measured) has no bandwidth, ceiling,
  // tune time or date: say so rather than print 0.0 GB/s and 1970-01-01.
  const std::string none = "not measured";
  const bool measured = a.gbps() > 0;
  const bool tuned = a.tuned_at_unix_ms() > 0;
  std::vector<std::pair<std::string, std::string>> rows = {
      {"problem", ProblemLabel(a.problem())},
      {"variant", VariantLabel(a.variant())},
      {"params", ParamsToText(a.variant().params())},
      {"backend", a.variant().backend()},
      {"bandwidth", measured ? Printf("%.1f GB/s", a.gbps()) : none},
      {"ceiling", a.ceiling_gbps() > 0 ? Printf("%.1f GB/s (copy)", a.ceiling_gbps()) : none},
      {"ratio", measured && a.ceiling_gbps() > 0 ? Printf("%.3f", a.ratio()) : none},
      {"rel_spread",
       measured ? Printf("%.4f%s", a.rel_spread(), a.noisy() ? " (noisy: approximate)" : "")
                : none},
      {"source", a.has_nearest_problem()
                     ? SourceName(a.source()) + " (from " + ProblemLabel(a.nearest_problem()) + ")"
                     : SourceName(a.source())},
      {"device", Printf("%d %s (%s, %s)", a.device().index(), a.device().name().c_str(),
                        a.device().backend().c_str(), a.device().uuid().c_str())},
      {"fingerprint", a.device().fingerprint()},
      {"device_class", a.device().device_class()},
      {"measured_on", !measured ? none
                      : a.measured_on().uuid() == a.device().uuid()
                          ? std::string("this device")
                          : a.measured_on().uuid() + " (" + OriginName(a.origin()) + ")"},
      {"tuned_at", tuned ? IsoTimeUtc(a.tuned_at_unix_ms()) : "not tuned yet"},
      {"candidates", a.candidates_tried() > 0
                         ? Printf("%d tried, %d valid", a.candidates_tried(), a.candidates_valid())
                         : none},
      {"tune_seconds", tuned ? Printf("%.3f", a.tune_seconds()) : none},
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
  if (d.has_health()) {
    const v1::DeviceHealth& h = d.health();
    out += std::string("\n   health=") + (h.slow() ? "SLOW" : "ok");
    if (h.verdicts() > 0)
      out += Printf("  ceiling_vs_class=%.2f  verdicts=%d: ", h.ceiling_ratio(), h.verdicts()) +
             h.reason();
    else
      out += "  (no verdict yet: no other device of its class measured at its sizes)";
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
