// The elementwise backward ops' kernels (formulas in elementwise_functors.h).
#include "elementwise_binary.h"
#include "elementwise_functors.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::kernels::detail {

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
