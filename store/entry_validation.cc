#include "store/entry_validation.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/placements.h"
#include "core/problem.h"
#include "core/text.h"

namespace transposed {
namespace {

// The longest a timed run may take, in seconds (a day).
constexpr double kMaxSeconds = 86400;
// Bytes counted per number of an entry (a protobuf varint or double with its tag, rounded up).
constexpr size_t kBytesPerNumber = 11;

std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return std::to_string(v);
}

Status CheckTime(const std::string& field, double v, bool positive) {
  if (!std::isfinite(v) || v < 0 || (positive && v == 0) || v > kMaxSeconds) {
    return Status::InvalidArgument(field + ": must be a finite number of seconds in " +
                                   (positive ? "(0, 86400]" : "[0, 86400]") + ", got " + Num(v));
  }
  return Status::OK();
}

Status CheckReal(const std::string& field, double v, double lo, double hi) {
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Status::InvalidArgument(field + ": must be a finite number in [" + Num(lo) + ", " +
                                   Num(hi) + "], got " + Num(v));
  }
  return Status::OK();
}

Status CheckCount(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return Status::InvalidArgument(field + ": must be in " + std::to_string(lo) + ".." +
                                   std::to_string(hi) + ", got " + std::to_string(v));
  }
  return Status::OK();
}

Status CheckName(const std::string& field, const std::string& value) {
  if (value.empty()) return Status::InvalidArgument(field + ": must not be empty");
  return CheckFieldLength(field, value);
}

Status CheckDevice(const std::string& field, const DeviceInfo& d) {
  TR_RETURN_IF_ERROR(CheckName(field + ".backend", d.backend));
  TR_RETURN_IF_ERROR(CheckName(field + ".uuid", d.uuid));
  TR_RETURN_IF_ERROR(CheckName(field + ".name", d.name));
  TR_RETURN_IF_ERROR(CheckName(field + ".library_version", d.library_version));
  if (d.attributes.size() > 64)
    return Status::InvalidArgument(field + ".attributes: at most 64 attributes, got " +
                                   std::to_string(d.attributes.size()));
  for (const auto& [k, v] : d.attributes) {
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".attributes key", k));
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".attributes[" + Quote(k) + "]", v));
  }
  if (d.memory_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return Status::InvalidArgument(field + ".memory_bytes: out of range");
  return Status::OK();
}

Status CheckVariant(const std::string& field, const Candidate& c) {
  TR_RETURN_IF_ERROR(CheckName(field + ".name", c.name));
  if (c.params.size() > 64)
    return Status::InvalidArgument(field + ".params: at most 64 parameters, got " +
                                   std::to_string(c.params.size()));
  for (const auto& [k, v] : c.params) {
    (void)v;
    TR_RETURN_IF_ERROR(CheckName(field + ".params key", k));
  }
  return Status::OK();
}

size_t MethodBytes(const MeasureMethod& m) {
  size_t n = m.timer.size() + m.op.size() + 14 * kBytesPerNumber;
  for (const auto& [k, v] : m.alternatives_median_s) n += k.size() + kBytesPerNumber + 4;
  return n;
}

size_t MeasurementBytes(const Measurement& m) {
  return m.error.size() + 8 * kBytesPerNumber + MethodBytes(m.method);
}

size_t VariantBytes(const Candidate& c, const DeviceInfo& d) {
  size_t n = c.name.size() + d.backend.size() + 8;
  for (const auto& [k, v] : c.params) n += k.size() + kBytesPerNumber + 4;
  return n;
}

}  // namespace

size_t ApproxEntryBytes(const TuneResult& r) {
  size_t n = 2 * (r.device.backend.size() + r.device.uuid.size() + r.device.name.size() +
                  r.device.library_version.size() + 64);
  for (const auto& [k, v] : r.device.attributes) n += 2 * (k.size() + v.size() + 4);
  n += VariantBytes(r.best, r.device) + MeasurementBytes(r.best_measurement) +
       MeasurementBytes(r.ceiling) + 32 * kBytesPerNumber;
  for (const CandidateResult& c : r.candidates)
    n += VariantBytes(c.candidate, r.device) + MeasurementBytes(c.measurement) + 16;
  return n;
}

