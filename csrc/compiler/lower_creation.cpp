// Lowerings of the creation ops: arange and the RNG family.
#include "lowering.h"

namespace openneuron::compiler::detail {

void lower_arange(LowerCtx& ctx) {
  ctx.expect_counts(2, 1);
  const Ref& out = ctx.out(0);
  if (!ctx.in(0).is_scalar() || !ctx.in(1).is_scalar()) ctx.fail("start and step must be scalars");
  if (out.type.ndim != 1) ctx.fail("output must be 1-d");
  onrt_kernel_fn fn = kernels::arange_kernel(out.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(out.type.dtype));
  if (out.type.numel() == 0) return;
  kernels::ArangeParams p;
  ArgMap am;
  p.start = am.scalar(ctx.in(0));
  p.step = am.scalar(ctx.in(1));
  p.out = am.tensor(out);
  ctx.emit("Arange", fn, p, am);
}

void lower_random(LowerCtx& ctx) {
  kernels::RandomParams p;
  int nparams = 2;
  switch (ctx.op()) {
    case Op::Uniform: p.op = kernels::RandomOp::Uniform; break;
    case Op::Normal: p.op = kernels::RandomOp::Normal; break;
    case Op::Bernoulli: p.op = kernels::RandomOp::Bernoulli; nparams = 1; break;
    case Op::RandInt: p.op = kernels::RandomOp::RandInt; break;
    default: ctx.fail("not a random op");
  }
  ctx.expect_counts(2 + nparams, 1);
  for (int i = 0; i < 2 + nparams; ++i)
    if (!ctx.in(i).is_scalar()) ctx.fail("operand " + std::to_string(i) + " must be a scalar");
  if (ctx.in(0).kind != ValueKind::ScalarInt || ctx.in(1).kind != ValueKind::ScalarInt)
    ctx.fail("seed and offset must be integer scalars");
  const Ref& out = ctx.out(0);
  onrt_kernel_fn fn = kernels::random_kernel(p.op, out.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(out.type.dtype));
  for (int d = 0; d < out.type.ndim; ++d)
    if (out.type.sizes[d] > 1 && out.type.strides[d] == 0)
      ctx.fail("output has overlapping elements (stride 0)");
  if (out.type.numel() == 0) return;
  ArgMap am;
  p.seed = am.scalar(ctx.in(0));
  p.offset = am.scalar(ctx.in(1));
  p.a = am.scalar(ctx.in(2));
  if (nparams > 1) p.b = am.scalar(ctx.in(3));
  p.out = am.tensor(out);
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

}  // namespace openneuron::compiler::detail
