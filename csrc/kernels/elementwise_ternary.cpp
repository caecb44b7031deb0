// Ternary elementwise ops (PyTorch's PointwiseOpsKernel.cpp, TensorCompare.cpp,
// Lerp.h formulas).
#include <limits>

#include "elementwise.h"
#include "openneuron/kernels/kernels.h"
#include "storage.h"
#include "wrapping.h"

namespace openneuron::kernels {
namespace detail {
namespace {

template <class C> struct WhereF {
  C value;
  ON_INLINE C operator()(bool c, C a, C b) const { return c ? a : b; }
};
template <class C> struct AddcmulF {
  C value;
  ON_INLINE C operator()(C self, C t1, C t2) const { return add_w(self, mul_w(mul_w(value, t1), t2)); }
};
template <class C> struct AddcdivF {
  C value;
  ON_INLINE C operator()(C self, C t1, C t2) const { return self + value * t1 / t2; }
};
template <class C> struct LerpF {
  C value;
  ON_INLINE C operator()(C self, C end, C weight) const {
    return std::abs(weight) < C(0.5) ? self + weight * (end - self)
                                     : end - (end - self) * (C(1) - weight);
  }
};
template <class C> struct ClampF {
  C value;
  // min first, then max (so min > max gives max), NaN anywhere propagates.
  ON_INLINE C operator()(C x, C lo, C hi) const {
    if constexpr (std::is_floating_point_v<C>) {
      C r = (x != x || lo != lo) ? std::numeric_limits<C>::quiet_NaN() : (x < lo ? lo : x);
      return (r != r || hi != hi) ? std::numeric_limits<C>::quiet_NaN() : (hi < r ? hi : r);
    } else {
      C r = x < lo ? lo : x;
      return hi < r ? hi : r;
    }
  }
};

template <class OutT, class InT, template <class> class Op>
int ternary_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<InT>;
  Op<C> f{coef<C>(p.coef[0], args)};
  Elementwise<OutT, Op<C>, InT, InT, InT>::run(
      p, args, {scalar_in<C>(p, 0, args), scalar_in<C>(p, 1, args), scalar_in<C>(p, 2, args)}, f);
  return 0;
}

template <class T>
int where_entry(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<T>;
  WhereF<C> f{C{}};
  Elementwise<T, WhereF<C>, bool, T, T>::run(
      p, args, {scalar_in<bool>(p, 0, args), scalar_in<C>(p, 1, args), scalar_in<C>(p, 2, args)}, f);
  return 0;
}

template <template <class> class Op, bool FloatOnly>
onrt_kernel_fn pick(DType out, DType in) {
  if (out != in) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (FloatOnly ? is_float3_v<T> : (is_real9_v<T> && !std::is_same_v<T, bool>))
      return &ternary_entry<T, T, Op>;
    else return nullptr;
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn ternary_kernel(TernaryOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case TernaryOp::Where:
      if (out != in) return nullptr;
      return visit(in, [&](auto t) -> onrt_kernel_fn {
        using T = typename decltype(t)::type;
        if constexpr (is_real9_v<T>) return &where_entry<T>;
        else return nullptr;
      });
    case TernaryOp::Addcmul: return pick<AddcmulF, false>(out, in);
    case TernaryOp::Addcdiv: return pick<AddcdivF, true>(out, in);
    case TernaryOp::Lerp: return pick<LerpF, true>(out, in);
    case TernaryOp::Clamp: return pick<ClampF, false>(out, in);
  }
  return nullptr;
}

}  // namespace openneuron::kernels
