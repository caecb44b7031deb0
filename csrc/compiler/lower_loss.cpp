// Lowerings of PointwiseLoss and PointwiseLossBackward.
#include "lowering.h"

namespace openneuron::compiler::detail {

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
