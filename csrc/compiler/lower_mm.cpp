// Lowering of Mm/Addmm/Bmm to the tensor engine. The engine takes operands
// whose matrices are row- or column-major with any batch stride; other
// layouts (broadcast batches, general strides) are copied to contiguous
// scratch first. Half types without a native oneDNN matmul compute in
// Float32 and round once, which is what PyTorch's CPU GEMM does too.
#include <algorithm>
#include <array>
#include <utility>

#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

// Canonical [batch, row, col] strides of a (batched) matrix if the engine can
// read it in place: row-major (col stride 1) or column-major (row stride 1).
bool blas_strides(const TensorType& t, bool batched, bool is_output, int64_t st[3]) {
  const int o = batched ? 1 : 0;
  const int64_t R = t.sizes[o], C = t.sizes[o + 1];
  int64_t sr = t.strides[o], sc = t.strides[o + 1];
  // A dimension of size 1 has no meaningful stride: pick the reading of the
  // matrix that makes it row-major when possible (outputs must be row-major).
  if (R <= 1 && C <= 1) {
    sr = 1;
    sc = 1;
  } else if (C <= 1) {  // one column: row-major with row stride sr
    if (sr <= 0) return false;
    sc = 1;
  } else if (R <= 1) {  // one row: row-major if its elements are adjacent
    if (sc == 1) sr = C;
    else if (sc > 0) sr = 1;
    else return false;
  }
  const bool row_major = sc == 1 && sr >= C;
  const bool col_major = sr == 1 && sc >= R;
  if (!(row_major || (col_major && !is_output))) return false;
  int64_t sb = R * C;
  if (batched) {
    const int64_t B = t.sizes[0];
    if (B > 1) {
      sb = t.strides[0];
      if (sb == 0) return false;  // broadcast batch: materialise
      if (is_output && sb < R * C) return false;
    } else {
      sb = std::max<int64_t>(R * C, 1);
    }
  }
  st[0] = sb;
  st[1] = sr;
  st[2] = sc;
  return true;
}

// True if the elements of `t` fill exactly numel() adjacent slots in some
// dimension order (a transposed view of a contiguous tensor, for instance).
bool dense(const TensorType& t) {
  std::array<std::pair<int64_t, int64_t>, kMaxDims> dims;  // (stride, size)
  int n = 0;
  for (int d = 0; d < t.ndim; ++d)
    if (t.sizes[d] > 1) dims[n++] = {t.strides[d], t.sizes[d]};
  std::sort(dims.begin(), dims.begin() + n);
  int64_t expected = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].first != expected) return false;
    expected *= dims[i].second;
  }
  return true;
}

// `r` as dtype `d` for the engine. A dense operand it can read in place keeps
// its memory order: linear's weight arrives transposed (column-major), and
// converting it into row-major order would be a transpose, several times
// slower than the straight conversion.
Ref engine_operand(LowerCtx& ctx, const Ref& r, DType d, bool batched, int64_t st[3]) {
  if (r.type.dtype != d && dense(r.type) && blas_strides(r.type, batched, false, st)) {
    TensorType t = r.type;
    t.dtype = d;
    Ref x = ctx.temp(t);
    emit_copy(ctx, x, r);
    return x;
  }
  Ref x = ctx.as_dtype(r, d);
  if (!blas_strides(x.type, batched, false, st)) {
    Ref t = ctx.temp(contiguous_type(d, x.type.ndim, x.type.sizes));
    emit_copy(ctx, t, x);
    x = t;
    blas_strides(x.type, batched, false, st);
  }
  return x;
}

}  // namespace

void lower_mm(LowerCtx& ctx) {
  const Op op = ctx.op();
  const bool batched = op == Op::Bmm;
  Ref a, b, bias, beta, alpha;
  if (op == Op::Addmm) {
    ctx.expect_counts(3, 5, 1);
    bias = ctx.in(0);
    a = ctx.in(1);
    b = ctx.in(2);
    beta = ctx.num_inputs() > 3 ? ctx.in(3) : Ref::imm_int(1);
    alpha = ctx.num_inputs() > 4 ? ctx.in(4) : Ref::imm_int(1);
    if (!beta.is_scalar() || !alpha.is_scalar()) ctx.fail("beta and alpha must be scalars");
    ctx.expect_tensor(bias, "bias");
  } else {
    ctx.expect_counts(2, 1);
    a = ctx.in(0);
    b = ctx.in(1);
    beta = Ref::imm_float(0.0);
    alpha = Ref::imm_float(1.0);
  }
  ctx.expect_tensor(a, "a");
  ctx.expect_tensor(b, "b");
  const Ref& out = ctx.out(0);
  const DType dt = out.type.dtype;
  if (dt != DType::Float32 && dt != DType::BFloat16 && dt != DType::Float16)
    ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  if (a.type.dtype != dt || b.type.dtype != dt)
    ctx.fail("operands must have the output's dtype");
  const int nd = batched ? 3 : 2;
  if (a.type.ndim != nd || b.type.ndim != nd || out.type.ndim != nd)
    ctx.fail(batched ? "expected 3-d operands" : "expected 2-d operands");
  const int o = batched ? 1 : 0;
  const int64_t B = batched ? a.type.sizes[0] : 1;
  const int64_t M = a.type.sizes[o], K = a.type.sizes[o + 1], N = b.type.sizes[o + 1];
  if (b.type.sizes[o] != K)
    ctx.fail("inner dims do not match (" + std::to_string(K) + " vs " +
             std::to_string(b.type.sizes[o]) + ")");
  if (batched && (b.type.sizes[0] != B || out.type.sizes[0] != B)) ctx.fail("batch sizes do not match");
  if (out.type.sizes[o] != M || out.type.sizes[o + 1] != N)
    ctx.fail("output must be [" + std::to_string(M) + ", " + std::to_string(N) + "]");
  if (op == Op::Addmm && !same_sizes(bias.type, out.type))
    ctx.fail("bias must be expanded to the output's sizes");
  if (out.type.numel() == 0) return;

  const DType cdt = kernels::gemm_native(dt) ? dt : DType::Float32;
  kernels::GemmParams p;
  ArgMap am;
  Ref ra = engine_operand(ctx, a, cdt, batched, p.a_strides);
  Ref rb = engine_operand(ctx, b, cdt, batched, p.b_strides);
  Ref rc = out;
  bool c_temp = cdt != dt || !blas_strides(out.type, batched, true, p.c_strides);
  if (c_temp) {
    rc = ctx.temp(contiguous_type(cdt, out.type.ndim, out.type.sizes));
    blas_strides(rc.type, batched, true, p.c_strides);
  }
  if (op == Op::Addmm) emit_copy(ctx, rc, bias);
  onrt_kernel_fn fn = kernels::gemm_kernel(cdt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(cdt));
  p.dtype = cdt;
  p.batch = B;
  p.m = M;
  p.n = N;
  p.k = K;
  p.a = am.tensor(ra);
  p.b = am.tensor(rb);
  p.c = am.tensor(rc);
  p.alpha = am.scalar(alpha);
  p.beta = am.scalar(beta);
  ctx.emit(op_name(op), fn, p, am);
  if (c_temp) emit_copy(ctx, out, rc);
}

}  // namespace openneuron::compiler::detail
