#include "proto/measure_method_proto.h"

#include "core/text.h"

namespace transposed {

void MeasureMethodToProto(const MeasureMethod& in, v1::MeasureMethod* out) {
  out->set_timer(in.timer);
  out->set_op(in.op);
  out->set_launches_per_sample(in.launches_per_sample);
  out->set_buffers(in.buffers);
  out->set_working_set_bytes(in.working_set_bytes);
  out->set_cache_bytes(in.cache_bytes);
  out->set_working_set_capped(in.working_set_capped);
  out->set_threads(in.threads);
  out->set_sm_clock_khz(in.sm_clock_khz);
  out->set_memory_clock_khz(in.memory_clock_khz);
  out->set_preempted_retaken(in.preempted_retaken);
  out->set_preempted_kept(in.preempted_kept);
  for (const auto& [k, v] : in.alternatives_median_s) (*out->mutable_alternatives_median_s())[k] = v;
  out->set_final_rounds(in.final_rounds);
  out->set_remeasured_after_rel_spread(in.remeasured_after_rel_spread);
  out->set_remeasured_after_slowdown(in.remeasured_after_slowdown);
  out->set_placements(in.placements);
}

StatusOr<MeasureMethod> MeasureMethodFromProto(const std::string& field,
                                               const v1::MeasureMethod& in) {
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".timer", in.timer(), 64));
  TR_RETURN_IF_ERROR(CheckFieldLength(field + ".op", in.op(), 64));
  if (in.alternatives_median_s_size() > 16)
    return Status::InvalidArgument(field + ".alternatives_median_s: at most 16 entries, got " +
                                   std::to_string(in.alternatives_median_s_size()));
  MeasureMethod m;
  m.timer = in.timer();
  m.op = in.op();
  m.launches_per_sample = in.launches_per_sample();
  m.buffers = in.buffers();
  m.working_set_bytes = in.working_set_bytes();
  m.cache_bytes = in.cache_bytes();
  m.working_set_capped = in.working_set_capped();
  m.threads = in.threads();
  m.sm_clock_khz = in.sm_clock_khz();
  m.memory_clock_khz = in.memory_clock_khz();
  m.preempted_retaken = in.preempted_retaken();
  m.preempted_kept = in.preempted_kept();
  for (const auto& [k, v] : in.alternatives_median_s()) {
    TR_RETURN_IF_ERROR(CheckFieldLength(field + ".alternatives_median_s key", k, 64));
    m.alternatives_median_s[k] = v;
  }
  m.final_rounds = in.final_rounds();
  m.remeasured_after_rel_spread = in.remeasured_after_rel_spread();
  m.remeasured_after_slowdown = in.remeasured_after_slowdown();
  m.placements = in.placements();
  return m;
}

}  // namespace transposed
