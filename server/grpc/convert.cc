#include "server/grpc/convert.h"

#include <cmath>

#include "core/text.h"
#include "store/entry_validation.h"

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
    case AnswerSource::kPeer:
      return pb::SOURCE_PEER;
    case AnswerSource::kNearest:
      return pb::SOURCE_NEAREST;
    case AnswerSource::kHeuristic:
      return pb::SOURCE_HEURISTIC;
    case AnswerSource::kShared:
      return pb::SOURCE_SHARED;
    case AnswerSource::kPrevious:
      return pb::SOURCE_PREVIOUS;
  }
  return pb::SOURCE_UNSPECIFIED;
}

pb::Origin OriginToProto(Origin o) {
  switch (o) {
    case Origin::kTuned:
      return pb::ORIGIN_TUNED;
    case Origin::kImported:
      return pb::ORIGIN_IMPORTED;
    case Origin::kPeer:
      return pb::ORIGIN_PEER;
    case Origin::kShared:
      return pb::ORIGIN_SHARED;
  }
  return pb::ORIGIN_UNSPECIFIED;
}

pb::Answer AnswerToProto(const TuneResult& r, AnswerSource source,
                         const DeviceInfo* measured_on) {
  pb::Answer out;
  AnswerToProto(r, source, DeviceToProto(r.device),
                DeviceToProto(measured_on != nullptr ? *measured_on : r.device), &out);
  return out;
}

void AnswerToProto(const TuneResult& r, AnswerSource source, const pb::Device& device,
                   const pb::Device& measured_on, pb::Answer* answer) {
  answer->Clear();
  pb::Answer& out = *answer;
  const int64_t bytes = r.problem.bytes();
  *out.mutable_problem() = ProblemToProto(r.problem);
  out.mutable_problem()->mutable_device()->set_index(r.device.index);
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
  *out.mutable_device() = device;
  *out.mutable_measured_on() = measured_on;
  out.set_origin(OriginToProto(r.origin));
  out.set_contention(r.contention);
}

StatusOr<ConfigRequest> ConfigRequestFromProto(const pb::GetConfigRequest& r) {
  ConfigRequest out;
  TR_ASSIGN_OR_RETURN(out.problem, ProblemFromProto(r.problem()));
  out.device = DeviceRefFromProto(r.problem().device());
  TR_RETURN_IF_ERROR(CheckFieldLength("device_class", r.device_class()));
  out.device_class = r.device_class();
  if (!pb::CachePolicy_IsValid(r.policy())) {
    return Status::InvalidArgument("policy: unknown CachePolicy " + std::to_string(r.policy()) +
                                   " (expected TUNE_IF_MISSING = 0, CACHE_ONLY = 1 or "
                                   "ANSWER_NOW = 2)");
  }
  out.cache_only = r.policy() == pb::CACHE_ONLY;
  out.answer_now = r.policy() == pb::ANSWER_NOW;
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

// --- export / import -----------------------------------------------------------------------------

pb::ExportedEntry ExportedEntryToProto(const TuneResult& r) {
  pb::ExportedEntry out;
  DeviceInfo instance = r.device;
  instance.index = -1;
  *out.mutable_measured_on() = DeviceToProto(instance);
  *out.mutable_answer() = AnswerToProto(r, AnswerSource::kCache, &instance);
  const int64_t bytes = r.problem.bytes();
  for (const auto& c : r.candidates)
    *out.add_candidates() = CandidateResultToProto(c, r.device.backend, bytes);
  return out;
}

StatusOr<TuneResult> ExportedEntryFromProto(const pb::ExportedEntry& e) {
  TuneResult r;
  // The instance it was measured on.
  TR_ASSIGN_OR_RETURN(r.device, DeviceFromProto("measured_on", e.measured_on()));
  r.device.index = -1;
  // The winner.
  const pb::Answer& a = e.answer();
  TR_ASSIGN_OR_RETURN(r.problem, ProblemFromProto(a.problem()));
  Status valid = ValidateProblem(r.problem);
  if (!valid.ok()) return Status(valid.code(), "answer.problem." + valid.message());
  TR_ASSIGN_OR_RETURN(r.best, VariantFromProto("answer.variant", a.variant()));
  if (!a.variant().backend().empty() && a.variant().backend() != r.device.backend) {
    return Status::InvalidArgument("answer.variant.backend: " + Quote(a.variant().backend()) +
                                   " is not the device's backend " + Quote(r.device.backend));
  }
  TR_ASSIGN_OR_RETURN(r.best_measurement,
                      MeasurementFromProto("answer.measurement", a.measurement(), true));
  TR_ASSIGN_OR_RETURN(r.ceiling, MeasurementFromProto("answer.ceiling", a.ceiling(), false));
  if (a.candidates_tried() < 1 || a.candidates_valid() < 1 ||
      a.candidates_valid() > a.candidates_tried() || a.candidates_tried() > 100000) {
    return Status::InvalidArgument(
        "answer.candidates_tried, answer.candidates_valid: must satisfy 1 <= valid <= tried <= "
        "100000, got tried " + std::to_string(a.candidates_tried()) + ", valid " +
        std::to_string(a.candidates_valid()));
  }
  r.tried = a.candidates_tried();
  r.valid = a.candidates_valid();
  TR_RETURN_IF_ERROR(CheckSeconds("answer.tune_seconds", a.tune_seconds(), false));
  r.tune_seconds = a.tune_seconds();
  if (a.tuned_at_unix_ms() <= 0)
    return Status::InvalidArgument("answer.tuned_at_unix_ms: must be > 0, got " +
                                   std::to_string(a.tuned_at_unix_ms()));
  r.tuned_at_unix_ms = a.tuned_at_unix_ms();
  r.contention = a.contention();  // bounded by ValidateEntry below
  // Every candidate measurement of the tune (counted before any is parsed).
  if (e.candidates_size() > kMaxCandidatesPerEntry)
    return Status::InvalidArgument("candidates: at most " +
                                   std::to_string(kMaxCandidatesPerEntry) + " per entry, got " +
                                   std::to_string(e.candidates_size()));
  for (int i = 0; i < e.candidates_size(); ++i) {
    const std::string field = "candidates[" + std::to_string(i) + "]";
    const pb::CandidateResult& c = e.candidates(i);
    CandidateResult out;
    TR_ASSIGN_OR_RETURN(out.candidate, VariantFromProto(field + ".variant", c.variant()));
    TR_ASSIGN_OR_RETURN(out.measurement,
                        MeasurementFromProto(field + ".measurement", c.measurement(), false));
    auto phase = ParsePhase(c.phase());
    if (!phase)
      return Status::InvalidArgument(field + ".phase: unknown phase " + Quote(c.phase()) +
                                     " (check, quick, final, skipped)");
    out.phase = *phase;
    r.candidates.push_back(std::move(out));
  }
  r.origin = Origin::kImported;
  // Every number finite and in range, every string and list bounded: the one check of a row from
  // outside (store/entry_validation.h), which the store applies again on its own reads.
  TR_RETURN_IF_ERROR(ValidateEntry(r));
  return r;
}

}  // namespace transposed
