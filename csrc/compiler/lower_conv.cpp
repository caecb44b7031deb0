// Lowering of Convolution / ConvolutionBackwardInput / ConvolutionBackwardWeight
// to the tensor engine (oneDNN convolution primitives).
//
// Every case is one oneDNN convolution in "conv view": src [N, Ci, *S],
// weights [Co, Ci/g, *k], dst [N, Co, *D]. A plain convolution's src is its
// input; a transposed convolution is the backward-data pass of the
// convolution whose src is its output. So:
//   Convolution:  forward (bias in the primitive) | transposed: backward data + bias add
//   BackwardInput: backward data                   | transposed: forward
//   BackwardWeight: backward weights (src = input) | transposed: (src = grad_out)
// Operands are used in place when contiguous or channels_last (weights channels_last
// only without groups), else copied to contiguous; half-type cases conv_native
// declines (float16, odd channel counts, backward weights) compute in Float32 and
// round once.
#include <algorithm>

#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

// `t`'s sizes in dtype `d`, dense in channels_last order.
TensorType channels_last_type(DType d, const TensorType& t) {
  TensorType c = t;
  c.dtype = d;
  int64_t st = std::max<int64_t>(t.sizes[1], 1);
  c.strides[1] = 1;
  for (int i = t.ndim - 1; i >= 2; --i) {
    c.strides[i] = st;
    st *= std::max<int64_t>(t.sizes[i], 1);
  }
  c.strides[0] = st;
  return c;
}

bool strictly_channels_last(const TensorType& t) {
  return !t.is_contiguous() && t.is_channels_last();
}

}  // namespace

