#include "proto/problem_proto.h"

#include "core/text.h"

namespace transposed {

std::string DTypeNameList() {
  std::string s;
  for (DType t : AllDTypes()) {
    if (!s.empty()) s += ", ";
    s += DTypeName(t);
  }
  return s;
}

StatusOr<DType> ParseDTypeField(const std::string& name, const std::string& field) {
  if (name.empty())
    return Status::InvalidArgument(field + ": required (one of " + DTypeNameList() + ")");
  TR_RETURN_IF_ERROR(CheckFieldLength(field, name));
  auto t = ParseDType(name);
  if (!t.has_value())
    return Status::InvalidArgument(field + ": unknown element type " + Quote(name) +
                                   " (expected one of " + DTypeNameList() + ")");
  return *t;
}

StatusOr<Problem> ProblemFromProto(const v1::Problem& p, const std::string& field) {
  Problem out;
  if (p.device().selector_case() == v1::DeviceSelector::kUuid)
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".device.uuid", p.device().uuid()));
  out.rows = p.rows();
  out.cols = p.cols();
  if (p.has_batch()) {
    if (p.batch() <= 0)
      return Status::InvalidArgument(field + ".batch: must be >= 1 (or unset for 1), got " +
                                     std::to_string(p.batch()));
    out.batch = p.batch();
  } else {
    out.batch = 1;
  }
  TR_ASSIGN_OR_RETURN(out.dtype, ParseDTypeField(p.dtype(), field + ".dtype"));
  if (p.ld_in() < 0)
    return Status::InvalidArgument(field + ".ld_in: must be 0 (dense) or >= cols, got " +
                                   std::to_string(p.ld_in()));
  if (p.ld_out() < 0)
    return Status::InvalidArgument(field + ".ld_out: must be 0 (dense) or >= rows, got " +
                                   std::to_string(p.ld_out()));
  out.ld_in = p.ld_in();
  out.ld_out = p.ld_out();
  switch (p.exactness()) {
    case v1::EXACTNESS_BIT:
      out.exactness = Exactness::kBit;
      break;
    case v1::EXACTNESS_VALUE:
      out.exactness = Exactness::kValue;
      break;
    default:
      return Status::InvalidArgument(field + ".exactness: unknown value " +
                                     std::to_string(p.exactness()) +
                                     " (expected EXACTNESS_BIT or EXACTNESS_VALUE)");
  }
  // Where the dtype does not tell them apart, value-exact is the bit-exact problem.
  out.exactness = out.Normalized().exactness;
  return out;
}

v1::Problem ProblemToProto(const Problem& p) {
  v1::Problem out;
  out.set_rows(p.rows);
  out.set_cols(p.cols);
  out.set_batch(p.batch);
  out.set_dtype(std::string(DTypeName(p.dtype)));
  out.set_ld_in(p.ld_in);
  out.set_ld_out(p.ld_out);
  out.set_exactness(p.Normalized().exactness == Exactness::kValue ? v1::EXACTNESS_VALUE
                                                                  : v1::EXACTNESS_BIT);
  return out;
}

}  // namespace transposed
