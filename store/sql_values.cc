#include "store/sql_values.h"

#include <nlohmann/json.hpp>

namespace transposed {
namespace store_internal {
namespace {

// JSON never throws here: invalid UTF-8 is replaced rather than rejected.
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Status ToSql(Stmt& st, int i, const std::string& v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, int64_t v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, int v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, uint64_t v) { return st.Bind(i, static_cast<int64_t>(v)); }
Status ToSql(Stmt& st, int i, double v) { return st.Bind(i, v); }
Status ToSql(Stmt& st, int i, bool v) { return st.Bind(i, v ? 1 : 0); }
Status ToSql(Stmt& st, int i, DType v) { return st.Bind(i, std::string(DTypeName(v))); }
Status ToSql(Stmt& st, int i, Phase v) { return st.Bind(i, std::string(PhaseName(v))); }
Status ToSql(Stmt& st, int i, Origin v) { return st.Bind(i, std::string(OriginName(v))); }
Status ToSql(Stmt& st, int i, Exactness v) { return st.Bind(i, std::string(ExactnessName(v))); }
Status ToSql(Stmt& st, int i, const std::optional<double>& v) {
  return v ? st.Bind(i, *v) : st.BindNull(i);
}
Status ToSql(Stmt& st, int i, const std::map<std::string, int64_t>& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : params) j[k] = v;
  return st.Bind(i, Dump(j));
}
Status ToSql(Stmt& st, int i, const std::map<std::string, std::string>& attrs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : attrs) j[k] = v;
  return st.Bind(i, Dump(j));
}

// A MeasureMethod is one JSON object column (its field names as keys; zero fields left out).
// Rows of older versions held free-form JSON with the same key names, the measurement's own
// fields sometimes nested under "round" or "measurement": those are read too, other keys ignored.
Status ToSql(Stmt& st, int i, const MeasureMethod& m) {
  nlohmann::json j = nlohmann::json::object();
  auto put = [&j](const char* key, const auto& v, bool set) {
    if (set) j[key] = v;
  };
  put("timer", m.timer, !m.timer.empty());
  put("op", m.op, !m.op.empty());
  put("launches_per_sample", m.launches_per_sample, m.launches_per_sample != 0);
  put("buffers", m.buffers, m.buffers != 0);
  put("working_set_bytes", m.working_set_bytes, m.working_set_bytes != 0);
  put("cache_bytes", m.cache_bytes, m.cache_bytes != 0);
  put("working_set_capped", m.working_set_capped, m.working_set_capped);
  put("threads", m.threads, m.threads != 0);
  put("sm_clock_khz", m.sm_clock_khz, m.sm_clock_khz != 0);
  put("memory_clock_khz", m.memory_clock_khz, m.memory_clock_khz != 0);
  put("preempted_retaken", m.preempted_retaken, m.preempted_retaken != 0);
  put("preempted_kept", m.preempted_kept, m.preempted_kept != 0);
  put("alternatives_median_s", m.alternatives_median_s, !m.alternatives_median_s.empty());
  put("final_rounds", m.final_rounds, m.final_rounds != 0);
  put("remeasured_after_rel_spread", m.remeasured_after_rel_spread,
      m.remeasured_after_rel_spread != 0);
  put("remeasured_after_slowdown", m.remeasured_after_slowdown, m.remeasured_after_slowdown != 0);
  put("placements", m.placements, m.placements != 0);
  return st.Bind(i, Dump(j));
}
Status FromSql(const Stmt& st, int i, MeasureMethod* out) {
  const std::string text = st.Text(i);
  *out = MeasureMethod();
  if (text.empty()) return Status::OK();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("method: not a JSON object: " + text.substr(0, 80));
  // Older rows: the measurement's fields one level down.
  for (const char* nested : {"measurement", "round"}) {
    for (int depth = 0; depth < 2 && j.contains(nested) && j[nested].is_object(); ++depth) {
      nlohmann::json inner = j[nested];
      j.erase(nested);
      for (auto it = inner.begin(); it != inner.end(); ++it) {
        if (!j.contains(it.key())) j[it.key()] = it.value();
      }
    }
  }
  try {
    auto get = [&j](const char* key, auto* field) {
      if (j.contains(key) && !j[key].is_null()) j[key].get_to(*field);
    };
    get("timer", &out->timer);
    get("op", &out->op);
    get("launches_per_sample", &out->launches_per_sample);
    get("buffers", &out->buffers);
    get("working_set_bytes", &out->working_set_bytes);
    get("cache_bytes", &out->cache_bytes);
    get("working_set_capped", &out->working_set_capped);
    get("threads", &out->threads);
    get("sm_clock_khz", &out->sm_clock_khz);
    get("memory_clock_khz", &out->memory_clock_khz);
    get("preempted_retaken", &out->preempted_retaken);
    get("preempted_kept", &out->preempted_kept);
    get("alternatives_median_s", &out->alternatives_median_s);
    get("final_rounds", &out->final_rounds);
    get("remeasured_after_rel_spread", &out->remeasured_after_rel_spread);
    get("remeasured_after_slowdown", &out->remeasured_after_slowdown);
    get("placements", &out->placements);
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("method: ") + e.what());
  }
  return Status::OK();
}

Status FromSql(const Stmt& st, int i, std::string* v) {
  *v = st.Text(i);
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, int64_t* v) {
  *v = st.Int(i);
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, int* v) {
  *v = static_cast<int>(st.Int(i));
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, uint64_t* v) {
  *v = static_cast<uint64_t>(st.Int(i));
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, double* v) {
  *v = st.Real(i);
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, bool* v) {
  *v = st.Int(i) != 0;
  return Status::OK();
}
// An enum stored as its name: `parse` is the enum's own parser (core/), `what` names it in the error.
template <typename E, typename Parse>
Status EnumFromSql(const Stmt& st, int i, const char* what, Parse parse, E* v) {
  const std::string text = st.Text(i);
  auto parsed = parse(text);
  if (!parsed) return Status::Internal(std::string("unknown ") + what + " '" + text + "'");
  *v = *parsed;
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, DType* v) {
  return EnumFromSql(st, i, "dtype", ParseDType, v);
}
Status FromSql(const Stmt& st, int i, Phase* v) {
  return EnumFromSql(st, i, "phase", ParsePhase, v);
}
Status FromSql(const Stmt& st, int i, Origin* v) {
  return EnumFromSql(st, i, "origin", ParseOrigin, v);
}
Status FromSql(const Stmt& st, int i, Exactness* v) {
  return EnumFromSql(st, i, "exactness", ParseExactness, v);
}
Status FromSql(const Stmt& st, int i, std::map<std::string, int64_t>* out) {
  const std::string text = st.Text(i);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("not a JSON object: " + text.substr(0, 80));
  out->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer())
      return Status::Internal("key '" + it.key() + "' is not an integer");
    (*out)[it.key()] = it.value().get<int64_t>();
  }
  return Status::OK();
}
Status FromSql(const Stmt& st, int i, std::map<std::string, std::string>* out) {
  const std::string text = st.Text(i);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Internal("not a JSON object: " + text.substr(0, 80));
  out->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return Status::Internal("key '" + it.key() + "' is not a string");
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return Status::OK();
}

}  // namespace store_internal
}  // namespace transposed
