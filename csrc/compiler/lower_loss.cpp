// Lowerings of the losses: NllLoss and its backward, PointwiseLoss and
// PointwiseLossBackward (mse, l1, smooth_l1, huber, binary cross entropy).
#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

bool is_index_dtype(DType d) { return d == DType::Int64 || d == DType::Int32; }

// Shared validation of nll_loss operands; returns C.
int64_t check_nll(LowerCtx& ctx, const Ref& self, const Ref& target, const Ref& weight,
                  int64_t reduction) {
  ctx.expect_tensor(self, "self");
  ctx.expect_tensor(target, "target");
  const TensorType& st = self.type;
  if (st.ndim != 1 && st.ndim != 2) ctx.fail("self must be 1-d or 2-d");
  if (!is_index_dtype(target.type.dtype)) ctx.fail("target must be Int64");
  const int64_t N = st.ndim == 2 ? st.sizes[0] : 1;
  if (st.ndim == 2 ? (target.type.ndim != 1 || target.type.sizes[0] != N)
                   : target.type.numel() != 1 || target.type.ndim > 1)
    ctx.fail("target size does not match self");
  const int64_t C = st.sizes[st.ndim - 1];
  if (weight.is_tensor() && (weight.type.ndim != 1 || weight.type.sizes[0] != C))
    ctx.fail("weight must be [" + std::to_string(C) + "]");
  if (!weight.is_tensor() && !weight.is_none()) ctx.fail("weight must be a tensor or None");
  if (reduction < 0 || reduction > 2) ctx.fail("attr[0] (reduction) must be 0, 1 or 2");
  return C;
}

}  // namespace

