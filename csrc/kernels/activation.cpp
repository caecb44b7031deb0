// Activations and unary math (ActOp). Formulas, thresholds and boundaries are
// PyTorch's CPU kernels' (aten/src/ATen/native/cpu/Activation.cpp,
// UnaryOpsKernel.cpp, BinaryOpsKernel.cpp), in compute type: float for half
// types, rounded once on store.
//
// Transcendentals other than exp/tanh (vmath.h) go to glibc's libmvec: the
// declarations below give libm's float functions SIMD clones, and this file is
// compiled with -fno-math-errno -fno-trapping-math (see CMakeLists.txt), so GCC
// vectorises the row loops into calls of e.g. _ZGVdN8v_log1pf (8 lanes on
// AVX2). libmvec is within 4 ulp, inside PyTorch's float32 tolerances like its
// own SLEEF paths; lanes with special inputs (NaN, out of domain) take its
// scalar path, so mostly-invalid inputs run slower.
#include <atomic>
#include <limits>

#include "elementwise.h"
#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "storage.h"
#include "vmath.h"

extern "C" {
#define ON_SIMD_DECL(name) __attribute__((simd("notinbranch"))) float name(float) noexcept;
ON_SIMD_DECL(expm1f)
ON_SIMD_DECL(exp2f)
ON_SIMD_DECL(log1pf)
ON_SIMD_DECL(log2f)
ON_SIMD_DECL(log10f)
ON_SIMD_DECL(tanf)
ON_SIMD_DECL(asinf)
ON_SIMD_DECL(acosf)
ON_SIMD_DECL(atanf)
ON_SIMD_DECL(sinhf)
ON_SIMD_DECL(coshf)
ON_SIMD_DECL(asinhf)
ON_SIMD_DECL(acoshf)
ON_SIMD_DECL(atanhf)
#undef ON_SIMD_DECL
}

namespace openneuron::kernels {
namespace detail {
namespace {

// Float versions through the SIMD-cloned declarations above; other compute
// types (never instantiated for the float-only ops) through <cmath>.
#define ON_LIBM_WRAPPER(fn)                                  \
  template <class C> ON_INLINE C m_##fn(C x) {               \
    if constexpr (std::is_same_v<C, float>) return fn##f(x); \
    else return std::fn(x);                                  \
  }
ON_LIBM_WRAPPER(expm1)
ON_LIBM_WRAPPER(exp2)
ON_LIBM_WRAPPER(log1p)
ON_LIBM_WRAPPER(log2)
ON_LIBM_WRAPPER(log10)
ON_LIBM_WRAPPER(tan)
ON_LIBM_WRAPPER(asin)
ON_LIBM_WRAPPER(acos)
ON_LIBM_WRAPPER(atan)
ON_LIBM_WRAPPER(sinh)
ON_LIBM_WRAPPER(cosh)
ON_LIBM_WRAPPER(asinh)
ON_LIBM_WRAPPER(acosh)
ON_LIBM_WRAPPER(atanh)
#undef ON_LIBM_WRAPPER

// Every functor is {coef[0], coef[1], zero-division flag} so that one entry
// point builds them all; `Flag` names the flag's type. Both arms of a select
// are computed first (as in vmath.h) so that the row loops if-convert.
using Flag = std::atomic<bool>*;

// ------------------------------------------------------------ activations

template <class C> struct SoftplusF {
  C beta, threshold;
  Flag zero_div;
  ON_INLINE C operator()(C x) const {
    const C xb = x * beta;
    const C soft = m_log1p(fexp(xb)) / beta;
    return xb > threshold ? x : soft;
  }
};
template <class C> struct MishF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C x) const { return x * ftanh(m_log1p(fexp(x))); }
};
template <class C> struct HardswishF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C x) const {
    return x * std::min(std::max(x + C(3), C(0)), C(6)) / C(6);
  }
};
template <class C> struct HardsigmoidF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C x) const { return std::min(std::max(x + C(3), C(0)), C(6)) / C(6); }
};
template <class C> struct LogSigmoidF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C x) const { return std::min(x, C(0)) - m_log1p(fexp(-std::fabs(x))); }
};
// input_scale is an operand (a scalar): ElementwiseParams has two coefficients.
template <class C> struct EluF {
  C alpha, scale;
  Flag zero_div;
  ON_INLINE C operator()(C x, C input_scale) const {
    const C neg = m_expm1(x * input_scale) * (alpha * scale);
    const C pos = x * scale;
    return x <= C(0) ? neg : pos;
  }
};
template <class C> struct LeakyReluF {
  C slope, unused;
  Flag zero_div;
  ON_INLINE C operator()(C x) const {
    const C neg = x * slope;
    return x > C(0) ? x : neg;
  }
};
// clamp(x, lo, hi): lo first, then hi (so lo > hi gives hi). A NaN x fails
// both comparisons and passes through; a NaN bound gives NaN, as clamp does.
template <class C> struct HardtanhF {
  C lo, hi;
  Flag zero_div;
  ON_INLINE C operator()(C x) const {
    const C r = x < lo ? lo : x;
    const C c = hi < r ? hi : r;
    if constexpr (std::is_floating_point_v<C>) return (lo != lo || hi != hi) ? lo + hi : c;
    else return c;
  }
};

