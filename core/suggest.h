// "Did you mean ...?": the known name nearest to a mistyped one (a command, a flag, a config
// key), for error messages. Levenshtein distance, at most two edits away (or the typed word a
// prefix of the name). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace transposed {

// Edits (insert, delete, replace one byte) that turn `a` into `b`.
size_t EditDistance(const std::string& a, const std::string& b);

// The name of `names` nearest to `word`: at most two edits away, or one `word` begins (ties: the
// first listed). Empty when none is that near, or `word` is one of them.
std::string ClosestName(const std::string& word, const std::vector<std::string>& names);

}  // namespace transposed
