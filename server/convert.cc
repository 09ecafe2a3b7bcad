#include "server/convert.h"

#include <cmath>

#include "core/text.h"

namespace transposed {

DeviceRef DeviceRefFromProto(const pb::DeviceSelector& s) {
  DeviceRef ref;
  switch (s.selector_case()) {
    case pb::DeviceSelector::kIndex:
      ref.index = s.index();
      break;
    case pb::DeviceSelector::kUuid:
      ref.uuid = s.uuid();
      break;
    case pb::DeviceSelector::SELECTOR_NOT_SET:
      break;
  }
  return ref;
}

pb::Device DeviceToProto(const DeviceInfo& d) {
  pb::Device out;
  out.set_index(d.index);
  out.set_uuid(d.uuid);
  out.set_name(d.name);
  out.set_backend(d.backend);
  out.set_memory_bytes(d.memory_bytes);
  out.set_library_version(d.library_version);
  out.set_fingerprint(d.Fingerprint());
  for (const auto& [k, v] : d.attributes) (*out.mutable_attributes())[k] = v;
  return out;
}

pb::Variant VariantToProto(const Candidate& c, const std::string& backend) {
  pb::Variant out;
  out.set_name(c.name);
  out.set_backend(backend);
  for (const auto& [k, v] : c.params) (*out.mutable_params())[k] = v;
  return out;
}

pb::Measurement MeasurementToProto(const Measurement& m, int64_t problem_bytes) {
  pb::Measurement out;
  out.set_valid(m.valid);
  out.set_error(m.error);
  out.set_median_s(m.median_s);
  out.set_min_s(m.min_s);
  out.set_max_s(m.max_s);
  out.set_rel_spread(m.rel_spread());
  out.set_samples(m.samples);
  out.set_warmup(m.warmup);
  out.set_gbps(EffectiveGBps(problem_bytes, m.median_s));
  out.set_method(m.method);
  return out;
}

pb::CandidateResult CandidateResultToProto(const CandidateResult& r, const std::string& backend,
                                           int64_t problem_bytes) {
  pb::CandidateResult out;
  *out.mutable_variant() = VariantToProto(r.candidate, backend);
  *out.mutable_measurement() = MeasurementToProto(r.measurement, problem_bytes);
  out.set_phase(std::string(PhaseName(r.phase)));
  return out;
}

pb::Source SourceToProto(AnswerSource s) {
  switch (s) {
    case AnswerSource::kCache:
      return pb::SOURCE_CACHE;
    case AnswerSource::kTuned:
      return pb::SOURCE_TUNED;
  }
  return pb::SOURCE_UNSPECIFIED;
}

pb::Answer AnswerToProto(const TuneResult& r, AnswerSource source) {
  pb::Answer out;
  const int64_t bytes = r.problem.bytes();
  *out.mutable_problem() = ProblemToProto(r.problem);
  *out.mutable_problem()->mutable_device() = [&] {
    pb::DeviceSelector s;
    s.set_index(r.device.index);
    return s;
  }();
  *out.mutable_variant() = VariantToProto(r.best, r.device.backend);
  const double gbps = r.gbps();
  const double ceiling = r.ceiling_gbps();
  out.set_gbps(gbps);
  out.set_ceiling_gbps(ceiling);
  out.set_ratio(ceiling > 0 ? gbps / ceiling : 0);
  out.set_rel_spread(r.best_measurement.rel_spread());
  out.set_noisy(r.best_measurement.rel_spread() > kMaxTrustedRelSpread);
  *out.mutable_measurement() = MeasurementToProto(r.best_measurement, bytes);
  *out.mutable_ceiling() = MeasurementToProto(r.ceiling, bytes);
  out.set_source(SourceToProto(source));
  out.set_tuned_at_unix_ms(r.tuned_at_unix_ms);
  out.set_candidates_tried(r.tried);
  out.set_candidates_valid(r.valid);
  out.set_candidates_total(r.total);
  out.set_previous_kept(r.incumbent_kept);
  out.set_tune_seconds(r.tune_seconds);
  *out.mutable_device() = DeviceToProto(r.device);
  return out;
}

StatusOr<ConfigRequest> ConfigRequestFromProto(const pb::GetConfigRequest& r) {
  ConfigRequest out;
  TR_ASSIGN_OR_RETURN(out.problem, ProblemFromProto(r.problem()));
  out.device = DeviceRefFromProto(r.problem().device());
  if (!pb::CachePolicy_IsValid(r.policy())) {
    return Status::InvalidArgument("policy: unknown CachePolicy " + std::to_string(r.policy()) +
                                   " (expected TUNE_IF_MISSING = 0 or CACHE_ONLY = 1)");
  }
  out.cache_only = r.policy() == pb::CACHE_ONLY;
  return out;
}

StatusOr<ForcedTuneRequest> TuneRequestFromProto(const pb::TuneRequest& r) {
  ForcedTuneRequest out;
  TR_ASSIGN_OR_RETURN(out.problem, ProblemFromProto(r.problem()));
  out.device = DeviceRefFromProto(r.problem().device());
  if (!std::isfinite(r.budget_seconds())) {
    return Status::InvalidArgument("budget_seconds: must be a finite number of seconds, got " +
                                   std::to_string(r.budget_seconds()));
  }
  out.budget_seconds = r.budget_seconds();
  out.exhaustive = r.exhaustive();
  return out;
}

StatusOr<EntryQuery> EntryQueryFromProto(const pb::EntryFilter& f) {
  EntryQuery q;
  TR_RETURN_IF_ERROR(CheckFieldLength("filter.device_fingerprint", f.device_fingerprint()));
  if (f.has_device() && f.device().selector_case() == pb::DeviceSelector::kUuid)
    TR_RETURN_IF_ERROR(CheckFieldLength("filter.device.uuid", f.device().uuid()));
  TR_RETURN_IF_ERROR(CheckFieldLength("filter.dtype", f.dtype()));
  TR_RETURN_IF_ERROR(CheckFieldLength("filter.variant", f.variant()));
  TR_RETURN_IF_ERROR(CheckFieldLength("filter.library_version", f.library_version()));
  q.filter.device_fingerprint = f.device_fingerprint();
  if (f.has_device() && f.device().selector_case() != pb::DeviceSelector::SELECTOR_NOT_SET)
    q.device = DeviceRefFromProto(f.device());
  if (!f.dtype().empty()) {
    TR_ASSIGN_OR_RETURN(q.filter.dtype, ParseDTypeField(f.dtype(), "filter.dtype"));
  }
  auto non_negative = [](const char* field, int64_t v) -> Status {
    if (v < 0)
      return Status::InvalidArgument(std::string(field) + ": must be >= 0 (0: any), got " +
                                     std::to_string(v));
    return Status::OK();
  };
  TR_RETURN_IF_ERROR(non_negative("filter.rows", f.rows()));
  TR_RETURN_IF_ERROR(non_negative("filter.cols", f.cols()));
  TR_RETURN_IF_ERROR(non_negative("filter.tuned_before_unix_ms", f.tuned_before_unix_ms()));
  q.filter.rows = f.rows();
  q.filter.cols = f.cols();
  q.filter.variant = f.variant();
  q.filter.tuned_before_unix_ms = f.tuned_before_unix_ms();
  q.filter.library_version = f.library_version();
  return q;
}

}  // namespace transposed
