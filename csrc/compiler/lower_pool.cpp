// Lowerings of the pooling and upsampling ops (Pool2dParams kernels). The
// kernels read and write contiguous [planes, H, W], and max pooling channels-last
// [N, H, W, C] in place; other layouts go through contiguous temporaries.
#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

using kernels::Pool2dKind;

struct PoolInfo {
  Pool2dKind kind;
  bool backward;     // writes the input-sized tensor from the output-sized one
  bool indices_out;  // forward writes indices
  bool indices_in;   // backward reads indices
  int scales;        // scalar operands (scale_h, scale_w)
};

PoolInfo info(Op op) {
  switch (op) {
    case Op::MaxPool2d: return {Pool2dKind::MaxPool, false, true, false, 0};
    case Op::AvgPool2d: return {Pool2dKind::AvgPool, false, false, false, 0};
    case Op::AvgPool2dBackward: return {Pool2dKind::AvgPoolBackward, true, false, false, 0};
    case Op::AdaptiveAvgPool2d: return {Pool2dKind::AdaptiveAvg, false, false, false, 0};
    case Op::AdaptiveAvgPool2dBackward: return {Pool2dKind::AdaptiveAvgBackward, true, false, false, 0};
    case Op::AdaptiveMaxPool2d: return {Pool2dKind::AdaptiveMax, false, true, false, 0};
    case Op::MaxPool2dBackward: return {Pool2dKind::MaxPoolBackward, true, false, true, 0};
    case Op::UpsampleNearest2d: return {Pool2dKind::UpsampleNearest, false, false, false, 2};
    case Op::UpsampleNearest2dBackward: return {Pool2dKind::UpsampleNearestBackward, true, false, false, 2};
    case Op::UpsampleBilinear2d: return {Pool2dKind::UpsampleBilinear, false, false, false, 2};
    default: return {Pool2dKind::UpsampleBilinearBackward, true, false, false, 2};
  }
}

}  // namespace

void lower_pool2d(LowerCtx& ctx) {
  const Op op = ctx.op();
  const PoolInfo pi = info(op);
  ctx.expect_counts(1 + (pi.indices_in ? 1 : 0) + pi.scales, pi.indices_out ? 2 : 1);
  const Ref& src = ctx.in(0);  // forward: in; backward: grad_out
  ctx.expect_tensor(src, "input");
  const Ref& dst = ctx.out(0);  // forward: out; backward: grad_in
  const TensorType& it = pi.backward ? dst.type : src.type;   // input-sized
  const TensorType& ot = pi.backward ? src.type : dst.type;   // output-sized
  const int nd = it.ndim;
  if (nd < 3 || nd > 4 || ot.ndim != nd) ctx.fail("expected [N, C, H, W] or [C, H, W] operands");
  for (int d = 0; d < nd - 2; ++d)
    if (it.sizes[d] != ot.sizes[d]) ctx.fail("batch and channel sizes must match");
  const DType dt = dst.type.dtype;
  if (src.type.dtype != dt) ctx.fail("operands must have one dtype");
  onrt_kernel_fn fn = kernels::pool2d_kernel(pi.kind, dt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  for (int i = 0; i < pi.scales; ++i)
    if (!ctx.in(1 + i).is_scalar()) ctx.fail("scales must be scalars");
  kernels::Pool2dParams p;
  p.kind = pi.kind;
  p.dtype = dt;
  p.planes = 1;
  for (int d = 0; d < nd - 2; ++d) p.planes *= it.sizes[d];
  p.ih = it.sizes[nd - 2];
  p.iw = it.sizes[nd - 1];
  p.oh = ot.sizes[nd - 2];
  p.ow = ot.sizes[nd - 1];
  const bool windowed = op == Op::MaxPool2d || op == Op::AvgPool2d || op == Op::AvgPool2dBackward;
  if (windowed) {
    if (ctx.node().attrs.size() != 8) ctx.fail("expected 8 attrs");
    p.kh = ctx.attr(0, 1);
    p.kw = ctx.attr(1, 1);
    p.sh = ctx.attr(2, 1);
    p.sw = ctx.attr(3, 1);
    p.ph = ctx.attr(4, 0);
    p.pw = ctx.attr(5, 0);
    if (op == Op::MaxPool2d) {
      p.dh = ctx.attr(6, 1);
      p.dw = ctx.attr(7, 1);
    } else {
      p.count_include_pad = static_cast<int32_t>(ctx.attr(6, 1));
      p.divisor_override = ctx.attr(7, 0);
    }
    if (p.kh < 1 || p.kw < 1 || p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1 || p.ph < 0 || p.pw < 0)
      ctx.fail("kernel, stride and dilation must be positive, padding non-negative");
  }
  if (op == Op::UpsampleBilinear2d || op == Op::UpsampleBilinear2dBackward)
    p.align_corners = static_cast<int32_t>(ctx.attr(0, 0));
  if (p.planes == 0 || p.ih * p.iw == 0 || p.oh * p.ow == 0) {
    if (pi.backward && dst.type.numel() > 0) emit_fill(ctx, dst, Ref::imm_float(0));
    return;
  }
  ArgMap am;
  // Max pooling of channels-last [N, C, H, W] into channels-last outputs runs in place.
  auto strictly_channels_last = [](const TensorType& t) {
    return t.ndim == 4 && !t.is_contiguous() && t.is_channels_last();
  };
  if (op == Op::MaxPool2d && strictly_channels_last(src.type) && strictly_channels_last(dst.type) &&
      strictly_channels_last(ctx.out(1).type) && ctx.out(1).type.dtype == DType::Int64) {
    ctx.expect_same_sizes(ctx.out(1), ot, "indices");
    p.planes = it.sizes[0];
    p.channels_last = it.sizes[1];
    p.in = am.tensor(src);
    p.out = am.tensor(dst);
    p.indices = am.tensor(ctx.out(1));
    ctx.emit(op_name(op), fn, p, am);
    return;
  }
  const Ref s = ctx.contiguous(src);
  const Ref d = dst.type.is_contiguous() ? dst : ctx.temp(contiguous_type(dt, nd, dst.type.sizes));
  Ref ix, ix_target;
  if (pi.indices_out) {
    const Ref& io = ctx.out(1);
    ctx.expect_same_sizes(io, ot, "indices");
    if (io.type.dtype != DType::Int64) ctx.fail("indices must be Int64");
    ix_target = io.type.is_contiguous() ? io : ctx.temp(contiguous_type(DType::Int64, nd, io.type.sizes));
    p.indices = am.tensor(ix_target);
  } else if (pi.indices_in) {
    const Ref& ii = ctx.in(1);
    ctx.expect_tensor(ii, "indices");
    ctx.expect_same_sizes(ii, ot, "indices");
    p.indices = am.tensor(ctx.contiguous(ctx.as_dtype(ii, DType::Int64)));
  }
  if (pi.scales) {
    p.scale_h = am.scalar(ctx.in(1 + (pi.indices_in ? 1 : 0)));
    p.scale_w = am.scalar(ctx.in(2 + (pi.indices_in ? 1 : 0)));
  }
  p.in = am.tensor(pi.backward ? d : s);
  p.out = am.tensor(pi.backward ? s : d);
  ctx.emit(op_name(op), fn, p, am);
  if (!dst.type.is_contiguous()) emit_copy(ctx, dst, d);
  if (pi.indices_out && !ctx.out(1).type.is_contiguous()) emit_copy(ctx, ctx.out(1), ix_target);
}

}  // namespace openneuron::compiler::detail
