// The family's instantiations for 2-byte elements (one file per element size so that the
// instantiations compile in parallel). The list itself is kernels/family.inc.
#include "kernels/transpose_kernels.cuh"

namespace transposed::kernels::internal {

template <>
const std::vector<Entry>& FamilyTable<2>() {
  static const std::vector<Entry> table = [] {
    std::vector<Entry> t;
#define TR_NAIVE(E) AddNaive<E == 2, E>(t);
#define TR_TILE(E, TR, TC, BR, VB, PAD, SWZ) AddTile<E == 2, E, TR, TC, BR, VB, PAD, SWZ>(t);
#define TR_REALIGN(E, TR, TC, BR, PAD, SWZ) AddTile<E == 2, E, TR, TC, BR, 16, PAD, SWZ, 1>(t);
#define TR_ASYNC(E, TR, TC, BR, S) AddAsync<E == 2, E, TR, TC, BR, S>(t);
#define TR_SKINNY(E, L, BR) AddSkinny<E == 2, E, L, BR>(t);
#include "kernels/family.inc"
#undef TR_NAIVE
#undef TR_TILE
#undef TR_REALIGN
#undef TR_SKINNY
#undef TR_ASYNC
    return t;
  }();
  return table;
}

}  // namespace transposed::kernels::internal
