// PointerAlignment: the byte alignment a configuration's launch wants of its input and output
// pointers (PreparedLaunch::CheckPointers refuses others with INVALID_ARGUMENT): the element
// size, or the vector width of a vectorized tile (vec_bytes above the element size). Callers that
// launch slices (a view starting mid-row) use it to pick another way for a start it cannot load
// (the C ABI's transposed_prepared_alignment, the Python package's plans). Pure host C++, without
// CUDA; thread-safe (no state).
#pragma once

#include "core/problem.h"
#include "transposed/kernels/config.h"

namespace transposed::kernels {

int PointerAlignment(const TransposeConfig& c, const Problem& p);

}  // namespace transposed::kernels
