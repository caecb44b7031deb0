// Binary elementwise arithmetic (add/sub with alpha, mul, div, maximum,
// minimum, pow, remainder, floor/trunc division, atan2) and bitwise ops, and
// binary_kernel(), which also hands out the comparisons
// (elementwise_compare.cpp) and the elementwise backward ops
// (elementwise_backward.cpp). Formulas follow PyTorch's CPU kernels
// (BinaryOpsKernel.cpp, Activation.cpp, c10/util/generic_math.h).
#include "elementwise_binary.h"

#include "openneuron/kernels/kernels.h"
#include "wrapping.h"

namespace openneuron::kernels {
namespace detail {
namespace {

template <class C> struct AddF {
  C alpha;
  Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    // PyTorch's vectorised add is fmadd(b, alpha, a): one rounding.
    if constexpr (std::is_floating_point_v<C>) return std::fma(b, alpha, a);
    else return add_w(a, mul_w(alpha, b));
  }
};
template <class C> struct SubF {
  C alpha;
  Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return std::fma(b, -alpha, a);
    else return sub_w(a, mul_w(alpha, b));
  }
};
template <class C> struct MulF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const { return mul_w(a, b); }
};
template <class C> struct DivF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const { return a / b; }
};
template <class C> struct MaximumF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? std::numeric_limits<C>::quiet_NaN() : (a < b ? b : a);
    else return a < b ? b : a;
  }
};
template <class C> struct MinimumF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? std::numeric_limits<C>::quiet_NaN() : (b < a ? b : a);
    else return b < a ? b : a;
  }
};

template <class C> C powi(C a, C b) {
  if constexpr (std::is_signed_v<C>) {
    if (b < 0) {
      if (a == 1) return 1;
      if (a == -1) return (b % 2) ? C(-1) : C(1);
      return 0;
    }
  }
  C result = 1;
  while (b) {
    if (b & 1) result = mul_w(result, a);
    b = static_cast<C>(b / 2);
    a = mul_w(a, a);
  }
  return result;
}
template <class C> struct PowF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      // The CPU's pow by a scalar takes these shortcuts (its pow_tensor_scalar kernel);
      // taking them too gives its results bit for bit, not one rounding apart.
      if (b == C(2)) return a * a;
      if (b == C(0.5)) return std::sqrt(a);
      if (b == C(-0.5)) return C(1) / std::sqrt(a);
      if (b == C(-1)) return C(1) / a;
      if (b == C(3)) return a * a * a;
      if (b == C(-2)) return C(1) / (a * a);
      return std::pow(a, b);
    } else {
      return powi(a, b);
    }
  }
};
template <class C> struct RemainderF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      C mod = std::fmod(a, b);
      if ((mod != 0) && ((b < 0) != (mod < 0))) mod += b;
      return mod;
    } else {
      if (b == 0) { ctx.flag(); return 0; }
      if constexpr (std::is_signed_v<C>) if (b == -1) return 0;
      C r = static_cast<C>(a % b);
      if constexpr (std::is_signed_v<C>)
        if ((r != 0) && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
      return r;
    }
  }
};
template <class C> struct FloorDivideF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (b == 0) return a / b;
      C mod = std::fmod(a, b);
      C div = (a - mod) / b;
      if ((mod != 0) && (b < 0) != (mod < 0)) div -= C(1);
      C floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > C(0.5)) floordiv += C(1.0);
      } else {
        floordiv = std::copysign(C(0), a / b);
      }
      return floordiv;
    } else {
      if (b == 0) { ctx.flag(); return 0; }
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return neg_w(a);
        if ((a < 0) != (b < 0)) {
          const C quot = static_cast<C>(a / b);
          const C rem = static_cast<C>(a % b);
          return rem ? static_cast<C>(quot - 1) : quot;
        }
      }
      return static_cast<C>(a / b);
    }
  }
};
template <class C> struct DivTruncF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::trunc(a / b);
    } else {
      if (b == 0) { ctx.flag(); return 0; }
      if constexpr (std::is_signed_v<C>) if (b == -1) return neg_w(a);
      return static_cast<C>(a / b);
    }
  }
};
template <class C> struct Atan2F {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const { return std::atan2(a, b); }
};

template <class C> struct BitAndF { C alpha; Ctx ctx; ON_INLINE C operator()(C a, C b) const { return static_cast<C>(a & b); } };
template <class C> struct BitOrF { C alpha; Ctx ctx; ON_INLINE C operator()(C a, C b) const { return static_cast<C>(a | b); } };
template <class C> struct BitXorF { C alpha; Ctx ctx; ON_INLINE C operator()(C a, C b) const { return static_cast<C>(a ^ b); } };

}  // namespace
}  // namespace detail

onrt_kernel_fn binary_kernel(BinaryOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case BinaryOp::Add: return pick_same<AddF, kAll>(out, in);
    case BinaryOp::Sub: return pick_same<SubF, kNum>(out, in);
    case BinaryOp::Mul: return pick_same<MulF, kAll>(out, in);
    case BinaryOp::Div: return pick_same<DivF, kFloat>(out, in);
    case BinaryOp::Maximum: return pick_same<MaximumF, kAll>(out, in);
    case BinaryOp::Minimum: return pick_same<MinimumF, kAll>(out, in);
    case BinaryOp::Pow: return pick_same<PowF, kNum>(out, in);
    case BinaryOp::Remainder: return pick_same<RemainderF, kNum>(out, in);
    case BinaryOp::FloorDivide: return pick_same<FloorDivideF, kNum>(out, in);
    case BinaryOp::DivTrunc: return pick_same<DivTruncF, kNum>(out, in);
    case BinaryOp::Atan2: return pick_same<Atan2F, kFloat>(out, in);
    case BinaryOp::BitwiseAnd: return pick_same<BitAndF, kInt>(out, in);
    case BinaryOp::BitwiseOr: return pick_same<BitOrF, kInt>(out, in);
    case BinaryOp::BitwiseXor: return pick_same<BitXorF, kInt>(out, in);
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le:
    case BinaryOp::Gt: case BinaryOp::Ge: case BinaryOp::LogicalAnd: case BinaryOp::LogicalOr:
      return compare_kernel(op, out, in);
    case BinaryOp::ThresholdBackward: case BinaryOp::GeluErfBackward:
    case BinaryOp::GeluTanhBackward: case BinaryOp::SigmoidBackward:
    case BinaryOp::TanhBackward: case BinaryOp::SiluBackward:
      return backward_binary_kernel(op, out, in);
  }
  return nullptr;
}

}  // namespace openneuron::kernels
