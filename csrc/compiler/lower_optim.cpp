// Lowerings of the optimizer ops (FusedAdam, FusedSgd) and NormAll.
#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

bool is_half_or_float(DType d) {
  return d == DType::Float32 || d == DType::BFloat16 || d == DType::Float16;
}

// A 1-element float tensor (step, lr, grad_scale, found_inf) or None.
void check_one(LowerCtx& ctx, const Ref& r, const char* what, bool optional) {
  if (r.is_none() && optional) return;
  if (!r.is_tensor() || r.type.numel() != 1 || !is_floating(r.type.dtype))
    ctx.fail(std::string(what) + " must be a 1-element float tensor" + (optional ? " or None" : ""));
}

// State tensors: contiguous, of the param's dtype and sizes.
void check_state(LowerCtx& ctx, const Ref& r, const TensorType& like, const char* what) {
  ctx.expect_tensor(r, what);
  ctx.expect_same_sizes(r, like, what);
  if (r.type.dtype != like.dtype)
    ctx.fail(std::string(what) + " must have the param's dtype " + dtype_name(like.dtype));
  if (!r.type.is_contiguous()) ctx.fail(std::string(what) + " must be contiguous");
}

}  // namespace

void lower_fused_optim(LowerCtx& ctx) {
  const bool adam = ctx.op() == Op::FusedAdam;
  kernels::FusedOptimParams p;
  ArgMap am;
  p.flags = static_cast<uint32_t>(ctx.attr(0, 0));
  if (adam) {
    const bool amsgrad = p.flags & 1;
    ctx.expect_counts(13, amsgrad ? 5 : 4);
    const Ref& param = ctx.in(0);
    ctx.expect_tensor(param, "param");
    const TensorType& pt = param.type;
    if (!is_half_or_float(pt.dtype)) ctx.fail(std::string("unsupported dtype ") + dtype_name(pt.dtype));
    if (!pt.is_contiguous()) ctx.fail("param must be contiguous");
    check_state(ctx, ctx.in(1), pt, "grad");
    check_state(ctx, ctx.in(2), pt, "exp_avg");
    check_state(ctx, ctx.in(3), pt, "exp_avg_sq");
    if (amsgrad) check_state(ctx, ctx.in(4), pt, "max_exp_avg_sq");
    else if (!ctx.in(4).is_none()) ctx.fail("max_exp_avg_sq must be None without amsgrad");
    check_one(ctx, ctx.in(5), "step", false);
    if (ctx.in(6).is_tensor()) check_one(ctx, ctx.in(6), "lr", false);
    else if (!ctx.in(6).is_scalar()) ctx.fail("lr must be a scalar or a tensor");
    for (int i = 7; i <= 10; ++i)
      if (!ctx.in(i).is_scalar()) ctx.fail("beta1, beta2, weight_decay and eps must be scalars");
    check_one(ctx, ctx.in(11), "grad_scale", true);
    check_one(ctx, ctx.in(12), "found_inf", true);
    for (int i = 0; i < ctx.num_outputs(); ++i) check_state(ctx, ctx.out(i), pt, "output");
    onrt_kernel_fn fn = kernels::fused_adam_kernel(pt.dtype);
    if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(pt.dtype));
    p.numel = pt.numel();
    p.param = am.tensor(param);
    p.grad = am.tensor(ctx.in(1));
    p.exp_avg = am.tensor(ctx.in(2));
    p.exp_avg_sq = am.tensor(ctx.in(3));
    if (amsgrad) p.max_exp_avg_sq = am.tensor(ctx.in(4));
    p.step = am.tensor(ctx.in(5));
    if (ctx.in(6).is_tensor()) p.lr_tensor = am.tensor(ctx.in(6));
    else p.lr = am.scalar(ctx.in(6));
    p.beta1 = am.scalar(ctx.in(7));
    p.beta2 = am.scalar(ctx.in(8));
    p.weight_decay = am.scalar(ctx.in(9));
    p.eps = am.scalar(ctx.in(10));
    if (ctx.in(11).is_tensor()) p.grad_scale = am.tensor(ctx.in(11));
    if (ctx.in(12).is_tensor()) p.found_inf = am.tensor(ctx.in(12));
    p.out_param = am.tensor(ctx.out(0));
    p.out_grad = am.tensor(ctx.out(1));
    p.out_exp_avg = am.tensor(ctx.out(2));
    p.out_exp_avg_sq = am.tensor(ctx.out(3));
    if (amsgrad) p.out_max_exp_avg_sq = am.tensor(ctx.out(4));
    ctx.emit("FusedAdam", fn, p, am);
    return;
  }
  // FusedSgd: param, grad, buf|none, lr, weight_decay, momentum, dampening, grad_scale, found_inf
  if (ctx.num_inputs() != 9) ctx.fail("expected 9 inputs");
  const bool has_buf = ctx.in(2).is_tensor();
  ctx.expect_counts(9, has_buf ? 3 : 2);
  const Ref& param = ctx.in(0);
  ctx.expect_tensor(param, "param");
  const TensorType& pt = param.type;
  if (!is_half_or_float(pt.dtype)) ctx.fail(std::string("unsupported dtype ") + dtype_name(pt.dtype));
  if (!pt.is_contiguous()) ctx.fail("param must be contiguous");
  check_state(ctx, ctx.in(1), pt, "grad");
  if (has_buf) check_state(ctx, ctx.in(2), pt, "momentum_buffer");
  else if (!ctx.in(2).is_none()) ctx.fail("momentum_buffer must be a tensor or None");
  if (ctx.in(3).is_tensor()) check_one(ctx, ctx.in(3), "lr", false);
  else if (!ctx.in(3).is_scalar()) ctx.fail("lr must be a scalar or a tensor");
  for (int i = 4; i <= 6; ++i)
    if (!ctx.in(i).is_scalar()) ctx.fail("weight_decay, momentum and dampening must be scalars");
  check_one(ctx, ctx.in(7), "grad_scale", true);
  check_one(ctx, ctx.in(8), "found_inf", true);
  for (int i = 0; i < ctx.num_outputs(); ++i) check_state(ctx, ctx.out(i), pt, "output");
  onrt_kernel_fn fn = kernels::fused_sgd_kernel(pt.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(pt.dtype));
  p.numel = pt.numel();
  p.param = am.tensor(param);
  p.grad = am.tensor(ctx.in(1));
  if (has_buf) p.exp_avg = am.tensor(ctx.in(2));
  if (ctx.in(3).is_tensor()) p.lr_tensor = am.tensor(ctx.in(3));
  else p.lr = am.scalar(ctx.in(3));
  p.weight_decay = am.scalar(ctx.in(4));
  p.beta1 = am.scalar(ctx.in(5));
  p.beta2 = am.scalar(ctx.in(6));
  if (ctx.in(7).is_tensor()) p.grad_scale = am.tensor(ctx.in(7));
  if (ctx.in(8).is_tensor()) p.found_inf = am.tensor(ctx.in(8));
  p.out_param = am.tensor(ctx.out(0));
  p.out_grad = am.tensor(ctx.out(1));
  if (has_buf) p.out_exp_avg = am.tensor(ctx.out(2));
  ctx.emit("FusedSgd", fn, p, am);
}

void lower_norm_all(LowerCtx& ctx) {
  ctx.expect_counts(2, 1);
  const Ref& in = ctx.in(0);
  ctx.expect_tensor(in, "input");
  if (!ctx.in(1).is_scalar()) ctx.fail("ord must be a scalar");
  const Ref& out = ctx.out(0);
  if (out.type.numel() != 1) ctx.fail("output must have one element");
  onrt_kernel_fn fn = kernels::norm_all_kernel(out.type.dtype, in.type.dtype);
  if (!fn)
    ctx.fail(std::string("unsupported dtypes ") + dtype_name(in.type.dtype) + " -> " +
             dtype_name(out.type.dtype));
  kernels::NormAllParams p;
  ArgMap am;
  p.in = am.tensor(ctx.contiguous(in));
  p.out = am.tensor(out);
  p.ord = am.scalar(ctx.in(1));
  ctx.emit("NormAll", fn, p, am);
}

}  // namespace openneuron::compiler::detail
