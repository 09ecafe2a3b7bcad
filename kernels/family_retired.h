// Rows that left the family: their names may still be stored in users' databases (a stored
// winner's name is its identity), so TransposeConfig::FromName still resolves them to the
// configuration they named, while CheckConfig refuses to run them ("retired from the family").
// Append-only: a row removed from kFamily (kernels/policy.h) moves here with its builder call
// unchanged. The rows are not instantiated and not checked against today's geometry rules (some
// no longer hold: the swizzled realigning tiles predate the shifted-row layout).
//
// Every name any version of the family printed resolves (kernels/family_names_test.cc, from the
// git history of kernels/policy.h, family.inc and config.cc: 113 names, 20 of them retired).
// Why these rows went: docs/design/kernel-family.md.
//
// Internal to kernels/ (included by config.cc only). Constant data; thread-safe.
#pragma once

#include <cstddef>

#include "kernels/policy.h"

namespace transposed::kernels {

// clang-format off
inline constexpr Policy kRetired[] = {
    // Realigning tiles (realign 1) of the swizzled layout and the first padded ones: replaced by
    // the shifted-row layout (469d00e).
    Realign(4, 64, 64, 8, Swizzle()),
    Realign(8, 32, 32, 8, Swizzle()),
    Realign(4, 128, 32, 8, Pad(1)),
    Realign(8, 64, 32, 8, Pad(1)),
    // Shifted-row realigning tiles that never won a problem, and the 1- and 2-byte ones, replaced
    // by the packed realigning tiles (realign 2; ced5b04, 1b331ab).
    Realign(1, 128, 64, 8, Pad(4)),
    Realign(1, 128, 128, 8, Pad(4)),
    Realign(1, 256, 64, 8, Pad(4)),
    Realign(1, 256, 64, 16, Pad(4)),
    Realign(1, 256, 128, 8, Pad(4)),
    Realign(2, 64, 128, 8, Pad(2)),
    Realign(2, 128, 64, 8, Pad(2)),
    Realign(2, 128, 128, 8, Pad(2)),
    Realign(2, 256, 64, 8, Pad(2)),
    Realign(4, 64, 64, 4, Pad(2)),
    Realign(4, 64, 64, 8, Pad(2)),
    Realign(4, 128, 32, 8, Pad(2)),
    Realign(4, 128, 32, 16, Pad(2)),
    Realign(4, 128, 64, 8, Pad(2)),
    Realign(8, 32, 32, 8, Pad(2)),
    Realign(8, 64, 16, 8, Pad(2)),
    Realign(8, 64, 32, 16, Pad(2)),
};
// clang-format on

}  // namespace transposed::kernels
