// The per-element formulas of the unary, binary and elementwise-backward ops,
// in compute type (float for half types). Shared by their op kernels
// (elementwise_unary.cpp, _binary.cpp, _backward.cpp) and the fused elementwise
// kernel (fused_elementwise.cpp), so a fused chain computes each element exactly
// as the unfused ops do. Formulas follow PyTorch's CPU kernels (UnaryOpsKernel.cpp,
// BinaryOpsKernel.cpp, Activation.cpp, c10/util/generic_math.h).
#pragma once

#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "storage.h"
#include "vmath.h"
#include "wrapping.h"

namespace openneuron::kernels::detail {

// Integer division by zero is reported like PyTorch ("ZeroDivisionError")
// instead of trapping.
struct Ctx {
  std::atomic<bool>* zero_div = nullptr;
  void flag() const { zero_div->store(true, std::memory_order_relaxed); }
};

// ---- unary: in -> out

template <class C> struct NegF {
  ON_INLINE C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return -a;  // -(+0) is -0; 0 - (+0) is not
    else return neg_w(a);
  }
};
template <class C> struct AbsF {
  ON_INLINE C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::fabs(a);
    else if constexpr (std::is_unsigned_v<C>) return a;
    else return a < 0 ? neg_w(a) : a;
  }
};
template <class C> struct ExpF { ON_INLINE C operator()(C a) const { return fexp(a); } };
template <class C> struct LogF { ON_INLINE C operator()(C a) const { return std::log(a); } };
template <class C> struct SqrtF { ON_INLINE C operator()(C a) const { return std::sqrt(a); } };
template <class C> struct RsqrtF { ON_INLINE C operator()(C a) const { return C(1) / std::sqrt(a); } };
template <class C> struct ReciprocalF { ON_INLINE C operator()(C a) const { return C(1) / a; } };
template <class C> struct SinF { ON_INLINE C operator()(C a) const { return std::sin(a); } };
template <class C> struct CosF { ON_INLINE C operator()(C a) const { return std::cos(a); } };
template <class C> struct TanhF { ON_INLINE C operator()(C a) const { return ftanh(a); } };
template <class C> struct ErfF { ON_INLINE C operator()(C a) const { return ferf(a); } };
template <class C> struct SigmoidF {
  ON_INLINE C operator()(C a) const { return C(1) / (C(1) + fexp(-a)); }
};
template <class C> struct SiluF {
  ON_INLINE C operator()(C a) const { return a / (C(1) + fexp(-a)); }
};
template <class C> struct ReluF {
  // NaN stays NaN, like clamp_min(0).
  ON_INLINE C operator()(C a) const { return a < C(0) ? C(0) : a; }
};
template <class C> struct FloorF {
  ON_INLINE C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::floor(a);
    else return a;
  }
};
template <class C> struct CeilF {
  ON_INLINE C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::ceil(a);
    else return a;
  }
};
template <class C> struct RoundF {
  ON_INLINE C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return std::nearbyint(a);  // half to even
    else return a;
  }
};
template <class C> struct SignF {
  ON_INLINE C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>) return a;
    else return static_cast<C>((C(0) < a) - (a < C(0)));
  }
};
template <class C> struct LogicalNotF {
  ON_INLINE bool operator()(C a) const { return !(a != C(0)); }
};
template <class C> struct GeluErfF {
  ON_INLINE C operator()(C x) const {
    const C kAlpha = C(M_SQRT1_2);
    return x * C(0.5) * (C(1) + ferf_gelu(x * kAlpha));
  }
};
template <class C> struct GeluTanhF {
  ON_INLINE C operator()(C x) const {
    const C kBeta = C(M_SQRT2 * M_2_SQRTPI * 0.5);
    const C kKappa = C(0.044715);
    const C x_cube = x * x * x;
    const C inner = kBeta * (x + kKappa * x_cube);
    return C(0.5) * x * (C(1) + ftanh(inner));
  }
};

// ---- binary: a, b -> out. `alpha` is the op's coefficient (add/sub alpha,
// the threshold of ThresholdBackward); `ctx` reports integer division by zero.

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
      // taking them too gives its results bit for bit, not one rounding apart. They agree
      // with C's pow on every special value, so a tensor exponent (pow on the CPU) may
      // take them too; its sqrt and rsqrt shortcuts do not ((-inf) ** 0.5 is inf, sqrt(-inf)
      // NaN): the bridge launches Sqrt or Rsqrt for a scalar exponent of 0.5 or -0.5.
      if (b == C(2)) return a * a;
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

// ---- elementwise backward: a = grad, b = self (or the forward output).
template <class C> struct ThresholdBackwardF {
  C alpha;  // threshold
  Ctx ctx;
  ON_INLINE C operator()(C grad, C self) const { return self <= alpha ? C(0) : grad; }
};
template <class C> struct GeluErfBackwardF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C dy, C x) const {
    const C kAlpha = C(M_SQRT1_2);
    const C kBeta = C(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    const C cdf = C(0.5) * (C(1) + ferf_gelu(x * kAlpha));
    const C pdf = kBeta * fexp(x * x * C(-0.5));
    return dy * (cdf + x * pdf);
  }
};
template <class C> struct GeluTanhBackwardF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C dy, C x) const {
    const C kBeta = C(M_SQRT2 * M_2_SQRTPI * 0.5);
    const C kKappa = C(0.044715);
    const C x_sq = x * x;
    const C x_cube = x_sq * x;
    const C inner = kBeta * (x + kKappa * x_cube);
    const C tanh_inner = ftanh(inner);
    const C left = C(0.5) * x;
    const C right = C(1) + tanh_inner;
    const C left_derivative = C(0.5) * right;
    const C right_derivative = left * (C(1) - tanh_inner * tanh_inner) * kBeta *
                               (C(1) + C(3) * kKappa * x_sq);
    return dy * (left_derivative + right_derivative);
  }
};
template <class C> struct SigmoidBackwardF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const { return a * (C(1) - b) * b; }
};
template <class C> struct TanhBackwardF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C a, C b) const { return a * (C(1) - b * b); }
};
template <class C> struct SiluBackwardF {
  C alpha; Ctx ctx;
  ON_INLINE C operator()(C dy, C x) const {
    const C sigmoid = C(1) / (C(1) + fexp(-x));
    return dy * sigmoid * (C(1) + x * (C(1) - sigmoid));
  }
};

}  // namespace openneuron::kernels::detail
