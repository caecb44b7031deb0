// Lowerings of the norms: layer norm, RMS norm, group norm, batch norm and
// their backward ops. The engine wants dense tensors, Float32 weights and
// statistics; other layouts and dtypes go through scratch temporaries.
#include <cmath>

#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

using kernels::NormOp;
using kernels::NormParams;

// A dense tensor of `dt` to write instead of `out` (copied back later).
Ref dense_out(LowerCtx& ctx, const Ref& out, DType dt, Writeback& wb) {
  if (out.type.dtype == dt && out.type.is_contiguous()) return out;
  Ref t = ctx.temp(contiguous_type(dt, out.type.ndim, out.type.sizes));
  wb.copies.emplace_back(out, t);
  return t;
}

// A dense tensor of `dt` holding `in` (absent stays absent).
Ref dense_in(LowerCtx& ctx, const Ref& in, DType dt) {
  if (!in.is_tensor()) return Ref{};
  return ctx.contiguous(ctx.as_dtype(in, dt));
}

// Optional per-feature vector: a tensor of `n` elements or None.
Ref vec_in(LowerCtx& ctx, const Ref& r, int64_t n, const char* what) {
  if (r.is_none()) return Ref{};
  ctx.expect_tensor(r, what);
  if (r.type.numel() != n)
    ctx.fail(std::string(what) + " must have " + std::to_string(n) + " elements");
  return dense_in(ctx, r, DType::Float32);
}

// Channels-last input and output ([N, C, HW] with C innermost, not also contiguous): the
// batch and group norm kernels read and write them in place; other layouts are made
// contiguous.
bool channels_last_in_place(const TensorType& x, const TensorType& y) {
  auto strict = [](const TensorType& t) {
    return t.ndim == 3 && !t.is_contiguous() && t.is_channels_last();
  };
  return strict(x) && strict(y);
}

int64_t prod(const TensorType& t, int b, int e) {
  int64_t p = 1;
  for (int d = b; d < e; ++d) p *= t.sizes[d];
  return p;
}

onrt_kernel_fn norm_fn(LowerCtx& ctx, DType dt) {
  onrt_kernel_fn fn = kernels::norm_kernel(dt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  return fn;
}

Ref stat_out(LowerCtx& ctx, const Ref& out, int64_t n, const char* what, Writeback& wb) {
  if (out.type.numel() != n)
    ctx.fail(std::string(what) + " must have " + std::to_string(n) + " elements");
  if (n == 0) return Ref{};
  return dense_out(ctx, out, DType::Float32, wb);
}

// The input of a norm, x = in(0), or for a backward op x = in(1) with
// grad = in(0) of x's sizes.
const Ref& norm_input(LowerCtx& ctx, bool backward) {
  const Ref& x = ctx.in(backward ? 1 : 0);
  ctx.expect_tensor(x, "input");
  if (backward) {
    ctx.expect_tensor(ctx.in(0), "grad");
    ctx.expect_same_sizes(ctx.in(0), x.type, "grad");
  }
  return x;
}

// LayerNorm/RmsNorm rows: attr[0] = axis, M = prod(sizes[:axis]) rows of
// N = prod(sizes[axis:]).
struct Rows {
  int64_t m, n;
};
Rows norm_rows(LowerCtx& ctx, const TensorType& xt) {
  const int64_t axis = ctx.attr(0, xt.ndim - 1);
  if (axis < 0 || axis > xt.ndim) ctx.fail("attr[0] (axis) out of range");
  return {prod(xt, 0, static_cast<int>(axis)), prod(xt, static_cast<int>(axis), xt.ndim)};
}

// GroupNorm/BatchNorm input x[N, C, *] (see norm_input), viewed as [N, C, HW].
struct Channels {
  const Ref& x;
  int64_t n, c, hw;
};
Channels channel_input(LowerCtx& ctx, bool backward) {
  const Ref& x = norm_input(ctx, backward);
  if (x.type.ndim < 2) ctx.fail("input must be [N, C, *]");
  return {x, x.type.sizes[0], x.type.sizes[1], prod(x.type, 2, x.type.ndim)};
}

NormParams channel_params(NormOp op, const Channels& in) {
  NormParams p;
  p.op = op;
  p.n = in.n;
  p.c = in.c;
  p.hw = in.hw;
  return p;
}

// The weight and bias gradients a backward op writes (p.mask bits 2 and 4):
// `n` elements each, `n_name` naming n in the message. When the input is empty
// they are written as zeros and nothing is left to compute (returns false).
bool check_param_grads(LowerCtx& ctx, const NormParams& p, const Ref& dw, const Ref& db, int64_t n,
                       const char* n_name, bool empty_input) {
  if ((p.mask & 2) && dw.type.numel() != n)
    ctx.fail(std::string("grad_weight must have ") + n_name + " elements");
  if ((p.mask & 4) && db.type.numel() != n)
    ctx.fail(std::string("grad_bias must have ") + n_name + " elements");
  if (!empty_input) return true;
  if ((p.mask & 2) && n) emit_fill(ctx, dw, Ref::imm_float(0));
  if ((p.mask & 4) && n) emit_fill(ctx, db, Ref::imm_float(0));
  return false;
}

// Binds the gradients p.mask asks for: dx = out(0) (x's sizes, dtype dt),
// dweight and dbias in Float32.
void bind_grads(LowerCtx& ctx, ArgMap& am, NormParams& p, const TensorType& xt, DType dt,
                const Ref& dw, const Ref& db, Writeback& wb) {
  if (p.mask & 1) {
    ctx.expect_same_sizes(ctx.out(0), xt, "grad_input");
    p.dx = am.tensor(dense_out(ctx, ctx.out(0), dt, wb));
  }
  if (p.mask & 2) p.dweight = am.tensor(dense_out(ctx, dw, DType::Float32, wb));
  if (p.mask & 4) p.dbias = am.tensor(dense_out(ctx, db, DType::Float32, wb));
}

}  // namespace

