// Lowering of the softmax family: Softmax, LogSoftmax and their backward ops
// over any dim (the engine gathers strided rows itself).
#include "lowering.h"

namespace openneuron::compiler::detail {

void lower_softmax(LowerCtx& ctx) {
  kernels::SoftmaxParams p;
  ArgMap am;
  const Op op = ctx.op();
  const bool backward = op == Op::SoftmaxBackward || op == Op::LogSoftmaxBackward;
  ctx.expect_counts(backward ? 2 : 1, 1);
  switch (op) {
    case Op::Softmax: p.op = kernels::SoftmaxOp::Softmax; break;
    case Op::LogSoftmax: p.op = kernels::SoftmaxOp::LogSoftmax; break;
    case Op::SoftmaxBackward: p.op = kernels::SoftmaxOp::SoftmaxBackward; break;
    default: p.op = kernels::SoftmaxOp::LogSoftmaxBackward; break;
  }
  const Ref& in0 = ctx.in(0);
  ctx.expect_tensor(in0, "input");
  const Ref& out = ctx.out(0);
  ctx.expect_same_sizes(out, in0.type, "output");
  p.dim = ctx.wrap_dim(ctx.attr(0, -1), in0.type.ndim);
  if (in0.type.ndim == 0) p.dim = 0;
  onrt_kernel_fn fn = kernels::softmax_kernel(p.op, out.type.dtype, in0.type.dtype);
  if (!fn)
    ctx.fail(std::string("unsupported dtypes ") + dtype_name(in0.type.dtype) + " -> " +
             dtype_name(out.type.dtype));
  if (out.type.numel() == 0) return;
  p.in0 = am.tensor(in0);
  if (backward) {
    ctx.expect_tensor(ctx.in(1), "output");
    ctx.expect_same_sizes(ctx.in(1), in0.type, "output");
    p.in1 = am.tensor(ctx.as_dtype(ctx.in(1), in0.type.dtype));
  }
  p.out = am.tensor(out);
  ctx.emit(op_name(op), fn, p, am);
}

}  // namespace openneuron::compiler::detail
