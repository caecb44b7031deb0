// Binary elementwise arithmetic (add/sub with alpha, mul, div, maximum,
// minimum, pow, remainder, floor/trunc division, atan2) and bitwise ops, and
// binary_kernel(), which also hands out the comparisons
// (elementwise_compare.cpp) and the elementwise backward ops
// (elementwise_backward.cpp). Formulas in elementwise_functors.h.
#include "elementwise_binary.h"
#include "elementwise_functors.h"
#include "openneuron/kernels/kernels.h"
#include "wrapping.h"

namespace openneuron::kernels {

namespace detail {
namespace {

// bfloat16/float16 floor and trunc division as the CPU computes them. With a tensor
// divisor its vectorised kernel works in the half type, each step rounded to it:
// trunc(round(a / b)), and the floor-division steps (fmod, subtract, divide, floor,
// correct) one by one. With a divisor broadcast to every element (a number, a 0-dim or
// one-element tensor) it computes in float. Results differ by one in up to a fifth of
// bfloat16 quotients otherwise.
template <class T>
struct HalfSteps {
  template <class C>
  struct DivTrunc {
    C alpha;
    Ctx ctx;
    ON_INLINE C operator()(C a, C b) const { return std::trunc(round_to<T>(a / b)); }
  };
  template <class C>
  struct FloorDivide {
    C alpha;
    Ctx ctx;
    ON_INLINE C operator()(C a, C b) const {
      const auto r = [](C v) { return round_to<T>(v); };
      if (b == 0) return r(a / b);
      const C mod = r(std::fmod(a, b));
      C div = r(r(a - mod) / b);
      if ((mod != 0) && (b < 0) != (mod < 0)) div = r(div - C(1));
      if (div == 0) return std::copysign(C(0), r(a / b));
      C floordiv = std::floor(div);
      if (r(div - floordiv) > C(0.5)) floordiv = r(floordiv + C(1));
      return floordiv;
    }
  };
};
template <class C>
using HalfStepDivTruncBf16 = HalfSteps<bf16>::DivTrunc<C>;
template <class C>
using HalfStepDivTruncF16 = HalfSteps<f16>::DivTrunc<C>;
template <class C>
using HalfStepFloorBf16 = HalfSteps<bf16>::FloorDivide<C>;
template <class C>
using HalfStepFloorF16 = HalfSteps<f16>::FloorDivide<C>;

// The divisor (operand 2: output, dividend, divisor) reaches every element from one place.
bool divisor_broadcast(const ElementwiseParams& p) {
  if (p.ops[2].kind == Operand::Scalar) return true;
  for (int d = 0; d < p.plan.ndim; ++d)
    if (p.plan.sizes[d] > 1 && p.plan.strides[2][d] != 0) return false;
  return true;
}

template <class T, template <class> class Stepped, template <class> class InFloat>
int half_division_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  return divisor_broadcast(p) ? binary_entry<T, T, InFloat>(params, args, err, errlen)
                              : binary_entry<T, T, Stepped>(params, args, err, errlen);
}

template <template <class> class SteppedBf16, template <class> class SteppedF16,
          template <class> class InFloat>
onrt_kernel_fn half_division(DType out, DType in) {
  if (out != in) return nullptr;
  if (in == DType::BFloat16) return &half_division_entry<bf16, SteppedBf16, InFloat>;
  if (in == DType::Float16) return &half_division_entry<f16, SteppedF16, InFloat>;
  return nullptr;
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
    case BinaryOp::FloorDivide:
      if (auto fn = half_division<HalfStepFloorBf16, HalfStepFloorF16, FloorDivideF>(out, in))
        return fn;
      return pick_same<FloorDivideF, kNum>(out, in);
    case BinaryOp::DivTrunc:
      if (auto fn = half_division<HalfStepDivTruncBf16, HalfStepDivTruncF16, DivTruncF>(out, in))
        return fn;
      return pick_same<DivTruncF, kNum>(out, in);
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
