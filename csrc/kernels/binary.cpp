// Binary elementwise ops, comparisons, logical/bitwise ops and the
// elementwise backward ops. Formulas follow PyTorch's CPU kernels
// (BinaryOpsKernel.cpp, Activation.cpp, c10/util/generic_math.h).
#include <atomic>
#include <limits>

#include "internal.h"

namespace openneuron::kernels {
namespace detail {
namespace {

// Integer division by zero is reported like PyTorch ("ZeroDivisionError")
// instead of trapping.
struct Ctx {
  std::atomic<bool>* zero_div = nullptr;
  void flag() const { zero_div->store(true, std::memory_order_relaxed); }
};

template <class C> struct AddF {
  C alpha;
  Ctx ctx;
  C operator()(C a, C b) const {
    // PyTorch's vectorised add is fmadd(b, alpha, a): one rounding.
    if constexpr (std::is_floating_point_v<C>) return std::fma(b, alpha, a);
    else return add_w(a, mul_w(alpha, b));
  }
};
template <class C> struct SubF {
  C alpha;
  Ctx ctx;
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return std::fma(b, -alpha, a);
    else return sub_w(a, mul_w(alpha, b));
  }
};
template <class C> struct MulF {
  C alpha; Ctx ctx;
  C operator()(C a, C b) const { return mul_w(a, b); }
};
template <class C> struct DivF {
  C alpha; Ctx ctx;
  C operator()(C a, C b) const { return a / b; }
};
template <class C> struct MaximumF {
  C alpha; Ctx ctx;
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? std::numeric_limits<C>::quiet_NaN() : (a < b ? b : a);
    else return a < b ? b : a;
  }
};
template <class C> struct MinimumF {
  C alpha; Ctx ctx;
  C operator()(C a, C b) const {
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
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return std::pow(a, b);
    else return powi(a, b);
  }
};
template <class C> struct RemainderF {
  C alpha; Ctx ctx;
  C operator()(C a, C b) const {
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
  C operator()(C a, C b) const {
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
  C operator()(C a, C b) const {
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
  C operator()(C a, C b) const { return std::atan2(a, b); }
};

#define ON_CMP(NAME, EXPR)                                  \
  template <class C> struct NAME {                          \
    C alpha; Ctx ctx;                                       \
    bool operator()(C a, C b) const { return EXPR; }        \
  };
ON_CMP(EqF, a == b)
ON_CMP(NeF, a != b)
ON_CMP(LtF, a < b)
ON_CMP(LeF, a <= b)
ON_CMP(GtF, a > b)
ON_CMP(GeF, a >= b)
ON_CMP(LogicalAndF, (a != C(0)) && (b != C(0)))
ON_CMP(LogicalOrF, (a != C(0)) || (b != C(0)))
#undef ON_CMP

template <class C> struct BitAndF { C alpha; Ctx ctx; C operator()(C a, C b) const { return static_cast<C>(a & b); } };
template <class C> struct BitOrF { C alpha; Ctx ctx; C operator()(C a, C b) const { return static_cast<C>(a | b); } };
template <class C> struct BitXorF { C alpha; Ctx ctx; C operator()(C a, C b) const { return static_cast<C>(a ^ b); } };

// Backward ops: a = grad, b = self (or the forward output).
template <class C> struct ThresholdBackwardF {
  C alpha;  // threshold
  Ctx ctx;
  C operator()(C grad, C self) const { return self <= alpha ? C(0) : grad; }
};
template <class C> struct GeluErfBackwardF {
  C alpha; Ctx ctx;
  C operator()(C dy, C x) const {
    const C kAlpha = C(M_SQRT1_2);
    const C kBeta = C(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    const C cdf = C(0.5) * (C(1) + std::erf(x * kAlpha));
    const C pdf = kBeta * std::exp(x * x * C(-0.5));
    return dy * (cdf + x * pdf);
  }
};
template <class C> struct GeluTanhBackwardF {
  C alpha; Ctx ctx;
  C operator()(C dy, C x) const {
    const C kBeta = C(M_SQRT2 * M_2_SQRTPI * 0.5);
    const C kKappa = C(0.044715);
    const C x_sq = x * x;
    const C x_cube = x_sq * x;
    const C inner = kBeta * (x + kKappa * x_cube);
    const C tanh_inner = std::tanh(inner);
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
  C operator()(C a, C b) const { return a * (C(1) - b) * b; }
};
template <class C> struct TanhBackwardF {
  C alpha; Ctx ctx;
  C operator()(C a, C b) const { return a * (C(1) - b * b); }
};
template <class C> struct SiluBackwardF {
  C alpha; Ctx ctx;
  C operator()(C dy, C x) const {
    const C sigmoid = C(1) / (C(1) + std::exp(-x));
    return dy * sigmoid * (C(1) + x * (C(1) - sigmoid));
  }
};

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
onrt_kernel_fn pick_same(DType out, DType in) {
  if (out != in) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (in_domain_v<T, D>) return &binary_entry<T, T, Op>;
    else return nullptr;
  });
}

template <template <class> class Op>
onrt_kernel_fn pick_bool_out(DType out, DType in) {
  if (out != DType::Bool) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_real9_v<T>) return &binary_entry<bool, T, Op>;
    else return nullptr;
  });
}

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
    case BinaryOp::Eq: return pick_bool_out<EqF>(out, in);
    case BinaryOp::Ne: return pick_bool_out<NeF>(out, in);
    case BinaryOp::Lt: return pick_bool_out<LtF>(out, in);
    case BinaryOp::Le: return pick_bool_out<LeF>(out, in);
    case BinaryOp::Gt: return pick_bool_out<GtF>(out, in);
    case BinaryOp::Ge: return pick_bool_out<GeF>(out, in);
    case BinaryOp::LogicalAnd: return pick_bool_out<LogicalAndF>(out, in);
    case BinaryOp::LogicalOr: return pick_bool_out<LogicalOrF>(out, in);
    case BinaryOp::BitwiseAnd: return pick_same<BitAndF, kInt>(out, in);
    case BinaryOp::BitwiseOr: return pick_same<BitOrF, kInt>(out, in);
    case BinaryOp::BitwiseXor: return pick_same<BitXorF, kInt>(out, in);
    case BinaryOp::ThresholdBackward: return pick_same<ThresholdBackwardF, kNum>(out, in);
    case BinaryOp::GeluErfBackward: return pick_same<GeluErfBackwardF, kFloat>(out, in);
    case BinaryOp::GeluTanhBackward: return pick_same<GeluTanhBackwardF, kFloat>(out, in);
    case BinaryOp::SigmoidBackward: return pick_same<SigmoidBackwardF, kFloat>(out, in);
    case BinaryOp::TanhBackward: return pick_same<TanhBackwardF, kFloat>(out, in);
    case BinaryOp::SiluBackward: return pick_same<SiluBackwardF, kFloat>(out, in);
  }
  return nullptr;
}

}  // namespace openneuron::kernels