// LayerNorm:  x, weight|None, bias|None, eps -> out, mean, rstd; attr[0] = axis
// RmsNorm:    x, weight|None, eps -> out, rstd; attr[0] = axis
void lower_layer_norm(LowerCtx& ctx) {
  const bool rms = ctx.op() == Op::RmsNorm;
  ctx.expect_counts(rms ? 3 : 4, rms ? 2 : 3);
  const Ref& x0 = norm_input(ctx, false);
  const TensorType& xt = x0.type;
  const auto [M, N] = norm_rows(ctx, xt);
  const DType dt = xt.dtype;
  onrt_kernel_fn fn = norm_fn(ctx, dt);
  ctx.expect_same_sizes(ctx.out(0), xt, "output");
  if (ctx.out(0).type.dtype != dt) ctx.fail("output must have the input's dtype");
  Writeback wb;
  ArgMap am;
  NormParams p;
  p.op = NormOp::LayerNorm;
  p.rms = rms;
  p.rows = M;
  p.cols = N;
  p.eps = scalar_arg(ctx, am, ctx.in(rms ? 2 : 3), "eps");
  const Ref w = vec_in(ctx, ctx.in(1), N, "weight");
  const Ref b = rms ? Ref{} : vec_in(ctx, ctx.in(2), N, "bias");
  const Ref mean = rms ? Ref{} : stat_out(ctx, ctx.out(1), M, "mean", wb);
  const Ref rstd = stat_out(ctx, ctx.out(rms ? 1 : 2), M, "rstd", wb);
  if (M * N == 0) {
    // Empty rows: statistics of nothing (mean 0, rstd 1/sqrt(eps) is what
    // PyTorch leaves undefined); nothing to normalise.
    if (mean.is_tensor()) emit_fill(ctx, mean, Ref::imm_float(0));
    if (rstd.is_tensor()) emit_fill(ctx, rstd, Ref::imm_float(NAN));
    wb.flush(ctx);
    return;
  }
  const Ref x = dense_in(ctx, x0, dt);
  const Ref y = dense_out(ctx, ctx.out(0), dt, wb);
  p.x = am.tensor(x);
  p.weight = am.tensor(w);
  p.bias = am.tensor(b);
  p.y = am.tensor(y);
  p.out_mean = am.tensor(mean);
  p.out_rstd = am.tensor(rstd);
  ctx.emit(rms ? "RmsNorm" : "LayerNorm", fn, p, am);
  wb.flush(ctx);
}

