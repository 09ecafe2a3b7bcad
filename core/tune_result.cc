#include "core/tune_result.h"

namespace transposed {

std::string_view PhaseName(Phase p) {
  switch (p) {
    case Phase::kCheck:
      return "check";
    case Phase::kQuick:
      return "quick";
    case Phase::kFinal:
      return "final";
    case Phase::kSkipped:
      return "skipped";
  }
  return "unknown";
}

std::optional<Phase> ParsePhase(std::string_view name) {
  for (Phase p : {Phase::kCheck, Phase::kQuick, Phase::kFinal, Phase::kSkipped}) {
    if (PhaseName(p) == name) return p;
  }
  return std::nullopt;
}

const char* AnswerSourceName(AnswerSource s) {
  switch (s) {
    case AnswerSource::kCache:
      return "cache";
    case AnswerSource::kTuned:
      return "tuned";
    case AnswerSource::kPeer:
      return "peer";
    case AnswerSource::kNearest:
      return "nearest";
    case AnswerSource::kHeuristic:
      return "heuristic";
    case AnswerSource::kShared:
      return "shared";
    case AnswerSource::kPrevious:
      return "previous";
  }
  return "unknown";
}

std::string_view OriginName(Origin o) {
  switch (o) {
    case Origin::kTuned:
      return "tuned";
    case Origin::kImported:
      return "imported";
    case Origin::kPeer:
      return "peer";
    case Origin::kShared:
      return "shared";
  }
  return "unknown";
}

std::optional<Origin> ParseOrigin(std::string_view name) {
  for (Origin o : {Origin::kTuned, Origin::kImported, Origin::kPeer, Origin::kShared}) {
    if (OriginName(o) == name) return o;
  }
  return std::nullopt;
}

}  // namespace transposed
