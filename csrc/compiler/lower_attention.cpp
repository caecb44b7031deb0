// Lowering of fused scaled dot-product attention and its backward to the
// memory-efficient attention engine. The engine reads any layout whose last
// dim is dense, so the usual [B, L, H, E] -> [B, H, L, E] transposed views go
// in without copies; other layouts and dtypes go through scratch temporaries.
#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

using kernels::AttentionParams;

// Tile sizes: a score tile of block_q x block_k floats (64 KiB forward) stays
// in L2 next to its Q, K and V tiles. The backward keeps two such tiles
// (probabilities and their gradient), hence its smaller key blocks.
constexpr int64_t kBlockQ = 64, kBlockKForward = 256, kBlockKBackward = 128;

bool last_dim_dense(const TensorType& t) {
  return t.ndim == 0 || t.sizes[t.ndim - 1] <= 1 || t.strides[t.ndim - 1] == 1;
}

// An input the engine can read: dtype `dt`, unit stride in the last dim.
Ref engine_in(LowerCtx& ctx, const Ref& r, DType dt) {
  Ref x = ctx.as_dtype(r, dt);
  return last_dim_dense(x.type) ? x : ctx.contiguous(x);
}

// An output the engine can write: `out` itself when it has dtype `dt`, a dense
// last dim and no overlapping rows; else a dense temporary copied back.
Ref engine_out(LowerCtx& ctx, const Ref& out, DType dt, bool need_contiguous, Writeback& wb) {
  const TensorType& t = out.type;
  const bool ok =
      t.dtype == dt &&
      (need_contiguous ? t.is_contiguous()
                       : last_dim_dense(t) && t.strides[t.ndim - 2] >= t.sizes[t.ndim - 1] &&
                             t.strides[t.ndim - 2] > 0 && t.strides[1] > 0 && t.strides[0] > 0);
  if (ok) return out;
  Ref tmp = ctx.temp(contiguous_type(dt, t.ndim, t.sizes));
  wb.copies.emplace_back(out, tmp);
  return tmp;
}

void expect_sizes(LowerCtx& ctx, const Ref& r, std::initializer_list<int64_t> sizes,
                  const char* what) {
  ctx.expect_tensor(r, what);
  bool ok = r.type.ndim == static_cast<int32_t>(sizes.size());
  int d = 0;
  for (int64_t s : sizes) ok = ok && r.type.sizes[d++] == s;
  if (!ok) ctx.fail(std::string(what) + " has unexpected sizes " + describe(r.type));
}

}  // namespace