// LayerNormBackward: grad, x, mean, rstd, weight|None -> dx, dweight, dbias
// RmsNormBackward:   grad, x, rstd, weight|None -> dx, dweight
// attr[0] = axis, attr[1] = output mask (bit 0 dx, 1 dweight, 2 dbias)
void lower_layer_norm_backward(LowerCtx& ctx) {
  const bool rms = ctx.op() == Op::RmsNormBackward;
  ctx.expect_counts(rms ? 4 : 5, rms ? 2 : 3);
  const Ref& x0 = norm_input(ctx, true);
  const TensorType& xt = x0.type;
  const auto [M, N] = norm_rows(ctx, xt);
  const int64_t mask = ctx.attr(1, 7);
  const DType dt = xt.dtype;
  onrt_kernel_fn fn = norm_fn(ctx, dt);
  if (mask & 1) ctx.expect_same_sizes(ctx.out(0), xt, "grad_input");
  Writeback wb;
  ArgMap am;
  NormParams p;
  p.op = NormOp::LayerNormBackward;
  p.rms = rms;
  p.rows = M;
  p.cols = N;
  p.mask = static_cast<uint8_t>(mask & (rms ? 3 : 7));
  const Ref dw_out = ctx.out(1);
  const Ref db_out = rms ? Ref{} : ctx.out(2);
  if (!check_param_grads(ctx, p, dw_out, db_out, N, "N", M * N == 0)) return;
  const Ref mean = rms ? Ref{} : ctx.in(2);
  const Ref rstd = ctx.in(rms ? 2 : 3);
  ctx.expect_tensor(rstd, "rstd");
  if (!rms) ctx.expect_tensor(mean, "mean");
  if (rstd.type.numel() != M || (!rms && mean.type.numel() != M))
    ctx.fail("mean/rstd must have M elements");
  p.grad = am.tensor(dense_in(ctx, ctx.in(0), dt));
  p.x = am.tensor(dense_in(ctx, x0, dt));
  p.mean = am.tensor(dense_in(ctx, mean, DType::Float32));
  p.rstd = am.tensor(dense_in(ctx, rstd, DType::Float32));
  p.weight = am.tensor(vec_in(ctx, ctx.in(rms ? 3 : 4), N, "weight"));
  bind_grads(ctx, am, p, xt, dt, dw_out, db_out, wb);
  ctx.emit(rms ? "RmsNormBackward" : "LayerNormBackward", fn, p, am);
  wb.flush(ctx);
}

// GroupNorm: x[N, C, *], weight|None, bias|None, eps -> out, mean[N*G], rstd[N*G]; attr[0] = G
void lower_group_norm(LowerCtx& ctx) {
  ctx.expect_counts(4, 3);
  const Channels in = channel_input(ctx, false);
  const TensorType& xt = in.x.type;
  const int64_t G = ctx.attr(0, 1);
  const int64_t N = in.n, C = in.c;
  if (G <= 0 || C % G != 0) ctx.fail("attr[0] (groups) must divide C");
  const DType dt = xt.dtype;
  onrt_kernel_fn fn = norm_fn(ctx, dt);
  ctx.expect_same_sizes(ctx.out(0), xt, "output");
  Writeback wb;
  ArgMap am;
  NormParams p = channel_params(NormOp::GroupNorm, in);
  p.groups = G;
  p.eps = scalar_arg(ctx, am, ctx.in(3), "eps");
  const Ref w = vec_in(ctx, ctx.in(1), C, "weight");
  const Ref b = vec_in(ctx, ctx.in(2), C, "bias");
  const Ref mean = stat_out(ctx, ctx.out(1), N * G, "mean", wb);
  const Ref rstd = stat_out(ctx, ctx.out(2), N * G, "rstd", wb);
  if (N * G == 0) return;
  p.channels_last = xt.numel() > 0 && channels_last_in_place(xt, ctx.out(0).type);
  p.x = am.tensor(p.channels_last ? in.x : dense_in(ctx, in.x, dt));
  p.weight = am.tensor(w);
  p.bias = am.tensor(b);
  p.y = am.tensor(p.channels_last ? ctx.out(0)
                  : xt.numel()    ? dense_out(ctx, ctx.out(0), dt, wb)
                                  : Ref{});
  p.out_mean = am.tensor(mean);
  p.out_rstd = am.tensor(rstd);
  if (!p.y.present()) {
    // C*HW == 0 per group: statistics only (the engine handles D == 0).
    Ref t = ctx.temp(contiguous_type(dt, 1, &N));
    p.y = am.tensor(t);
  }
  ctx.emit("GroupNorm", fn, p, am);
  wb.flush(ctx);
}

