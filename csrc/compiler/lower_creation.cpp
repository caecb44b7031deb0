// Lowerings of creation and copy: Copy (dtype conversion, any layout), Fill
// and Arange, and the emit_copy/emit_fill helpers every lowering uses to move
// data between its outputs and engine-layout temporaries.
#include "lowering.h"

namespace openneuron::compiler::detail {

void emit_copy(LowerCtx& ctx, const Ref& dst, const Ref& src) {
  if (src.is_scalar()) return emit_fill(ctx, dst, src);
  onrt_kernel_fn fn = kernels::copy_kernel(dst.type.dtype, src.type.dtype);
  if (!fn)
    ctx.fail(std::string("unsupported dtype conversion ") + dtype_name(src.type.dtype) + " -> " +
             dtype_name(dst.type.dtype));
  emit_elementwise(ctx, "copy", fn, 0, dst, {src});
}

void emit_fill(LowerCtx& ctx, const Ref& dst, const Ref& value) {
  onrt_kernel_fn fn = kernels::fill_kernel(dst.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dst.type.dtype));
  emit_elementwise(ctx, "fill", fn, 0, dst, {value});
}

void lower_copy(LowerCtx& ctx) {
  ctx.expect_counts(1, 1);
  const Ref& in = ctx.in(0);
  if (in.is_none()) ctx.fail("input is missing");
  ctx.expect_same_sizes(in, ctx.out(0).type, "input");
  emit_copy(ctx, ctx.out(0), in);
}

void lower_fill(LowerCtx& ctx) {
  ctx.expect_counts(1, 1);
  if (!ctx.in(0).is_scalar()) ctx.fail("value must be a scalar");
  emit_fill(ctx, ctx.out(0), ctx.in(0));
}

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

}  // namespace openneuron::compiler::detail
