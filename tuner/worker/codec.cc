#include "tuner/worker/codec.h"

#include <string>

#include "proto/measure_method_proto.h"

namespace transposed::worker {

void ToProto(const Problem& in, pb::Problem* out) {
  out->set_rows(in.rows);
  out->set_cols(in.cols);
  out->set_batch(in.batch);
  out->set_dtype(std::string(DTypeName(in.dtype)));
  out->set_ld_in(in.ld_in);
  out->set_ld_out(in.ld_out);
  out->set_exactness(std::string(ExactnessName(in.exactness)));
}

StatusOr<Problem> FromProto(const pb::Problem& in) {
  Problem p;
  p.rows = in.rows();
  p.cols = in.cols();
  p.batch = in.batch();
  auto dtype = ParseDType(in.dtype());
  if (!dtype) return Status::InvalidArgument("problem.dtype: unknown dtype '" + in.dtype() + "'");
  p.dtype = *dtype;
  p.ld_in = in.ld_in();
  p.ld_out = in.ld_out();
  if (!in.exactness().empty()) {
    auto exactness = ParseExactness(in.exactness());
    if (!exactness)
      return Status::InvalidArgument("problem.exactness: unknown exactness '" + in.exactness() +
                                     "' (expected bit or value)");
    p.exactness = *exactness;
  }
  return p;
}

void ToProto(const Candidate& in, pb::Candidate* out) {
  out->set_name(in.name);
  for (const auto& [k, v] : in.params) (*out->mutable_params())[k] = v;
}

Candidate FromProto(const pb::Candidate& in) {
  Candidate c;
  c.name = in.name();
  for (const auto& [k, v] : in.params()) c.params[k] = v;
  return c;
}

void ToProto(const MeasureOptions& in, pb::MeasureOptions* out) {
  out->set_warmup(in.warmup);
  out->set_min_samples(in.min_samples);
  out->set_min_seconds(in.min_seconds);
  out->set_max_samples(in.max_samples);
}

StatusOr<MeasureOptions> FromProto(const pb::MeasureOptions& in) {
  MeasureOptions o;
  o.warmup = in.warmup();
  o.min_samples = in.min_samples();
  o.min_seconds = in.min_seconds();
  o.max_samples = in.max_samples();
  if (o.warmup < 0) return Status::InvalidArgument("options.warmup: must be >= 0");
  if (o.min_samples < 1) return Status::InvalidArgument("options.min_samples: must be >= 1");
  if (o.max_samples < o.min_samples)
    return Status::InvalidArgument("options.max_samples: must be >= min_samples");
  if (!(o.min_seconds >= 0)) return Status::InvalidArgument("options.min_seconds: must be >= 0");
  return o;
}

void ToProto(const Measurement& in, pb::Measurement* out) {
  out->set_valid(in.valid);
  out->set_error(in.error);
  out->set_median_s(in.median_s);
  out->set_min_s(in.min_s);
  out->set_max_s(in.max_s);
  out->set_samples(in.samples);
  out->set_warmup(in.warmup);
  MeasureMethodToProto(in.method, out->mutable_method());
}

StatusOr<Measurement> FromProto(const pb::Measurement& in) {
  Measurement m;
  m.valid = in.valid();
  m.error = in.error();
  m.median_s = in.median_s();
  m.min_s = in.min_s();
  m.max_s = in.max_s();
  m.samples = in.samples();
  m.warmup = in.warmup();
  TR_ASSIGN_OR_RETURN(m.method, MeasureMethodFromProto("measurement.method", in.method()));
  return m;
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

void ToProto(const DeviceInfo& in, pb::Device* out) {
  out->set_backend(in.backend);
  out->set_uuid(in.uuid);
  out->set_name(in.name);
  out->set_memory_bytes(in.memory_bytes);
  for (const auto& [k, v] : in.attributes) (*out->mutable_attributes())[k] = v;
  out->set_library_version(in.library_version);
}

DeviceInfo FromProto(const pb::Device& in) {
  DeviceInfo d;
  d.backend = in.backend();
  d.uuid = in.uuid();
  d.name = in.name();
  d.memory_bytes = in.memory_bytes();
  for (const auto& [k, v] : in.attributes()) d.attributes[k] = v;
  d.library_version = in.library_version();
  return d;
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

}  // namespace transposed::worker
