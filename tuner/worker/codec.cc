#include "tuner/worker/codec.h"

#include <cmath>
#include <string>

#include "core/placements.h"

namespace transposed::worker {

void ToProto(const MeasureOptions& in, pb::MeasureOptions* out) {
  out->set_warmup(in.warmup);
  out->set_min_samples(in.min_samples);
  out->set_min_seconds(in.min_seconds);
  out->set_max_samples(in.max_samples);
  out->set_placements(in.placements);
  out->set_cutoff_s(in.cutoff_s);
}

StatusOr<MeasureOptions> FromProto(const pb::MeasureOptions& in) {
  MeasureOptions o;
  o.warmup = in.warmup();
  o.min_samples = in.min_samples();
  o.min_seconds = in.min_seconds();
  o.max_samples = in.max_samples();
  o.placements = in.placements() == 0 ? 1 : in.placements();  // unset: one
  o.cutoff_s = in.cutoff_s();
  if (o.warmup < 0) return Status::InvalidArgument("options.warmup: must be >= 0");
  if (o.min_samples < 1) return Status::InvalidArgument("options.min_samples: must be >= 1");
  if (o.max_samples < o.min_samples)
    return Status::InvalidArgument("options.max_samples: must be >= min_samples");
  if (!(o.min_seconds >= 0)) return Status::InvalidArgument("options.min_seconds: must be >= 0");
  if (!(o.cutoff_s >= 0) || std::isinf(o.cutoff_s))
    return Status::InvalidArgument("options.cutoff_s: must be finite and >= 0");
  if (o.placements < 1 || o.placements > kMaxPlacements)
    return Status::InvalidArgument("options.placements: must be 1.." +
                                   std::to_string(kMaxPlacements));
  return o;
}

void ToProto(const TimeBreakdown& in, pb::Response* out) {
  for (const PhaseTime& p : in.phases()) {
    pb::PhaseTime* t = out->add_phases();
    t->set_phase(p.phase);
    t->set_seconds(p.seconds);
    t->set_count(p.count);
  }
}

TimeBreakdown PhasesFromProto(const pb::Response& in) {
  TimeBreakdown b;
  for (const pb::PhaseTime& t : in.phases()) b.Add(t.phase(), t.seconds(), t.count());
  return b;
}

pb::Response ErrorResponse(const Status& s, bool fatal) {
  pb::Response r;
  pb::Error* e = r.mutable_error();
  e->set_code(static_cast<int>(s.ok() ? StatusCode::kUnknown : s.code()));
  e->set_message(s.message());
  e->set_fatal(fatal);
  return r;
}

Status ErrorStatus(const pb::Error& e) {
  StatusCode code = StatusCode::kUnknown;
  for (StatusCode c :
       {StatusCode::kCancelled, StatusCode::kUnknown, StatusCode::kInvalidArgument,
        StatusCode::kDeadlineExceeded, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kResourceExhausted, StatusCode::kFailedPrecondition, StatusCode::kAborted,
        StatusCode::kUnimplemented, StatusCode::kInternal, StatusCode::kUnavailable,
        StatusCode::kPermissionDenied, StatusCode::kUnauthenticated}) {
    if (static_cast<int>(c) == e.code()) code = c;
  }
  return Status(code, e.message());
}

void ToProto(const CandidateFamily& in, pb::CandidateFamily* out) {
  out->set_kernels_library_version(in.kernels_library_version);
  for (const std::string& v : in.vendor_available) out->add_vendor_available(v);
  for (const Candidate& c : in.fixed) *out->add_fixed() = VariantToProto(c, "");
}

StatusOr<CandidateFamily> FromProto(const std::string& field, const pb::CandidateFamily& in) {
  CandidateFamily f;
  f.kernels_library_version = in.kernels_library_version();
  f.vendor_available.assign(in.vendor_available().begin(), in.vendor_available().end());
  for (int i = 0; i < in.fixed_size(); ++i) {
    TR_ASSIGN_OR_RETURN(Candidate c, VariantFromProto(field + ".fixed[" + std::to_string(i) + "]",
                                                      in.fixed(i)));
    f.fixed.push_back(std::move(c));
  }
  return f;
}

}  // namespace transposed::worker
