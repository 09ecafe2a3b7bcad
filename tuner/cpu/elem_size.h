// WithElemSize: the one switch from a run-time element size (1, 2, 4, 8 or 16 bytes) to the
// compile-time one that the CPU candidates' templates take. f is called with
// std::integral_constant<int, E>; any other size returns otherwise().
//
// Each call site passes its own lambda, so every instantiation is local to its translation unit:
// the instruction-set levels of cpu_simd_impl.h (compiled with different flags) share no symbol.
//
// Thread-safety: a pure function.
#pragma once

#include <type_traits>

namespace transposed::cpu {

template <class F, class Otherwise>
decltype(auto) WithElemSize(int elem_size, F&& f, Otherwise&& otherwise) {
  switch (elem_size) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
  }
  return otherwise();
}

}  // namespace transposed::cpu
