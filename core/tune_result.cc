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
  return s == AnswerSource::kCache ? "cache" : "tuned";
}

}  // namespace transposed
