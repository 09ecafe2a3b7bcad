#include "core/suggest.h"

#include <algorithm>

namespace transposed {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string ClosestName(const std::string& word, const std::vector<std::string>& names) {
  if (word.empty()) return "";
  std::string best;
  size_t best_d = 3;  // at most two edits away
  for (const std::string& name : names) {
    if (name == word) return "";
    const size_t d = EditDistance(word, name);
    const bool prefix = name.rfind(word, 0) == 0;
    if (d < best_d || (prefix && best.empty())) {
      best_d = std::min(d, best_d);
      best = name;
    }
  }
  return best;
}

}  // namespace transposed