// ------------------------------------------------------------ unary math

#define ON_UNARY_MATH(NAME, EXPR)                                   \
  template <class C> struct NAME {                                  \
    C unused0, unused1;                                             \
    Flag zero_div;                                                  \
    ON_INLINE C operator()(C x) const { return EXPR; }              \
  };
ON_UNARY_MATH(Exp2F, m_exp2(x))
ON_UNARY_MATH(Expm1F, m_expm1(x))
ON_UNARY_MATH(Log1pF, m_log1p(x))
ON_UNARY_MATH(Log2F, m_log2(x))
ON_UNARY_MATH(Log10F, m_log10(x))
ON_UNARY_MATH(TanF, m_tan(x))
ON_UNARY_MATH(AsinF, m_asin(x))
ON_UNARY_MATH(AcosF, m_acos(x))
ON_UNARY_MATH(AtanF, m_atan(x))
ON_UNARY_MATH(SinhF, m_sinh(x))
ON_UNARY_MATH(CoshF, m_cosh(x))
ON_UNARY_MATH(AsinhF, m_asinh(x))
ON_UNARY_MATH(AcoshF, m_acosh(x))
ON_UNARY_MATH(AtanhF, m_atanh(x))
ON_UNARY_MATH(FracF, x - std::trunc(x))
#undef ON_UNARY_MATH

template <class C> struct TruncF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return std::trunc(x);
    else return x;  // integers are their own truncation
  }
};
template <class C> struct IsInfF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE bool operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return std::fabs(x) == std::numeric_limits<C>::infinity();
    else return false;
  }
};
template <class C> struct IsFiniteF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE bool operator()(C x) const {
    // NaN fails the comparison; infinities equal the bound.
    if constexpr (std::is_floating_point_v<C>)
      return std::fabs(x) < std::numeric_limits<C>::infinity();
    else return true;
  }
};
template <class C> struct FmodF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fmod(a, b);
    } else {
      if (b == 0) {
        zero_div->store(true, std::memory_order_relaxed);
        return 0;
      }
      // INT_MIN % -1 traps on x86; the remainder is 0.
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1)) return 0;
      return static_cast<C>(a % b);
    }
  }
};

// ------------------------------------------------------------ backward

template <class C> struct SoftplusBackwardF {
  C beta, threshold;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const {
    const C xb = x * beta;
    const C z = fexp(xb);
    const C soft = grad * z / (z + C(1));
    return xb > threshold ? grad : soft;
  }
};
template <class C> struct MishBackwardF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const {
    const C sigmoid = C(1) / (C(1) + fexp(-x));
    const C tanh_softplus = ftanh(m_log1p(fexp(x)));
    return grad * (tanh_softplus + x * sigmoid * (C(1) - tanh_softplus * tanh_softplus));
  }
};
template <class C> struct HardswishBackwardF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const {
    // PyTorch 2.x's boundaries: 0 at x <= -3, grad at x >= 3.
    const C mid = grad * ((x / C(3)) + C(0.5));
    return x <= C(-3) ? C(0) : (x < C(3) ? mid : grad);
  }
};
template <class C> struct HardsigmoidBackwardF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const {
    const C mid = grad * (C(1) / C(6));
    return (x > C(-3) && x < C(3)) ? mid : C(0);
  }
};
// PyTorch's CUDA formula (the CPU's with its buffer exp(-|x|) recomputed):
// the forward here saves no buffer.
template <class C> struct LogSigmoidBackwardF {
  C unused0, unused1;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const {
    const bool neg = x < C(0);
    const C max_deriv = neg ? C(1) : C(0);
    const C sign = neg ? C(1) : C(-1);
    const C z = fexp(-std::fabs(x));
    return grad * (max_deriv - sign * (z / (C(1) + z)));
  }
};
template <class C> struct EluBackwardF {
  C alpha, scale;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x, C input_scale) const {
    const C neg = grad * input_scale * (alpha * scale) * fexp(x * input_scale);
    const C pos = grad * scale;
    return x <= C(0) ? neg : pos;
  }
};
template <class C> struct EluBackwardResultF {
  C alpha, scale;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C result, C input_scale) const {
    const C neg = grad * input_scale * (result + alpha * scale);
    const C pos = grad * scale;
    return result <= C(0) ? neg : pos;
  }
};
template <class C> struct LeakyReluBackwardF {
  C slope, unused;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const {
    const C neg = grad * slope;
    return x > C(0) ? grad : neg;
  }
};
template <class C> struct HardtanhBackwardF {
  C lo, hi;
  Flag zero_div;
  ON_INLINE C operator()(C grad, C x) const { return (x <= lo || x >= hi) ? C(0) : grad; }
};

