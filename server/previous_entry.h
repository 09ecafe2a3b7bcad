// Entries of another kernel library version (an upgrade): may one be served at once?
//
// The device class leaves the kernel library version out (core/device_class.h) and each entry
// keeps the version it was measured with (TuneResult::device.library_version), so after an
// upgrade the class's entries are still found. JudgeStored tells what a found entry is worth to
// this build: current (measured with this build's library version: an ordinary hit), provisional
// (measured with another version, and its variant still exists in this build's family with the
// same name and the same parameters: answered at once as SOURCE_PREVIOUS, while a background
// tune re-checks it bit-exact and re-measures it, once for the class through the shared store's
// lease), or gone (its variant is not in this build's family, or has other parameters: a miss).
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>
#include <vector>

#include "core/tune_result.h"

namespace transposed {

enum class StoredVerdict { kCurrent, kProvisional, kGone };
// "current" / "provisional" / "gone"
const char* StoredVerdictName(StoredVerdict v);

// `candidates`: this build's candidates for the entry's problem on the device
// (Backend::Candidates); `library_version`: this build's (kLibraryVersion).
StoredVerdict JudgeStored(const TuneResult& stored, const std::vector<Candidate>& candidates,
                          std::string_view library_version);

}  // namespace transposed
