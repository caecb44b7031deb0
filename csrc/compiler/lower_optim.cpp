// Lowerings of the optim family: the fused optimizer steps (FusedAdam,
// FusedSgd) and NormAll, the whole-tensor norm of _foreach_norm and gradient
// clipping.
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

// param (in(0)): contiguous, of a half or float dtype; grad (in(1)) like it.
const TensorType& check_param_and_grad(LowerCtx& ctx) {
  const Ref& param = ctx.in(0);
  ctx.expect_tensor(param, "param");
  const TensorType& pt = param.type;
  if (!is_half_or_float(pt.dtype)) ctx.fail(std::string("unsupported dtype ") + dtype_name(pt.dtype));
  if (!pt.is_contiguous()) ctx.fail("param must be contiguous");
  check_state(ctx, ctx.in(1), pt, "grad");
  return pt;
}

// lr (in(i)): a scalar or a 1-element float tensor.
void check_lr(LowerCtx& ctx, int i) {
  if (ctx.in(i).is_tensor())
    check_one(ctx, ctx.in(i), "lr", false);
  else if (!ctx.in(i).is_scalar())
    ctx.fail("lr must be a scalar or a tensor");
}

// The checks both optimizers end with: grad_scale and found_inf (in(i),
// in(i + 1)), every output like param; returns the kernel.
onrt_kernel_fn check_scale_outputs(LowerCtx& ctx, int i, const TensorType& pt,
                                   onrt_kernel_fn (*kernel)(DType)) {
  check_one(ctx, ctx.in(i), "grad_scale", true);
  check_one(ctx, ctx.in(i + 1), "found_inf", true);
  for (int o = 0; o < ctx.num_outputs(); ++o) check_state(ctx, ctx.out(o), pt, "output");
  onrt_kernel_fn fn = kernel(pt.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(pt.dtype));
  return fn;
}

void bind_lr(LowerCtx& ctx, ArgMap& am, kernels::FusedOptimParams& p, int i) {
  if (ctx.in(i).is_tensor())
    p.lr_tensor = am.tensor(ctx.in(i));
  else
    p.lr = am.scalar(ctx.in(i));
}

void bind_scale(LowerCtx& ctx, ArgMap& am, kernels::FusedOptimParams& p, int i) {
  if (ctx.in(i).is_tensor()) p.grad_scale = am.tensor(ctx.in(i));
  if (ctx.in(i + 1).is_tensor()) p.found_inf = am.tensor(ctx.in(i + 1));
}

}  // namespace

// FusedAdam: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|none, step, lr,
// beta1, beta2, weight_decay, eps, grad_scale, found_inf
void lower_fused_adam(LowerCtx& ctx) {
  kernels::FusedOptimParams p;
  ArgMap am;
  p.flags = static_cast<uint32_t>(ctx.attr(0, 0));
  const bool amsgrad = p.flags & 1;
  ctx.expect_counts(13, amsgrad ? 5 : 4);
  const TensorType& pt = check_param_and_grad(ctx);
  check_state(ctx, ctx.in(2), pt, "exp_avg");
  check_state(ctx, ctx.in(3), pt, "exp_avg_sq");
  if (amsgrad) check_state(ctx, ctx.in(4), pt, "max_exp_avg_sq");
  else if (!ctx.in(4).is_none()) ctx.fail("max_exp_avg_sq must be None without amsgrad");
  check_one(ctx, ctx.in(5), "step", false);
  check_lr(ctx, 6);
  for (int i = 7; i <= 10; ++i)
    if (!ctx.in(i).is_scalar()) ctx.fail("beta1, beta2, weight_decay and eps must be scalars");
  onrt_kernel_fn fn = check_scale_outputs(ctx, 11, pt, kernels::fused_adam_kernel);
  p.numel = pt.numel();
  p.param = am.tensor(ctx.in(0));
  p.grad = am.tensor(ctx.in(1));
  p.exp_avg = am.tensor(ctx.in(2));
  p.exp_avg_sq = am.tensor(ctx.in(3));
  if (amsgrad) p.max_exp_avg_sq = am.tensor(ctx.in(4));
  p.step = am.tensor(ctx.in(5));
  bind_lr(ctx, am, p, 6);
  p.beta1 = am.scalar(ctx.in(7));
  p.beta2 = am.scalar(ctx.in(8));
  p.weight_decay = am.scalar(ctx.in(9));
  p.eps = am.scalar(ctx.in(10));
  bind_scale(ctx, am, p, 11);
  p.out_param = am.tensor(ctx.out(0));
  p.out_grad = am.tensor(ctx.out(1));
  p.out_exp_avg = am.tensor(ctx.out(2));
  p.out_exp_avg_sq = am.tensor(ctx.out(3));
  if (amsgrad) p.out_max_exp_avg_sq = am.tensor(ctx.out(4));
  ctx.emit("FusedAdam", fn, p, am);
}

// FusedSgd: param, grad, buf|none, lr, weight_decay, momentum, dampening, grad_scale, found_inf
void lower_fused_sgd(LowerCtx& ctx) {
  kernels::FusedOptimParams p;
  ArgMap am;
  p.flags = static_cast<uint32_t>(ctx.attr(0, 0));
  if (ctx.num_inputs() != 9) ctx.fail("expected 9 inputs");
  const bool has_buf = ctx.in(2).is_tensor();
  ctx.expect_counts(9, has_buf ? 3 : 2);
  const TensorType& pt = check_param_and_grad(ctx);
  if (has_buf) check_state(ctx, ctx.in(2), pt, "momentum_buffer");
  else if (!ctx.in(2).is_none()) ctx.fail("momentum_buffer must be a tensor or None");
  check_lr(ctx, 3);
  for (int i = 4; i <= 6; ++i)
    if (!ctx.in(i).is_scalar()) ctx.fail("weight_decay, momentum and dampening must be scalars");
  onrt_kernel_fn fn = check_scale_outputs(ctx, 7, pt, kernels::fused_sgd_kernel);
  p.numel = pt.numel();
  p.param = am.tensor(ctx.in(0));
  p.grad = am.tensor(ctx.in(1));
  if (has_buf) p.exp_avg = am.tensor(ctx.in(2));
  bind_lr(ctx, am, p, 3);
  p.weight_decay = am.scalar(ctx.in(4));
  p.beta1 = am.scalar(ctx.in(5));
  p.beta2 = am.scalar(ctx.in(6));
  bind_scale(ctx, am, p, 7);
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
