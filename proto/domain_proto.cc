#include "proto/domain_proto.h"

#include <cmath>
#include <utility>

#include "core/device_class.h"
#include "core/problem.h"
#include "core/text.h"
#include "proto/measure_method_proto.h"

namespace transposed {

v1::Device DeviceToProto(const DeviceInfo& d) {
  v1::Device out;
  out.set_index(d.index);
  out.set_uuid(d.uuid);
  out.set_name(d.name);
  out.set_backend(d.backend);
  out.set_memory_bytes(d.memory_bytes);
  out.set_library_version(d.library_version);
  out.set_fingerprint(d.Fingerprint());
  for (const auto& [k, v] : d.attributes) (*out.mutable_attributes())[k] = v;
  out.set_device_class(ClassOf(d).key);
  return out;
}

StatusOr<DeviceInfo> DeviceFromProto(const std::string& field, const v1::Device& d) {
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"backend", &d.backend()},
        {"uuid", &d.uuid()},
        {"name", &d.name()},
        {"library_version", &d.library_version()}}) {
    const std::string f = field + "." + name;
    if (value->empty()) return Status::InvalidArgument(f + ": must not be empty");
    TR_RETURN_IF_ERROR(CheckFieldLength(f, *value));
  }
  if (d.attributes_size() > 64)
    return Status::InvalidArgument(field + ".attributes: at most 64 attributes");
  DeviceInfo out;
  out.backend = d.backend();
  out.uuid = d.uuid();
  out.name = d.name();
  out.memory_bytes = d.memory_bytes();
  out.library_version = d.library_version();
  for (const auto& [k, v] : d.attributes()) {
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".attributes key", k));
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".attributes[" + Quote(k) + "]", v));
    out.attributes[k] = v;
  }
  // A device whose class does not match its description is corrupt (or edited by hand).
  if (!d.device_class().empty() && d.device_class() != ClassOf(out).key) {
    return Status::InvalidArgument(field + ".device_class: " + Quote(d.device_class()) +
                                   " is not the class of the device described (" +
                                   ClassOf(out).key + ")");
  }
  return out;
}

v1::Variant VariantToProto(const Candidate& c, const std::string& backend) {
  v1::Variant out;
  out.set_name(c.name);
  out.set_backend(backend);
  for (const auto& [k, v] : c.params) (*out.mutable_params())[k] = v;
  return out;
}

StatusOr<Candidate> VariantFromProto(const std::string& field, const v1::Variant& v) {
  if (v.name().empty()) return Status::InvalidArgument(field + ".name: must not be empty");
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".name", v.name()));
  if (v.params_size() > 64)
    return Status::InvalidArgument(field + ".params: at most 64 parameters");
  Candidate c;
  c.name = v.name();
  for (const auto& [k, value] : v.params()) {
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".params key", k));
    c.params[k] = value;
  }
  return c;
}

v1::Measurement MeasurementToProto(const Measurement& m, int64_t problem_bytes) {
  v1::Measurement out;
  out.set_valid(m.valid);
  out.set_error(m.error);
  out.set_median_s(m.median_s);
  out.set_min_s(m.min_s);
  out.set_max_s(m.max_s);
  out.set_rel_spread(m.rel_spread());
  out.set_samples(m.samples);
  out.set_warmup(m.warmup);
  out.set_gbps(EffectiveGBps(problem_bytes, m.median_s));
  MeasureMethodToProto(m.method, out.mutable_method());
  return out;
}

Status CheckSeconds(const std::string& field, double v, bool positive) {
  if (!std::isfinite(v) || v < 0 || (positive && v == 0) || v > 86400) {
    return Status::InvalidArgument(field + ": must be a finite number of seconds in " +
                                   (positive ? "(0, 86400]" : "[0, 86400]") + ", got " +
                                   std::to_string(v));
  }
  return Status::OK();
}

StatusOr<Measurement> MeasurementFromProto(const std::string& field, const v1::Measurement& m,
                                           bool must_be_valid) {
  Measurement out;
  out.valid = m.valid();
  if (must_be_valid && !out.valid) return Status::InvalidArgument(field + ".valid: must be true");
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".error", m.error(), 4096));
  out.error = m.error();
  TR_ASSIGN_OR_RETURN(out.method, MeasureMethodFromProto(field + ".method", m.method()));
  if (out.valid) {
    TR_RETURN_IF_ERROR(CheckSeconds(field + ".median_s", m.median_s(), true));
    TR_RETURN_IF_ERROR(CheckSeconds(field + ".min_s", m.min_s(), true));
    TR_RETURN_IF_ERROR(CheckSeconds(field + ".max_s", m.max_s(), true));
    if (!(m.min_s() <= m.median_s() && m.median_s() <= m.max_s()))
      return Status::InvalidArgument(field + ": must have min_s <= median_s <= max_s");
    if (m.samples() < 1 || m.samples() > 10000000)
      return Status::InvalidArgument(field + ".samples: must be in 1..10000000, got " +
                                     std::to_string(m.samples()));
  } else {
    TR_RETURN_IF_ERROR(CheckSeconds(field + ".median_s", m.median_s(), false));
    TR_RETURN_IF_ERROR(CheckSeconds(field + ".min_s", m.min_s(), false));
    TR_RETURN_IF_ERROR(CheckSeconds(field + ".max_s", m.max_s(), false));
    if (m.samples() < 0 || m.samples() > 10000000)
      return Status::InvalidArgument(field + ".samples: must be in 0..10000000, got " +
                                     std::to_string(m.samples()));
  }
  if (m.warmup() < 0 || m.warmup() > 1000000)
    return Status::InvalidArgument(field + ".warmup: must be in 0..1000000, got " +
                                   std::to_string(m.warmup()));
  out.median_s = m.median_s();
  out.min_s = m.min_s();
  out.max_s = m.max_s();
  out.samples = m.samples();
  out.warmup = m.warmup();
  return out;
}

}  // namespace transposed