void lower_conv(LowerCtx& ctx) {
  const Op op = ctx.op();
  ctx.expect_counts(op == Op::Convolution ? 3 : 2, 1);
  const Ref& a = ctx.in(0);  // in | grad_out | grad_out
  const Ref& b = ctx.in(1);  // weight | weight | in
  ctx.expect_tensor(a, "input");
  ctx.expect_tensor(b, "input");
  const Ref& out = ctx.out(0);
  // Roles: x = the module's input, y = its output, w = weight.
  const TensorType& x = op == Op::Convolution ? a.type : op == Op::ConvolutionBackwardInput ? out.type : b.type;
  const TensorType& y = op == Op::Convolution ? out.type : a.type;
  const TensorType& w = op == Op::ConvolutionBackwardWeight ? out.type : b.type;
  const int nd = x.ndim, nsp = nd - 2;
  if (nsp < 1 || nsp > 3) ctx.fail("expected 3-d to 5-d [N, C, *spatial] operands");
  if (y.ndim != nd || w.ndim != nd) ctx.fail("operand ranks do not match");
  if (ctx.node().attrs.size() != static_cast<size_t>(2 + 4 * nsp))
    ctx.fail("expected attrs transposed, groups, then stride, padding, dilation, output_padding per spatial dim");
  const bool transposed = ctx.attr(0, 0) != 0;
  const int64_t groups = ctx.attr(1, 1);
  if (groups < 1) ctx.fail("groups must be positive");
  const DType dt = out.type.dtype;
  for (const Ref* r : {&a, &b})
    if (r->type.dtype != dt) ctx.fail("operands must have the output's dtype");
  if (dt != DType::Float32 && dt != DType::BFloat16 && dt != DType::Float16)
    ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  // A transposed convolution's bias is added after the primitive: in a narrow dtype that
  // rounds twice (the primitive's output, then the sum), and where the bias cancels the
  // convolution the error is many ulps. The CPU accumulates and adds the bias in Float32 and
  // rounds once, so that case computes in Float32 too (exact conversions in, one rounding out).
  const bool bias_after = op == Op::Convolution && transposed && ctx.in(2).is_tensor();
  // The primitive's direction (ConvParams::op) and the channels its sums run over.
  const int32_t prim_op = op == Op::ConvolutionBackwardWeight     ? 2
                          : (op == Op::Convolution) != transposed ? 0
                                                                  : 1;
  const int64_t reduced = prim_op == 0 ? w.sizes[1] : w.sizes[0] / std::max<int64_t>(groups, 1);
  const DType cdt = kernels::conv_native(dt, prim_op, reduced) && !bias_after ? dt : DType::Float32;

  kernels::ConvParams p;
  p.dtype = cdt;
  p.nsp = nsp;
  p.transposed = transposed;
  p.groups = static_cast<int32_t>(groups);
  const TensorType& S = transposed ? y : x;  // conv-view src
  const TensorType& D = transposed ? x : y;  // conv-view dst
  const int64_t co = w.sizes[0], ci_g = w.sizes[1];
  if (co % groups) ctx.fail("weight's first dim must be divisible by groups");
  if (S.sizes[0] != D.sizes[0]) ctx.fail("batch sizes do not match");
  if (S.sizes[1] != ci_g * groups || D.sizes[1] != co)
    ctx.fail("channel counts do not match the weight and groups");
  for (int i = 0; i < nd; ++i) {
    p.src_dims[i] = S.sizes[i];
    p.dst_dims[i] = D.sizes[i];
  }
  int wi = 0;
  if (groups > 1) p.wei_dims[wi++] = groups;
  p.wei_dims[wi++] = co / groups;
  p.wei_dims[wi++] = ci_g;
  for (int i = 0; i < nsp; ++i) p.wei_dims[wi++] = w.sizes[2 + i];
  for (int i = 0; i < nsp; ++i) {
    const int64_t stride = ctx.attr(2 + i, 1), pad = ctx.attr(2 + nsp + i, 0),
                  dil = ctx.attr(2 + 2 * nsp + i, 1);
    if (stride < 1 || dil < 1 || pad < 0) ctx.fail("stride and dilation must be positive, padding non-negative");
    const int64_t kext = (w.sizes[2 + i] - 1) * dil + 1;
    const int64_t s = S.sizes[2 + i], d = D.sizes[2 + i];
    p.stride[i] = stride;
    p.dilation[i] = dil - 1;
    p.pad_l[i] = pad;
    // Symmetric padding when it gives D (PyTorch's floor); otherwise the exact
    // right padding (transposed outputs with output_padding).
    int64_t pr = pad;
    if (s + pad + pr - kext < 0 || (s + pad + pr - kext) / stride + 1 != d) pr = (d - 1) * stride + kext - s - pad;
    if (pr < 0 || pr > pad + stride) ctx.fail("spatial sizes do not match the convolution parameters");
    p.pad_r[i] = pr;
  }
  for (int i = 0; i < nd; ++i)
    if (S.sizes[i] == 0 || D.sizes[i] == 0) {
      // Empty batch or channels: nothing to compute (grad_weight is zero).
      if (op == Op::ConvolutionBackwardWeight) emit_fill(ctx, out, Ref::imm_float(0));
      return;
    }
  onrt_kernel_fn fn = kernels::conv_kernel(cdt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(cdt));

  // An operand in cdt, contiguous or channels_last (read in place; `cl` says which).
  // Grouped weights are 5-d for oneDNN: those are made contiguous.
  // A dtype conversion keeps a channels_last operand's order (a straight copy).
  auto prep = [&](const Ref& r, int32_t* cl, bool weights = false) {
    *cl = strictly_channels_last(r.type) && (!weights || groups == 1);
    if (!*cl) return ctx.contiguous(ctx.as_dtype(r, cdt));
    if (r.type.dtype == cdt) return r;
    Ref x = ctx.temp(channels_last_type(cdt, r.type));
    emit_copy(ctx, x, r);
    return x;
  };
  const bool out_cl =
      strictly_channels_last(out.type) && (op != Op::ConvolutionBackwardWeight || groups == 1);
  const bool out_direct = cdt == dt && (out.type.is_contiguous() || out_cl);
  const Ref target = out_direct
                         ? out
                         : ctx.temp(out_cl ? channels_last_type(cdt, out.type)
                                           : contiguous_type(cdt, out.type.ndim, out.type.sizes));
  const int32_t target_cl = out_cl;
  ArgMap am;
  auto src = [&](const Ref& r, int32_t cl) {
    p.src = am.tensor(r);
    p.src_channels_last = cl;
  };
  auto dst = [&](const Ref& r, int32_t cl) {
    p.dst = am.tensor(r);
    p.dst_channels_last = cl;
  };
  Ref bias_add;  // transposed forward: bias added after the primitive
  int32_t a_cl = 0, b_cl = 0;
  if (op == Op::Convolution) {
    const Ref in = prep(a, &a_cl), wt = prep(b, &p.wei_channels_last, true);
    const Ref& bias = ctx.in(2);
    if (!bias.is_none()) {
      ctx.expect_tensor(bias, "bias");
      if (bias.type.ndim != 1 || bias.type.sizes[0] != out.type.sizes[1]) ctx.fail("bias must be [C_out]");
    }
    if (!transposed) {
      p.op = 0;
      src(in, a_cl);
      dst(target, target_cl);
      if (bias.is_tensor()) p.bias = am.tensor(ctx.contiguous(ctx.as_dtype(bias, cdt)));
    } else {
      p.op = 1;
      dst(in, a_cl);
      src(target, target_cl);
      if (bias.is_tensor()) bias_add = ctx.as_dtype(bias, cdt);
    }
    p.weights = am.tensor(wt);
  } else if (op == Op::ConvolutionBackwardInput) {
    const Ref go = prep(a, &a_cl), wt = prep(b, &p.wei_channels_last, true);
    p.op = transposed ? 0 : 1;
    if (transposed) {
      src(go, a_cl);
      dst(target, target_cl);
    } else {
      dst(go, a_cl);
      src(target, target_cl);
    }
    p.weights = am.tensor(wt);
  } else {
    const Ref go = prep(a, &a_cl), in = prep(b, &b_cl);
    p.op = 2;
    if (transposed) {
      src(go, a_cl);
      dst(in, b_cl);
    } else {
      src(in, b_cl);
      dst(go, a_cl);
    }
    p.weights = am.tensor(target);
    p.wei_channels_last = target_cl;
  }
  ctx.emit(op_name(op), fn, p, am);
  if (bias_add.is_tensor()) {
    // target[n, c, ...] += bias[c]: bias broadcast with stride 0 outside dim 1.
    Ref bb = bias_add;
    bb.type = target.type;
    for (int i = 0; i < nd; ++i) bb.type.strides[i] = 0;
    bb.type.strides[1] = bias_add.type.strides[0];
    onrt_kernel_fn add = kernels::binary_kernel(kernels::BinaryOp::Add, cdt, cdt);
    emit_elementwise(ctx, "ConvBias", add, static_cast<uint16_t>(kernels::BinaryOp::Add), target,
                     {target, bb}, {Ref::imm_int(1)});
  }
  if (!out_direct) emit_copy(ctx, out, target);
}

}  // namespace openneuron::compiler::detail
