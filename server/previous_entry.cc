#include "server/previous_entry.h"

namespace transposed {

const char* StoredVerdictName(StoredVerdict v) {
  switch (v) {
    case StoredVerdict::kCurrent:
      return "current";
    case StoredVerdict::kProvisional:
      return "provisional";
    case StoredVerdict::kGone:
      return "gone";
  }
  return "unknown";
}

StoredVerdict JudgeStored(const TuneResult& stored, const std::vector<Candidate>& candidates,
                          std::string_view library_version) {
  if (stored.device.library_version == library_version) return StoredVerdict::kCurrent;
  for (const Candidate& c : candidates)
    if (c.name == stored.best.name && c.params == stored.best.params)
      return StoredVerdict::kProvisional;
  return StoredVerdict::kGone;
}

}  // namespace transposed
