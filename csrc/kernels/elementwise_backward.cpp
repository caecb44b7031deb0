// Elementwise backward ops (PyTorch's Activation.cpp / BinaryOpsKernel.cpp formulas).
#include "elementwise_binary.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::kernels::detail {
namespace {

// Backward ops: a = grad, b = self (or the forward output).
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

}  // namespace

onrt_kernel_fn backward_binary_kernel(BinaryOp op, DType out, DType in) {
  switch (op) {
    case BinaryOp::ThresholdBackward: return pick_same<ThresholdBackwardF, kNum>(out, in);
    case BinaryOp::GeluErfBackward: return pick_same<GeluErfBackwardF, kFloat>(out, in);
    case BinaryOp::GeluTanhBackward: return pick_same<GeluTanhBackwardF, kFloat>(out, in);
    case BinaryOp::SigmoidBackward: return pick_same<SigmoidBackwardF, kFloat>(out, in);
    case BinaryOp::TanhBackward: return pick_same<TanhBackwardF, kFloat>(out, in);
    case BinaryOp::SiluBackward: return pick_same<SiluBackwardF, kFloat>(out, in);
    default: return nullptr;
  }
}

}  // namespace openneuron::kernels::detail