// GroupNormBackward: grad, x, mean, rstd, weight|None -> dx, dweight[C], dbias[C];
// attr[0] = G, attr[1] = mask
void lower_group_norm_backward(LowerCtx& ctx) {
  ctx.expect_counts(5, 3);
  const Channels in = channel_input(ctx, true);
  const TensorType& xt = in.x.type;
  const int64_t G = ctx.attr(0, 1);
  const int64_t N = in.n, C = in.c;
  if (G <= 0 || C % G != 0) ctx.fail("attr[0] (groups) must divide C");
  const DType dt = xt.dtype;
  onrt_kernel_fn fn = norm_fn(ctx, dt);
  Writeback wb;
  ArgMap am;
  NormParams p = channel_params(NormOp::GroupNormBackward, in);
  p.groups = G;
  p.mask = static_cast<uint8_t>(ctx.attr(1, 7) & 7);
  if (!check_param_grads(ctx, p, ctx.out(1), ctx.out(2), C, "C", xt.numel() == 0)) return;
  if (ctx.in(2).type.numel() != N * G || ctx.in(3).type.numel() != N * G)
    ctx.fail("mean/rstd must have N*G elements");
  p.grad = am.tensor(dense_in(ctx, ctx.in(0), dt));
  p.x = am.tensor(dense_in(ctx, in.x, dt));
  p.mean = am.tensor(dense_in(ctx, ctx.in(2), DType::Float32));
  p.rstd = am.tensor(dense_in(ctx, ctx.in(3), DType::Float32));
  p.weight = am.tensor(vec_in(ctx, ctx.in(4), C, "weight"));
  bind_grads(ctx, am, p, xt, dt, ctx.out(1), ctx.out(2), wb);
  ctx.emit("GroupNormBackward", fn, p, am);
  wb.flush(ctx);
}

