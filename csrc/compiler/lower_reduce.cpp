// Lowering of Sum/Mean/Prod/Amax/Amin and Var/Std (of deviations) over a dim mask.
#include "lowering.h"

namespace openneuron::compiler::detail {

void lower_reduce(LowerCtx& ctx) {
  const bool moments = ctx.op() == Op::Var || ctx.op() == Op::Std;
  ctx.expect_counts(moments ? 2 : 1, 1);
  kernels::ReduceOp rop;
  switch (ctx.op()) {
    case Op::Sum: rop = kernels::ReduceOp::Sum; break;
    case Op::Mean: rop = kernels::ReduceOp::Mean; break;
    case Op::Prod: rop = kernels::ReduceOp::Prod; break;
    case Op::Amax: rop = kernels::ReduceOp::Amax; break;
    case Op::Amin: rop = kernels::ReduceOp::Amin; break;
    case Op::Var:
      rop = kernels::ReduceOp::Var;
      break;
    case Op::Std:
      rop = kernels::ReduceOp::Std;
      break;
    default: ctx.fail("not a reduction");
  }
  const Ref& in = ctx.in(0);
  ctx.expect_tensor(in, "input");
  const Ref& out = ctx.out(0);
  const TensorType& it = in.type;
  const TensorType& ot = out.type;
  const int64_t mask = ctx.attr(0, -1);
  if (mask < 0 || (it.ndim < 32 && (mask >> it.ndim) != 0))
    ctx.fail("attr[0] (dim mask) " + std::to_string(mask) + " does not fit " +
             std::to_string(it.ndim) + " dims");
  if (ot.ndim != it.ndim) ctx.fail("output must keep the input's dims (reduced dims of size 1)");
  for (int d = 0; d < it.ndim; ++d) {
    const bool red = (mask >> d) & 1;
    if (red ? ot.sizes[d] != 1 : ot.sizes[d] != it.sizes[d])
      ctx.fail("output size of dim " + std::to_string(d) + " does not match the reduction");
    if (!red && ot.sizes[d] > 1 && ot.strides[d] == 0)
      ctx.fail("output has overlapping elements (stride 0)");
    if (red && it.sizes[d] == 0 && (rop == kernels::ReduceOp::Amax || rop == kernels::ReduceOp::Amin))
      ctx.fail("cannot reduce over a zero-size dim " + std::to_string(d) + " (no identity)");
  }
  DType id = it.dtype;
  onrt_kernel_fn fn = kernels::reduce_kernel(rop, ot.dtype, id);
  Ref src = in;
  if (!fn) {
    // Other dtype pairs: convert the input first (PyTorch casts before reducing).
    fn = kernels::reduce_kernel(rop, ot.dtype, ot.dtype);
    if (!fn)
      ctx.fail(std::string("unsupported dtypes ") + dtype_name(id) + " -> " + dtype_name(ot.dtype));
    src = ctx.as_dtype(in, ot.dtype);
  }
  if (ot.numel() == 0) return;
  kernels::ReduceParams p;
  ArgMap am;
  p.op = rop;
  p.in_dtype = src.type.dtype;
  p.out_dtype = ot.dtype;
  p.in = am.tensor(src);
  p.out = am.tensor(out);
  p.plan = kernels::make_reduce_plan(src.type, ot, static_cast<uint32_t>(mask));
  if (moments) p.divisor = scalar_arg(ctx, am, ctx.in(1), "divisor");
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

}  // namespace openneuron::compiler::detail