void lower_nll_loss(LowerCtx& ctx) {
  ctx.expect_counts(2, 3, 2);
  const Ref& self = ctx.in(0);
  const Ref& target = ctx.in(1);
  const Ref weight = ctx.num_inputs() > 2 ? ctx.in(2) : Ref{};
  const int64_t reduction = ctx.attr(0, 1);
  check_nll(ctx, self, target, weight, reduction);
  const Ref& out = ctx.out(0);
  const Ref& tw = ctx.out(1);
  const DType dt = self.type.dtype;
  onrt_kernel_fn fn = kernels::nll_loss_kernel(dt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  if (out.type.dtype != dt || tw.type.dtype != dt) ctx.fail("outputs must have self's dtype");
  const bool per_sample = reduction == 0 && self.type.ndim == 2;
  if (per_sample ? (out.type.ndim != 1 || out.type.sizes[0] != self.type.sizes[0])
                 : out.type.numel() != 1)
    ctx.fail(per_sample ? "output must be [N]" : "output must be a scalar");
  if (tw.type.numel() != 1) ctx.fail("total_weight must be a scalar");
  kernels::NllLossParams p;
  ArgMap am;
  p.reduction = static_cast<int32_t>(reduction);
  p.ignore_index = ctx.attr(1, -100);
  p.self = am.tensor(self);
  p.target = am.tensor(target);
  if (weight.is_tensor()) p.weight = am.tensor(ctx.as_dtype(weight, dt));
  p.out = am.tensor(out);
  p.total_weight = am.tensor(tw);
  ctx.emit("NllLoss", fn, p, am);
}

void lower_nll_loss_backward(LowerCtx& ctx) {
  ctx.expect_counts(5, 1);
  const Ref& grad_out = ctx.in(0);
  const Ref& self = ctx.in(1);
  const Ref& target = ctx.in(2);
  const Ref& weight = ctx.in(3);
  const Ref& tw = ctx.in(4);
  const int64_t reduction = ctx.attr(0, 1);
  check_nll(ctx, self, target, weight, reduction);
  const Ref& gi = ctx.out(0);
  ctx.expect_same_sizes(gi, self.type, "grad_input");
  const DType dt = gi.type.dtype;
  onrt_kernel_fn fn = kernels::nll_loss_backward_kernel(dt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  ctx.expect_tensor(grad_out, "grad_output");
  ctx.expect_tensor(tw, "total_weight");
  const bool per_sample = reduction == 0 && self.type.ndim == 2;
  if (per_sample ? (grad_out.type.ndim != 1 || grad_out.type.sizes[0] != self.type.sizes[0])
                 : grad_out.type.numel() != 1)
    ctx.fail(per_sample ? "grad_output must be [N]" : "grad_output must be a scalar");
  if (tw.type.numel() != 1) ctx.fail("total_weight must be a scalar");
  if (gi.type.numel() == 0) return;
  kernels::NllLossParams p;
  ArgMap am;
  p.reduction = static_cast<int32_t>(reduction);
  p.ignore_index = ctx.attr(1, -100);
  p.grad_out = am.tensor(ctx.as_dtype(grad_out, dt));
  p.target = am.tensor(target);
  if (weight.is_tensor()) p.weight = am.tensor(ctx.as_dtype(weight, dt));
  p.total_weight = am.tensor(ctx.as_dtype(tw, dt));
  p.grad_in = am.tensor(gi);
  ctx.emit("NllLossBackward", fn, p, am);
}

void lower_pointwise_loss(LowerCtx& ctx) {
  const bool backward = ctx.op() == Op::PointwiseLossBackward;
  ctx.expect_counts(backward ? 5 : 4, 1);
  const int o = backward ? 1 : 0;
  const Ref& self = ctx.in(o);
  const Ref& target = ctx.in(o + 1);
  const Ref& weight = ctx.in(o + 2);
  ctx.expect_tensor(self, "self");
  ctx.expect_tensor(target, "target");
  ctx.expect_same_sizes(target, self.type, "target");
  if (!weight.is_none()) {
    ctx.expect_tensor(weight, "weight");
    ctx.expect_same_sizes(weight, self.type, "weight");
  }
  if (!ctx.in(o + 3).is_scalar()) ctx.fail("param must be a scalar");
  const int64_t kind = ctx.attr(0, 0), reduction = ctx.attr(1, 1);
  if (kind < 0 || kind > 4) ctx.fail("attr[0] (kind) must be 0..4");
  if (reduction < 0 || reduction > 2) ctx.fail("attr[1] (reduction) must be 0, 1 or 2");
  const DType dt = self.type.dtype;
  onrt_kernel_fn fn = kernels::pointwise_loss_kernel(dt, backward);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  const Ref& out = ctx.out(0);
  if (out.type.dtype != dt) ctx.fail("output must have self's dtype");
  if (backward || reduction == 0) ctx.expect_same_sizes(out, self.type, "output");
  else if (out.type.numel() != 1) ctx.fail("output must have one element");
  kernels::PointwiseLossParams p;
  ArgMap am;
  p.kind = static_cast<kernels::LossKind>(kind);
  p.reduction = static_cast<int32_t>(reduction);
  p.numel = self.type.numel();
  if (p.numel == 0 && (backward || reduction == 0)) return;
  p.self = am.tensor(ctx.contiguous(self));
  p.target = am.tensor(ctx.contiguous(ctx.as_dtype(target, dt)));
  if (weight.is_tensor()) p.weight = am.tensor(ctx.contiguous(ctx.as_dtype(weight, dt)));
  p.param = am.scalar(ctx.in(o + 3));
  Ref target_out = out;
  const bool direct = out.type.is_contiguous();
  if (!direct) target_out = ctx.temp(contiguous_type(dt, out.type.ndim, out.type.sizes));
  if (backward) {
    const Ref& go = ctx.in(0);
    ctx.expect_tensor(go, "grad_output");
    if (reduction == 0) ctx.expect_same_sizes(go, self.type, "grad_output");
    else if (go.type.numel() != 1) ctx.fail("grad_output must have one element");
    p.grad_out = am.tensor(ctx.contiguous(ctx.as_dtype(go, dt)));
    p.grad_in = am.tensor(target_out);
  } else {
    p.out = am.tensor(target_out);
  }
  ctx.emit(backward ? "PointwiseLossBackward" : "PointwiseLoss", fn, p, am);
  if (!direct) emit_copy(ctx, out, target_out);
}

}  // namespace openneuron::compiler::detail
