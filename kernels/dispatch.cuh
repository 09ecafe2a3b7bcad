// Instantiation of the family from its one table (kernels/policy.h): every row of element size E
// becomes an Entry {config, launcher}, its policy the agent's template arguments. Each
// family_e<E>.cu (generated from family_table.cu.in) defines FamilyTable<E>() from
// MakeFamilyTable<E>(), so the instantiations compile in parallel; launch.cu looks entries up.
// Internal to kernels/. The tables are built once (function-local statics); thread-safe.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/agent_naive.cuh"
#include "kernels/agent_packed_realign.cuh"
#include "kernels/agent_skinny.cuh"
#include "kernels/agent_tile.cuh"
#include "kernels/policy.h"
#include "kernels/vendor.h"

namespace transposed::kernels::internal {

using LaunchFn = Status (*)(const Problem& p, const void* in, void* out, cudaStream_t s,
                            const LaunchOptions& o);
struct Entry {
  TransposeConfig config;
  LaunchFn launch;
};

// The instantiated family for element size E (defined in family_e<E>.cu).
template <int E>
const std::vector<Entry>& FamilyTable();
template <>
const std::vector<Entry>& FamilyTable<1>();
template <>
const std::vector<Entry>& FamilyTable<2>();
template <>
const std::vector<Entry>& FamilyTable<4>();
template <>
const std::vector<Entry>& FamilyTable<8>();
template <>
const std::vector<Entry>& FamilyTable<16>();

// Row I of kFamily, if its element size is E.
template <int E, size_t I>
void AddRow(std::vector<Entry>& t) {
  constexpr Policy P = kFamily[I];
  if constexpr (P.elem == E) {
    if constexpr (P.algorithm == Algorithm::kNaive) {
      t.push_back({P.Config(), &LaunchNaive<E>});
    } else if constexpr (P.algorithm == Algorithm::kCopy) {
      t.push_back({P.Config(), &LaunchCopy});
    } else if constexpr (P.algorithm == Algorithm::kTile) {
      constexpr TilePolicy T = P.tile;
      if constexpr (T.realign == 2) {
        t.push_back({P.Config(),
                     &LaunchPackedRealign<E, T.tile_rows, T.tile_cols * E, T.block_rows, T.walk>});
      } else if constexpr (T.stages > 1) {
        t.push_back({P.Config(),
                     &LaunchTileAsync<E, T.tile_rows, T.tile_cols, T.block_rows, T.stages>});
      } else {
        t.push_back({P.Config(), &LaunchTile<E, T.tile_rows, T.tile_cols, T.block_rows,
                                             T.vec_bytes, T.smem.pad, T.swizzled() ? 1 : 0,
                                             T.realign == 1 ? 1 : 0>});
      }
    } else if constexpr (P.algorithm == Algorithm::kSkinny) {
      t.push_back({P.Config(), &LaunchSkinny<E, P.skinny.len, P.skinny.block_rows>});
    } else if constexpr (P.algorithm == Algorithm::kCublasGeam) {
      t.push_back({P.Config(), &LaunchCublasGeam});
    } else if constexpr (P.algorithm == Algorithm::kCutensorPermute) {
      t.push_back({P.Config(), &LaunchCutensorPermute});
    }
  }
}

template <int E, size_t... I>
std::vector<Entry> MakeRows(std::index_sequence<I...>) {
  std::vector<Entry> t;
  (AddRow<E, I>(t), ...);
  return t;
}

template <int E>
std::vector<Entry> MakeFamilyTable() {
  return MakeRows<E>(std::make_index_sequence<kFamilySize>());
}

}  // namespace transposed::kernels::internal
