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