template <class OutT, class InT, template <class> class Op, int NIN>
int act_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<InT>;
  std::atomic<bool> zero_div{false};
  const Op<C> f{coef<C>(p.coef[0], args), coef<C>(p.coef[1], args), &zero_div};
  if constexpr (NIN == 1) {
    Elementwise<OutT, Op<C>, InT>::run(p, args, {scalar_in<C>(p, 0, args)}, f);
  } else if constexpr (NIN == 2) {
    Elementwise<OutT, Op<C>, InT, InT>::run(
        p, args, {scalar_in<C>(p, 0, args), scalar_in<C>(p, 1, args)}, f);
  } else {
    Elementwise<OutT, Op<C>, InT, InT, InT>::run(
        p, args, {scalar_in<C>(p, 0, args), scalar_in<C>(p, 1, args), scalar_in<C>(p, 2, args)},
        f);
  }
  if (zero_div.load(std::memory_order_relaxed)) return fail(err, errlen, "ZeroDivisionError");
  return 0;
}

enum Domain { kFloat, kNum, kAll };

template <class T, Domain D>
inline constexpr bool in_domain_v = D == kFloat ? is_float3_v<T>
                                    : D == kNum ? is_real9_v<T> && !std::is_same_v<T, bool>
                                                : is_real9_v<T>;

template <template <class> class Op, int NIN, Domain D>
onrt_kernel_fn pick(DType out, DType in) {
  if (out != in) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (in_domain_v<T, D>) return &act_entry<T, T, Op, NIN>;
    else return nullptr;
  });
}

template <template <class> class Op>
onrt_kernel_fn pick_bool(DType out, DType in) {
  if (out != DType::Bool) return nullptr;
  return visit(in, [&](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_real9_v<T>) return &act_entry<bool, T, Op, 1>;
    else return nullptr;
  });
}

}  // namespace
}  // namespace detail

onrt_kernel_fn activation_kernel(ActOp op, DType out, DType in) {
  using namespace detail;
  switch (op) {
    case ActOp::Softplus: return pick<SoftplusF, 1, kFloat>(out, in);
    case ActOp::Mish: return pick<MishF, 1, kFloat>(out, in);
    case ActOp::Hardswish: return pick<HardswishF, 1, kFloat>(out, in);
    case ActOp::Hardsigmoid: return pick<HardsigmoidF, 1, kFloat>(out, in);
    case ActOp::LogSigmoid: return pick<LogSigmoidF, 1, kFloat>(out, in);
    case ActOp::Elu: return pick<EluF, 2, kFloat>(out, in);
    case ActOp::LeakyRelu: return pick<LeakyReluF, 1, kFloat>(out, in);
    case ActOp::Hardtanh: return pick<HardtanhF, 1, kNum>(out, in);
    case ActOp::Exp2: return pick<Exp2F, 1, kFloat>(out, in);
    case ActOp::Expm1: return pick<Expm1F, 1, kFloat>(out, in);
    case ActOp::Log1p: return pick<Log1pF, 1, kFloat>(out, in);
    case ActOp::Log2: return pick<Log2F, 1, kFloat>(out, in);
    case ActOp::Log10: return pick<Log10F, 1, kFloat>(out, in);
    case ActOp::Trunc: return pick<TruncF, 1, kNum>(out, in);
    case ActOp::Frac: return pick<FracF, 1, kFloat>(out, in);
    case ActOp::Tan: return pick<TanF, 1, kFloat>(out, in);
    case ActOp::Asin: return pick<AsinF, 1, kFloat>(out, in);
    case ActOp::Acos: return pick<AcosF, 1, kFloat>(out, in);
    case ActOp::Atan: return pick<AtanF, 1, kFloat>(out, in);
    case ActOp::Sinh: return pick<SinhF, 1, kFloat>(out, in);
    case ActOp::Cosh: return pick<CoshF, 1, kFloat>(out, in);
    case ActOp::Asinh: return pick<AsinhF, 1, kFloat>(out, in);
    case ActOp::Acosh: return pick<AcoshF, 1, kFloat>(out, in);
    case ActOp::Atanh: return pick<AtanhF, 1, kFloat>(out, in);
    case ActOp::IsInf: return pick_bool<IsInfF>(out, in);
    case ActOp::IsFinite: return pick_bool<IsFiniteF>(out, in);
    case ActOp::Fmod: return pick<FmodF, 2, kNum>(out, in);
    case ActOp::SoftplusBackward: return pick<SoftplusBackwardF, 2, kFloat>(out, in);
    case ActOp::MishBackward: return pick<MishBackwardF, 2, kFloat>(out, in);
    case ActOp::HardswishBackward: return pick<HardswishBackwardF, 2, kFloat>(out, in);
    case ActOp::HardsigmoidBackward: return pick<HardsigmoidBackwardF, 2, kFloat>(out, in);
    case ActOp::LogSigmoidBackward: return pick<LogSigmoidBackwardF, 2, kFloat>(out, in);
    case ActOp::EluBackward: return pick<EluBackwardF, 3, kFloat>(out, in);
    case ActOp::EluBackwardResult: return pick<EluBackwardResultF, 3, kFloat>(out, in);
    case ActOp::LeakyReluBackward: return pick<LeakyReluBackwardF, 2, kFloat>(out, in);
    case ActOp::HardtanhBackward: return pick<HardtanhBackwardF, 2, kFloat>(out, in);
  }
  return nullptr;
}

}  // namespace openneuron::kernels