Status ValidateMeasureMethod(const std::string& field, const MeasureMethod& m) {
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".timer", m.timer, 64));
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".op", m.op, 64));
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMaxBytes = int64_t{1} << 60;
  TR_RETURN_IF_ERROR(CheckCount(field + ".launches_per_sample", m.launches_per_sample, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".buffers", m.buffers, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".working_set_bytes", m.working_set_bytes, 0, kMaxBytes));
  TR_RETURN_IF_ERROR(CheckCount(field + ".cache_bytes", m.cache_bytes, 0, kMaxBytes));
  TR_RETURN_IF_ERROR(CheckCount(field + ".threads", m.threads, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".sm_clock_khz", m.sm_clock_khz, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".memory_clock_khz", m.memory_clock_khz, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".preempted_retaken", m.preempted_retaken, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".preempted_kept", m.preempted_kept, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".final_rounds", m.final_rounds, 0, kMaxInt));
  TR_RETURN_IF_ERROR(CheckCount(field + ".placements", m.placements, 0, kMaxPlacements));
  if (m.alternatives_median_s.size() > 16)
    return Status::InvalidArgument(field + ".alternatives_median_s: at most 16 entries, got " +
                                   std::to_string(m.alternatives_median_s.size()));
  for (const auto& [k, v] : m.alternatives_median_s) {
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".alternatives_median_s key", k, 64));
    TR_RETURN_IF_ERROR(CheckTime(field + ".alternatives_median_s[" + Quote(k) + "]", v, false));
  }
  TR_RETURN_IF_ERROR(
      CheckReal(field + ".remeasured_after_rel_spread", m.remeasured_after_rel_spread, 0, 1e6));
  TR_RETURN_IF_ERROR(
      CheckReal(field + ".remeasured_after_slowdown", m.remeasured_after_slowdown, 0, 1e6));
  return Status::OK();
}

Status ValidateMeasurement(const std::string& field, const Measurement& m, bool must_be_valid) {
  if (must_be_valid && !m.valid) return Status::InvalidArgument(field + ".valid: must be true");
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".error", m.error, kMaxMeasurementErrorBytes));
  TR_RETURN_IF_ERROR(CheckTime(field + ".median_s", m.median_s, m.valid));
  TR_RETURN_IF_ERROR(CheckTime(field + ".min_s", m.min_s, m.valid));
  TR_RETURN_IF_ERROR(CheckTime(field + ".max_s", m.max_s, m.valid));
  TR_RETURN_IF_ERROR(CheckCount(field + ".samples", m.samples, m.valid ? 1 : 0, 10000000));
  TR_RETURN_IF_ERROR(CheckCount(field + ".warmup", m.warmup, 0, 1000000));
  return ValidateMeasureMethod(field + ".method", m.method);
}

Status ValidateEntry(const TuneResult& r) {
  TR_RETURN_IF_ERROR(CheckDevice("measured_on", r.device));
  Status problem = ValidateProblem(r.problem);
  if (!problem.ok()) return Status(problem.code(), "answer.problem." + problem.message());
  TR_RETURN_IF_ERROR(CheckVariant("answer.variant", r.best));
  TR_RETURN_IF_ERROR(ValidateMeasurement("answer.measurement", r.best_measurement, true));
  TR_RETURN_IF_ERROR(ValidateMeasurement("answer.ceiling", r.ceiling, false));
  if (r.valid < 0 || r.valid > r.tried || r.tried > 100000) {
    return Status::InvalidArgument(
        "answer.candidates_tried, answer.candidates_valid: must satisfy 0 <= valid <= tried <= "
        "100000, got tried " + std::to_string(r.tried) + ", valid " + std::to_string(r.valid));
  }
  TR_RETURN_IF_ERROR(CheckTime("answer.tune_seconds", r.tune_seconds, false));
  TR_RETURN_IF_ERROR(CheckFieldLength("answer.contention", r.contention, kMaxMeasurementErrorBytes));
  if (r.tuned_at_unix_ms < 0)
    return Status::InvalidArgument("answer.tuned_at_unix_ms: must be >= 0, got " +
                                   std::to_string(r.tuned_at_unix_ms));
  if (r.candidates.size() > static_cast<size_t>(kMaxCandidatesPerEntry))
    return Status::InvalidArgument("candidates: at most " +
                                   std::to_string(kMaxCandidatesPerEntry) + " per entry, got " +
                                   std::to_string(r.candidates.size()));
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const std::string field = "candidates[" + std::to_string(i) + "]";
    TR_RETURN_IF_ERROR(CheckVariant(field + ".variant", r.candidates[i].candidate));
    TR_RETURN_IF_ERROR(
        ValidateMeasurement(field + ".measurement", r.candidates[i].measurement, false));
  }
  const size_t bytes = ApproxEntryBytes(r);
  if (bytes > kMaxEntryBytes)
    return Status::InvalidArgument("candidates: the entry holds about " + std::to_string(bytes) +
                                   " bytes, at most " + std::to_string(kMaxEntryBytes));
  return Status::OK();
}

}  // namespace transposed
