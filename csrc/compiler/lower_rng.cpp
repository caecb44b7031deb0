// Lowerings of the random ops: Uniform, Normal, Bernoulli, RandInt
// (RandomParams), dropout, Bernoulli with tensor p, exponential, geometric,
// log-normal, randperm, multinomial (RandomExtraParams), and DropoutBackward.
#include "lowering.h"

namespace openneuron::compiler::detail {

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

namespace {

using kernels::RandomExtraOp;

RandomExtraOp extra_op(Op op) {
  switch (op) {
    case Op::Dropout: return RandomExtraOp::Dropout;
    case Op::BernoulliTensor: return RandomExtraOp::BernoulliTensor;
    case Op::Exponential: return RandomExtraOp::Exponential;
    case Op::Geometric: return RandomExtraOp::Geometric;
    case Op::LogNormal: return RandomExtraOp::LogNormal;
    case Op::Randperm: return RandomExtraOp::Randperm;
    default: return RandomExtraOp::Multinomial;
  }
}

// Number of scalar parameters after seed and offset.
int num_params(Op op) {
  switch (op) {
    case Op::Dropout: case Op::Exponential: case Op::Geometric: return 1;
    case Op::LogNormal: return 2;
    default: return 0;
  }
}

bool has_tensor_input(Op op) {
  return op == Op::Dropout || op == Op::BernoulliTensor || op == Op::Multinomial;
}

}  // namespace

void lower_random_extra(LowerCtx& ctx) {
  const Op op = ctx.op();
  const int np = num_params(op);
  const int nin = 2 + np + (has_tensor_input(op) ? 1 : 0);
  ctx.expect_counts(nin, op == Op::Dropout ? 2 : 1);
  for (int i = 0; i < 2 + np; ++i)
    if (!ctx.in(i).is_scalar()) ctx.fail("seed, offset and distribution parameters must be scalars");
  const Ref& out = ctx.out(0);
  Ref in;
  if (has_tensor_input(op)) {
    in = ctx.in(2 + np);
    ctx.expect_tensor(in, "input");
  }
  DType in_dt = in.is_tensor() ? in.type.dtype : out.type.dtype;
  if (op == Op::Dropout || op == Op::BernoulliTensor) ctx.expect_same_sizes(in, out.type, "input");
  if (op == Op::BernoulliTensor && in.type.dtype != DType::Float32) {
    if (!is_floating(in.type.dtype)) ctx.fail("p must be a float tensor");
    in_dt = DType::Float32;
  }
  if (op == Op::Randperm && out.type.ndim != 1) ctx.fail("output must be 1-d");
  if (op == Op::Multinomial) {
    const TensorType& pt = in.type;
    if (pt.ndim < 1 || pt.ndim > 2) ctx.fail("probs must be 1-d or 2-d");
    if (out.type.ndim != pt.ndim || (pt.ndim == 2 && out.type.sizes[0] != pt.sizes[0]))
      ctx.fail("output must be [S] or [N, S] matching probs");
    if (out.type.dtype != DType::Int64) ctx.fail("output must be Int64");
    if (!out.type.is_contiguous()) ctx.fail("output must be contiguous");
  }
  onrt_kernel_fn fn = kernels::random_extra_kernel(extra_op(op), out.type.dtype, in_dt);
  if (!fn)
    ctx.fail(std::string("unsupported dtypes ") + dtype_name(in_dt) + " -> " +
             dtype_name(out.type.dtype));
  if (out.type.numel() == 0) return;
  kernels::RandomExtraParams p;
  ArgMap am;
  p.op = extra_op(op);
  p.seed = am.scalar(ctx.in(0));
  p.offset = am.scalar(ctx.in(1));
  if (np >= 1) p.a = am.scalar(ctx.in(2));
  if (np >= 2) p.b = am.scalar(ctx.in(3));
  if (in.is_tensor()) p.in = am.tensor(ctx.contiguous(ctx.as_dtype(in, in_dt)));
  // Randperm writes any 1-d layout; the others write contiguous targets.
  Ref target = out;
  const bool direct = op == Op::Randperm || out.type.is_contiguous();
  if (!direct) target = ctx.temp(contiguous_type(out.type.dtype, out.type.ndim, out.type.sizes));
  p.out = am.tensor(target);
  Ref mask_target;
  if (op == Op::Dropout) {
    const Ref& mask = ctx.out(1);
    ctx.expect_same_sizes(mask, out.type, "mask");
    if (mask.type.dtype != DType::Bool) ctx.fail("mask must be Bool");
    mask_target = mask.type.is_contiguous()
                      ? mask
                      : ctx.temp(contiguous_type(DType::Bool, mask.type.ndim, mask.type.sizes));
    p.mask = am.tensor(mask_target);
  }
  p.replacement = static_cast<int32_t>(ctx.attr(0, 0));
  ctx.emit(op_name(op), fn, p, am);
  if (!direct) emit_copy(ctx, out, target);
  if (op == Op::Dropout && !ctx.out(1).type.is_contiguous()) emit_copy(ctx, ctx.out(1), mask_target);
}

void lower_dropout_backward(LowerCtx& ctx) {
  ctx.expect_counts(3, 1);
  const Ref& grad = ctx.in(0);
  const Ref& mask = ctx.in(1);
  ctx.expect_tensor(grad, "grad");
  ctx.expect_tensor(mask, "mask");
  if (!ctx.in(2).is_scalar()) ctx.fail("scale must be a scalar");
  const Ref& out = ctx.out(0);
  if (grad.type.dtype != out.type.dtype) ctx.fail("grad must have the output's dtype");
  onrt_kernel_fn fn = kernels::dropout_backward_kernel(out.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(out.type.dtype));
  emit_elementwise(ctx, "DropoutBackward", fn, 0, out, {grad, ctx.as_dtype(mask, DType::Bool)},
                   {ctx.in(2)});
}

}  // namespace openneuron::compiler::detail
