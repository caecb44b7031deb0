// Integer arithmetic in compute types that wraps on overflow, as PyTorch's
// does (signed overflow must not be undefined behaviour); bool and float
// types get their ordinary operators.
#pragma once

#include <cstdint>
#include <type_traits>

#include "storage.h"

namespace openneuron::kernels::detail {

template <class C>
using wide_unsigned_t = std::conditional_t<(sizeof(C) <= 4), uint32_t, uint64_t>;
template <class C> ON_INLINE C add_w(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) return a || b;
  else if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<wide_unsigned_t<C>>(a) + static_cast<wide_unsigned_t<C>>(b));
  else return a + b;
}
template <class C> ON_INLINE C sub_w(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) return a != b;
  else if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<wide_unsigned_t<C>>(a) - static_cast<wide_unsigned_t<C>>(b));
  else return a - b;
}
template <class C> ON_INLINE C mul_w(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) return a && b;
  else if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<wide_unsigned_t<C>>(a) * static_cast<wide_unsigned_t<C>>(b));
  else return a * b;
}
template <class C> ON_INLINE C neg_w(C a) { return sub_w<C>(C{}, a); }

}  // namespace openneuron::kernels::detail
