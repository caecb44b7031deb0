// The binary elementwise entry point and its dtype pickers, shared by the
// binary-op translation units (elementwise_binary.cpp, _compare.cpp,
// _backward.cpp: split so they compile in parallel).
#pragma once

#include <atomic>
#include <limits>

#include "elementwise.h"
#include "elementwise_functors.h"
#include "error.h"
#include "storage.h"
#include "vmath.h"

namespace openneuron::kernels::detail {

template <class OutT, class InT, template <class> class Op>
int binary_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<InT>;
  std::atomic<bool> zero_div{false};
  Op<C> f{coef<C>(p.coef[0], args), Ctx{&zero_div}};
  Elementwise<OutT, Op<C>, InT, InT>::run(p, args, {scalar_in<C>(p, 0, args), scalar_in<C>(p, 1, args)},
                                          f);
  if (zero_div.load(std::memory_order_relaxed)) return fail(err, errlen, "ZeroDivisionError");
  return 0;
}

enum Domain { kFloat, kNum, kAll, kInt };

template <class T, Domain D>
inline constexpr bool in_domain_v = D == kFloat ? is_float3_v<T>
                                    : D == kAll ? is_real9_v<T>
                                    : D == kNum ? is_real9_v<T> && !std::is_same_v<T, bool>
                                                : std::is_integral_v<T>;

template <template <class> class Op, Domain D>
inline onrt_kernel_fn pick_same(DType out, DType in) {
  if (out != in) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (in_domain_v<T, D>) return &binary_entry<T, T, Op>;
    else return nullptr;
  });
}

template <template <class> class Op>
inline onrt_kernel_fn pick_bool_out(DType out, DType in) {
  if (out != DType::Bool) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_real9_v<T>) return &binary_entry<bool, T, Op>;
    else return nullptr;
  });
}


onrt_kernel_fn compare_kernel(BinaryOp op, DType out, DType in);
onrt_kernel_fn backward_binary_kernel(BinaryOp op, DType out, DType in);

}  // namespace openneuron::kernels::detail