// BatchNorm: x[N, C, *], weight|None, bias|None, running_mean|None,
// running_var|None, momentum, eps -> out, save_mean[C], save_invstd[C];
// attr[0] = training. In training mode the running statistics (when given)
// are updated in place; in eval mode they are required and the saved
// statistics may be empty.
void lower_batch_norm(LowerCtx& ctx) {
  ctx.expect_counts(7, 3);
  const Channels in = channel_input(ctx, false);
  const TensorType& xt = in.x.type;
  const int64_t C = in.c;
  const bool training = ctx.attr(0, 1) != 0;
  const DType dt = xt.dtype;
  onrt_kernel_fn fn = norm_fn(ctx, dt);
  ctx.expect_same_sizes(ctx.out(0), xt, "output");
  Writeback wb;
  ArgMap am;
  NormParams p = channel_params(NormOp::BatchNorm, in);
  p.training = training;
  p.momentum = scalar_arg(ctx, am, ctx.in(5), "momentum");
  p.eps = scalar_arg(ctx, am, ctx.in(6), "eps");
  const Ref w = vec_in(ctx, ctx.in(1), C, "weight");
  const Ref b = vec_in(ctx, ctx.in(2), C, "bias");
  Ref rm, rv;
  for (int k = 3; k <= 4; ++k) {
    const Ref& r = ctx.in(k);
    if (r.is_none()) continue;
    ctx.expect_tensor(r, k == 3 ? "running_mean" : "running_var");
    if (r.type.numel() != C) ctx.fail("running statistics must have C elements");
    Ref d = dense_in(ctx, r, DType::Float32);
    if (training && (d.slot != r.slot || d.offset != r.offset)) wb.copies.emplace_back(r, d);
    (k == 3 ? rm : rv) = d;
  }
  if (!training && (!rm.is_tensor() || !rv.is_tensor()))
    ctx.fail("running_mean and running_var are required in eval mode");
  const Ref sm = ctx.out(1).type.numel() ? stat_out(ctx, ctx.out(1), C, "save_mean", wb) : Ref{};
  const Ref si = ctx.out(2).type.numel() ? stat_out(ctx, ctx.out(2), C, "save_invstd", wb) : Ref{};
  if (xt.numel() == 0 && training) ctx.fail("batch norm of an empty batch in training mode");
  if (C == 0 || xt.numel() == 0) {
    wb.flush(ctx);
    return;
  }
  p.channels_last = channels_last_in_place(xt, ctx.out(0).type);
  p.x = am.tensor(p.channels_last ? in.x : dense_in(ctx, in.x, dt));
  p.weight = am.tensor(w);
  p.bias = am.tensor(b);
  p.running_mean = am.tensor(rm);
  p.running_var = am.tensor(rv);
  p.y = am.tensor(p.channels_last ? ctx.out(0) : dense_out(ctx, ctx.out(0), dt, wb));
  p.out_mean = am.tensor(sm);
  p.out_rstd = am.tensor(si);
  ctx.emit("BatchNorm", fn, p, am);
  wb.flush(ctx);
}

// BatchNormBackward: grad, x, weight|None, running_mean|None, running_var|None,
// save_mean|None, save_invstd|None, eps -> dx, dweight[C], dbias[C];
// attr[0] = training (uses the saved statistics, else the running ones),
// attr[1] = mask
void lower_batch_norm_backward(LowerCtx& ctx) {
  ctx.expect_counts(8, 3);
  const Channels in = channel_input(ctx, true);
  const TensorType& xt = in.x.type;
  const int64_t C = in.c;
  const bool training = ctx.attr(0, 1) != 0;
  const DType dt = xt.dtype;
  onrt_kernel_fn fn = norm_fn(ctx, dt);
  Writeback wb;
  ArgMap am;
  NormParams p = channel_params(NormOp::BatchNormBackward, in);
  p.training = training;
  p.mask = static_cast<uint8_t>(ctx.attr(1, 7) & 7);
  p.eps = scalar_arg(ctx, am, ctx.in(7), "eps");
  if (!check_param_grads(ctx, p, ctx.out(1), ctx.out(2), C, "C", xt.numel() == 0)) return;
  const Ref m = vec_in(ctx, ctx.in(training ? 5 : 3), C, training ? "save_mean" : "running_mean");
  const Ref v = vec_in(ctx, ctx.in(training ? 6 : 4), C, training ? "save_invstd" : "running_var");
  if (!m.is_tensor() || !v.is_tensor()) ctx.fail("the statistics of the chosen mode are required");
  p.grad = am.tensor(dense_in(ctx, ctx.in(0), dt));
  p.x = am.tensor(dense_in(ctx, in.x, dt));
  p.weight = am.tensor(vec_in(ctx, ctx.in(2), C, "weight"));
  if (training) {
    p.mean = am.tensor(m);
    p.rstd = am.tensor(v);
  } else {
    p.running_mean = am.tensor(m);
    p.running_var = am.tensor(v);
  }
  bind_grads(ctx, am, p, xt, dt, ctx.out(1), ctx.out(2), wb);
  ctx.emit("BatchNormBackward", fn, p, am);
  wb.flush(ctx);
}

}  // namespace openneuron::compiler::detail