// Attention:         q, k, v, mask|none, scale, dropout_p, seed, offset -> out, lse
// AttentionBackward: grad_out, q, k, v, out, lse, mask|none, scale, dropout_p, seed,
//                    offset -> grad_q, grad_k, grad_v
void lower_attention(LowerCtx& ctx) {
  const bool backward = ctx.op() == Op::AttentionBackward;
  ctx.expect_counts(backward ? 11 : 8, backward ? 3 : 2);
  const int base = backward ? 1 : 0;
  const Ref& q0 = ctx.in(base);
  const Ref& k0 = ctx.in(base + 1);
  const Ref& v0 = ctx.in(base + 2);
  ctx.expect_tensor(q0, "query");
  ctx.expect_tensor(k0, "key");
  ctx.expect_tensor(v0, "value");
  if (q0.type.ndim != 4 || k0.type.ndim != 4 || v0.type.ndim != 4)
    ctx.fail("query, key and value must be 4-D [B, H, L, E]");
  const int64_t B = q0.type.sizes[0], H = q0.type.sizes[1], L = q0.type.sizes[2],
                E = q0.type.sizes[3];
  const int64_t Hk = k0.type.sizes[1], S = k0.type.sizes[2], Ev = v0.type.sizes[3];
  expect_sizes(ctx, k0, {B, Hk, S, E}, "key");
  expect_sizes(ctx, v0, {B, Hk, S, Ev}, "value");
  if (Hk <= 0 ? H != 0 : H % Hk != 0) ctx.fail("query heads must be a multiple of key/value heads");
  const DType dt = q0.type.dtype;
  onrt_kernel_fn fn = kernels::attention_kernel(dt, backward);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  if (k0.type.dtype != dt || v0.type.dtype != dt)
    ctx.fail("query, key and value must have one dtype");

  ArgMap am;
  AttentionParams p;
  p.causal = ctx.attr(0, 0) != 0;
  p.backward = backward;
  p.has_dropout = ctx.attr(1, 0) != 0;
  p.b = B;
  p.h = H;
  p.hk = Hk;
  p.l = L;
  p.s = S;
  p.e = E;
  p.ev = Ev;
  p.block_q = kBlockQ;
  p.block_k = backward ? kBlockKBackward : kBlockKForward;
  const int si = base + (backward ? 6 : 4);  // first scalar
  p.scale = scalar_arg(ctx, am, ctx.in(si), "scale");
  p.dropout_p = scalar_arg(ctx, am, ctx.in(si + 1), "dropout_p");
  p.seed = scalar_arg(ctx, am, ctx.in(si + 2), "seed");
  p.offset = scalar_arg(ctx, am, ctx.in(si + 3), "offset");

  Ref mask;
  const Ref& m0 = ctx.in(si - 1);
  if (!m0.is_none()) {
    expect_sizes(ctx, m0, {B, H, L, S}, "mask");
    const DType md = m0.type.dtype;
    const bool native =
        md == DType::Bool || md == DType::Float32 || md == DType::BFloat16 || md == DType::Float16;
    mask = native ? m0 : ctx.as_dtype(m0, DType::Float32);
  }

  Writeback wb;
  if (!backward) {
    expect_sizes(ctx, ctx.out(0), {B, H, L, Ev}, "output");
    expect_sizes(ctx, ctx.out(1), {B, H, L}, "logsumexp");
    if (B * H * L == 0) return;
    const Ref q = engine_in(ctx, q0, dt), k = engine_in(ctx, k0, dt), v = engine_in(ctx, v0, dt);
    const Ref out = engine_out(ctx, ctx.out(0), dt, false, wb);
    Ref lse = ctx.out(1);
    if (lse.type.dtype != DType::Float32) lse = engine_out(ctx, lse, DType::Float32, true, wb);
    p.q = am.tensor(q);
    p.k = am.tensor(k);
    p.v = am.tensor(v);
    p.mask = am.tensor(mask);
    p.out = am.tensor(out);
    p.lse = am.tensor(lse);
    ctx.emit("Attention", fn, p, am);
    wb.flush(ctx);
    return;
  }

  expect_sizes(ctx, ctx.in(0), {B, H, L, Ev}, "grad_out");
  expect_sizes(ctx, ctx.in(4), {B, H, L, Ev}, "out");
  expect_sizes(ctx, ctx.in(5), {B, H, L}, "logsumexp");
  expect_sizes(ctx, ctx.out(0), {B, H, L, E}, "grad_query");
  expect_sizes(ctx, ctx.out(1), {B, Hk, S, E}, "grad_key");
  expect_sizes(ctx, ctx.out(2), {B, Hk, S, Ev}, "grad_value");
  if (B * Hk * S == 0 || L == 0 || E == 0) {
    // Nothing attends (or nothing to differentiate): every gradient is zero.
    for (int i = 0; i < 3; ++i)
      if (ctx.out(i).type.numel() > 0) emit_fill(ctx, ctx.out(i), Ref::imm_float(0));
    return;
  }
  const Ref go = engine_in(ctx, ctx.in(0), dt);
  const Ref q = engine_in(ctx, q0, dt), k = engine_in(ctx, k0, dt), v = engine_in(ctx, v0, dt);
  const Ref out = engine_in(ctx, ctx.in(4), dt);
  const Ref lse = ctx.as_dtype(ctx.in(5), DType::Float32);
  // grad_q accumulates over key blocks in float32; k and v gradients are
  // complete per key block and go straight to their dtype.
  const Ref gq = engine_out(ctx, ctx.out(0), DType::Float32, true, wb);
  const Ref gk = engine_out(ctx, ctx.out(1), dt, false, wb);
  const Ref gv = engine_out(ctx, ctx.out(2), dt, false, wb);
  p.grad_out = am.tensor(go);
  p.q = am.tensor(q);
  p.k = am.tensor(k);
  p.v = am.tensor(v);
  p.out = am.tensor(out);
  p.lse = am.tensor(lse);
  p.mask = am.tensor(mask);
  p.grad_q = am.tensor(gq);
  p.grad_k = am.tensor(gk);
  p.grad_v = am.tensor(gv);
  ctx.emit("AttentionBackward", fn, p, am);
  wb.flush(ctx);
}

}  // namespace openneuron::compiler::detail
