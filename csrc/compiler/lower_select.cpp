// Lowerings of tril/triu, arg reductions (argmax/argmin, max/min over a dim)
// and scans (cumsum/cumprod).
#include "lowering.h"

namespace openneuron::compiler::detail {

// Tril/Triu: in -> out (same dtype and sizes, any strides; in == out allowed)
void lower_tri(LowerCtx& ctx) {
  ctx.expect_counts(1, 1);
  const Ref& in = ctx.in(0);
  ctx.expect_tensor(in, "input");
  const Ref& out = ctx.out(0);
  ctx.expect_same_sizes(out, in.type, "output");
  if (in.type.ndim < 2) ctx.fail("input must have at least 2 dims");
  if (out.type.dtype != in.type.dtype) ctx.fail("output must have the input's dtype");
  onrt_kernel_fn fn = kernels::tri_kernel(in.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(in.type.dtype));
  if (out.type.numel() == 0) return;
  kernels::TriParams p;
  ArgMap am;
  p.op = ctx.op() == Op::Tril ? kernels::TriOp::Tril : kernels::TriOp::Triu;
  p.diagonal = ctx.attr(0, 0);
  p.in = am.tensor(in);
  p.out = am.tensor(out);
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

// ArgMax/ArgMin: in -> indices(Int64) [, values(in's dtype)]; outputs keep
// `dim` as size 1; attr[0] = dim
void lower_argreduce(LowerCtx& ctx) {
  ctx.expect_counts(1, 1, ctx.num_outputs() == 2 ? 2 : 1);
  const Ref& in = ctx.in(0);
  ctx.expect_tensor(in, "input");
  const TensorType& it = in.type;
  const int dim = ctx.wrap_dim(ctx.attr(0, 0), it.ndim);
  const Ref& idx = ctx.out(0);
  if (idx.type.dtype != DType::Int64) ctx.fail("indices must be Int64");
  auto check_shape = [&](const Ref& r, const char* what) {
    bool ok = r.type.ndim == it.ndim;
    for (int d = 0; ok && d < it.ndim; ++d) ok = r.type.sizes[d] == (d == dim ? 1 : it.sizes[d]);
    if (!ok) ctx.fail(std::string(what) + " must have the input's sizes with dim " +
                      std::to_string(dim) + " of size 1");
  };
  check_shape(idx, "indices");
  const auto op = ctx.op() == Op::ArgMax ? kernels::ArgReduceOp::Max : kernels::ArgReduceOp::Min;
  onrt_kernel_fn fn = kernels::argreduce_kernel(op, it.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(it.dtype));
  kernels::ArgReduceParams p;
  ArgMap am;
  p.op = op;
  p.dim = dim;
  if (ctx.num_outputs() == 2) {
    check_shape(ctx.out(1), "values");
    if (ctx.out(1).type.dtype != it.dtype) ctx.fail("values must have the input's dtype");
  }
  if (idx.type.numel() == 0) return;
  if (it.ndim && it.sizes[dim] == 0) ctx.fail("cannot reduce over an empty dimension");
  p.in = am.tensor(in);
  p.indices = am.tensor(idx);
  if (ctx.num_outputs() == 2) p.values = am.tensor(ctx.out(1));
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

// Cumsum/Cumprod: in -> out (in converted to out's dtype); attr[0] = dim
void lower_scan(LowerCtx& ctx) {
  ctx.expect_counts(1, 1);
  const Ref& in0 = ctx.in(0);
  ctx.expect_tensor(in0, "input");
  const Ref& out = ctx.out(0);
  ctx.expect_same_sizes(out, in0.type, "output");
  const DType dt = out.type.dtype;
  const auto op = ctx.op() == Op::Cumsum ? kernels::ScanOp::Cumsum : kernels::ScanOp::Cumprod;
  onrt_kernel_fn fn = kernels::scan_kernel(op, dt);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dt));
  const int dim = ctx.wrap_dim(ctx.attr(0, 0), in0.type.ndim);
  if (out.type.numel() == 0) return;
  kernels::ScanParams p;
  ArgMap am;
  p.op = op;
  p.dim = in0.type.ndim ? dim : 0;
  p.in = am.tensor(ctx.as_dtype(in0, dt));
  p.out = am.tensor(out);
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

}  // namespace openneuron::compiler::detail
