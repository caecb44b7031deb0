// Lowerings of the gather and index family: gather, scatter (+ reductions),
// index_add/copy, advanced indexing (index / index_put), index_select,
// embedding backward, sort/topk, nonzero and isin.
#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

void expect_index_dtype(LowerCtx& ctx, const Ref& r, bool allow32) {
  ctx.expect_tensor(r, "index");
  if (r.type.dtype != DType::Int64 && !(allow32 && r.type.dtype == DType::Int32))
    ctx.fail("index must be Int64" + std::string(allow32 ? " or Int32" : "") + ", got " +
             describe(r));
}

int64_t size_at(const TensorType& t, int d) { return t.ndim ? t.sizes[d] : 1; }

}  // namespace

// Gather, Scatter, IndexAdd, IndexCopy (see graph.h)
void lower_scatter(LowerCtx& ctx) {
  const Op op = ctx.op();
  const int nin = op == Op::Gather ? 2 : op == Op::IndexAdd ? 4 : 3;
  ctx.expect_counts(nin, 1);
  const Ref& self = ctx.in(0);
  const Ref& index = ctx.in(1);
  const Ref& out = ctx.out(0);
  ctx.expect_tensor(self, "self");
  ctx.expect_tensor(out, "out");
  const bool index_op = op == Op::IndexAdd || op == Op::IndexCopy;
  expect_index_dtype(ctx, index, index_op);
  if (out.type.dtype != self.type.dtype) ctx.fail("out must have self's dtype");
  const int dim = ctx.wrap_dim(ctx.attr(0, 0), self.type.ndim);
  kernels::ScatterParams p;
  ArgMap am;
  p.dim = dim;
  Ref src;
  if (op == Op::Gather) {
    p.op = kernels::ScatterOp::Gather;
    ctx.expect_same_sizes(out, index.type, "out");
    if (index.type.ndim != self.type.ndim && !(index.type.ndim <= 1 && self.type.ndim <= 1))
      ctx.fail("index must have self's number of dims");
  } else {
    ctx.expect_same_sizes(out, self.type, "out");
    src = ctx.in(2);
    if (src.is_tensor() && src.type.dtype != self.type.dtype) ctx.fail("src must have self's dtype");
    if (index_op) {
      if (!src.is_tensor()) ctx.fail("source must be a tensor");
      if (index.type.ndim > 1) ctx.fail("index must be 0-d or 1-d");
      if (size_at(src.type, dim) != index.type.numel())
        ctx.fail("source's size at dim must equal the number of indices");
      p.op = op == Op::IndexAdd ? kernels::ScatterOp::IndexAdd : kernels::ScatterOp::IndexCopy;
      if (op == Op::IndexAdd) p.value = am.scalar(ctx.in(3));
    } else {
      static const kernels::ScatterOp kinds[] = {
          kernels::ScatterOp::Scatter,     kernels::ScatterOp::ScatterAdd,
          kernels::ScatterOp::ScatterProd, kernels::ScatterOp::ScatterAmax,
          kernels::ScatterOp::ScatterAmin, kernels::ScatterOp::ScatterMean};
      const int64_t r = ctx.attr(1, 0);
      if (r < 0 || r > 5) ctx.fail("bad reduce attr");
      p.op = kinds[r];
      p.include_self = ctx.attr(2, 1) ? 1 : 0;
      if (src.is_scalar()) p.value = am.scalar(src);
      else if (!src.is_tensor()) ctx.fail("src must be a tensor or a scalar");
    }
  }
  onrt_kernel_fn fn = kernels::scatter_kernel(self.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(self.type.dtype));
  if (out.type.numel() == 0) return;
  p.self = am.tensor(self);
  p.index = am.tensor(index);
  if (src.is_tensor()) p.src = am.tensor(src);
  p.out = am.tensor(out);
  ctx.emit(op_name(op), fn, p, am);
}

// Index / IndexPut (see graph.h)
void lower_index(LowerCtx& ctx) {
  const bool put = ctx.op() == Op::IndexPut;
  ctx.expect_counts(put ? 3 : 2, 1);
  const Ref& self = ctx.in(0);
  const Ref& ind = ctx.in(1);
  const Ref& out = ctx.out(0);
  ctx.expect_tensor(self, "self");
  ctx.expect_tensor(out, "out");
  expect_index_dtype(ctx, ind, false);
  if (ind.type.ndim != 2 || !ind.type.is_contiguous()) ctx.fail("indices must be dense [m, count]");
  const int64_t m = ind.type.sizes[0], count = ind.type.sizes[1];
  const int64_t pos = ctx.attr(0, 0);
  const TensorType& st = self.type;
  if (m < 1 || pos < 0 || pos + m > st.ndim) ctx.fail("indexed dims out of range");
  // The shape of the gathered values: self's with [pos, pos+m) -> count.
  TensorType vt;
  vt.dtype = st.dtype;
  vt.ndim = static_cast<int32_t>(st.ndim - m + 1);
  for (int d = 0, k = 0; d < st.ndim; ++d) {
    if (d >= pos && d < pos + m) {
      if (d == pos) vt.sizes[k++] = count;
      continue;
    }
    vt.sizes[k++] = st.sizes[d];
  }
  const Ref& vals = put ? ctx.in(2) : out;
  if (put) ctx.expect_tensor(vals, "values");
  ctx.expect_same_sizes(vals, vt, put ? "values" : "out");
  if (vals.type.dtype != st.dtype) ctx.fail("values/out must have self's dtype");
  if (put) {
    ctx.expect_same_sizes(out, st, "out");
  } else if (!out.type.is_contiguous()) {
    ctx.fail("out must be dense");
  }
  onrt_kernel_fn fn = kernels::index_kernel(put, st.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(st.dtype));
  if (vt.numel() == 0) return;
  kernels::IndexParams p;
  ArgMap am;
  p.put = put;
  p.accumulate = put && ctx.attr(1, 0) ? 1 : 0;
  p.nidx = static_cast<int32_t>(m);
  p.pos = static_cast<int32_t>(pos);
  p.self = am.tensor(self);
  p.indices = am.tensor(ind);
  if (put) p.values = am.tensor(vals);
  p.out = am.tensor(out);
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

void lower_index_select(LowerCtx& ctx) {
  ctx.expect_counts(2, 1);
  const Ref& self = ctx.in(0);
  const Ref& index = ctx.in(1);
  ctx.expect_tensor(self, "self");
  ctx.expect_tensor(index, "index");
  const Ref& out = ctx.out(0);
  if (index.type.ndim > 1) ctx.fail("index must be 1-d");
  if (out.type.dtype != self.type.dtype) ctx.fail("output must have self's dtype");
  onrt_kernel_fn fn = kernels::index_select_kernel(self.type.dtype, index.type.dtype);
  if (!fn)
    ctx.fail(std::string("unsupported dtypes ") + dtype_name(self.type.dtype) + ", " +
             dtype_name(index.type.dtype));
  const int dim = ctx.wrap_dim(ctx.attr(0, 0), self.type.ndim);
  const TensorType& st = self.type;
  bool ok = out.type.ndim == st.ndim;
  for (int d = 0; ok && d < st.ndim; ++d)
    ok = out.type.sizes[d] == (d == dim ? index.type.numel() : st.sizes[d]);
  if (st.ndim == 0) ok = out.type.ndim == 0 && index.type.numel() == 1;
  if (!ok) ctx.fail("output sizes do not match self with dim " + std::to_string(dim) + " indexed");
  if (out.type.numel() == 0) return;
  kernels::IndexSelectParams p;
  ArgMap am;
  p.dim = dim;
  p.self = am.tensor(self);
  p.index = am.tensor(index);
  p.out = am.tensor(out);
  ctx.emit("IndexSelect", fn, p, am);
}

void lower_embedding_backward(LowerCtx& ctx) {
  ctx.expect_counts(2, 1);
  const Ref& grad = ctx.in(0);
  const Ref& indices = ctx.in(1);
  ctx.expect_tensor(grad, "grad");
  ctx.expect_tensor(indices, "indices");
  const Ref& out = ctx.out(0);
  const TensorType& g = grad.type;
  if (out.type.ndim != 2 || g.ndim < 1 || out.type.sizes[1] != g.sizes[g.ndim - 1])
    ctx.fail("output must be [num_weights, D] with D = grad's last dim");
  bool ok = indices.type.ndim == g.ndim - 1;
  for (int d = 0; ok && d < indices.type.ndim; ++d) ok = indices.type.sizes[d] == g.sizes[d];
  if (!ok) ctx.fail("indices must have grad's leading sizes");
  Ref dst = out;
  if (out.type.dtype != DType::Float32)
    dst = ctx.temp(contiguous_type(DType::Float32, 2, out.type.sizes));
  onrt_kernel_fn fn = kernels::embedding_backward_kernel(DType::Float32, g.dtype, indices.type.dtype);
  if (!fn || !is_floating(out.type.dtype))
    ctx.fail(std::string("unsupported dtypes ") + dtype_name(g.dtype) + ", " +
             dtype_name(indices.type.dtype) + " -> " + dtype_name(out.type.dtype));
  if (out.type.numel() == 0) return;
  kernels::EmbeddingBackwardParams p;
  ArgMap am;
  p.padding_idx = ctx.attr(0, -1);
  p.grad = am.tensor(grad);
  p.indices = am.tensor(indices);
  p.out = am.tensor(dst);
  ctx.emit("EmbeddingBackward", fn, p, am);
  if (dst.offset != out.offset || dst.slot != out.slot) emit_copy(ctx, out, dst);
}

// Sort: in -> values, indices (first k along dim)
void lower_sort(LowerCtx& ctx) {
  ctx.expect_counts(1, 2);
  const Ref& in = ctx.in(0);
  const Ref& val = ctx.out(0);
  const Ref& idx = ctx.out(1);
  ctx.expect_tensor(in, "input");
  const TensorType& it = in.type;
  const int dim = ctx.wrap_dim(ctx.attr(0, -1), it.ndim);
  if (val.type.dtype != it.dtype) ctx.fail("values must have the input's dtype");
  if (idx.type.dtype != DType::Int64) ctx.fail("indices must be Int64");
  const int64_t k = size_at(val.type, dim);
  TensorType want = it;
  if (want.ndim) want.sizes[dim] = k;
  ctx.expect_same_sizes(val, want, "values");
  ctx.expect_same_sizes(idx, want, "indices");
  if (k > size_at(it, dim)) ctx.fail("k out of range");
  onrt_kernel_fn fn = kernels::sort_kernel(it.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(it.dtype));
  if (val.type.numel() == 0) return;
  kernels::SortParams p;
  ArgMap am;
  p.dim = dim;
  p.descending = ctx.attr(1, 0) ? 1 : 0;
  p.stable = ctx.attr(2, 1) ? 1 : 0;
  p.k = k;
  p.in = am.tensor(in);
  p.values = am.tensor(val);
  p.indices = am.tensor(idx);
  ctx.emit("Sort", fn, p, am);
}

// Nonzero: in -> out[n, ndim] Int64
void lower_nonzero(LowerCtx& ctx) {
  ctx.expect_counts(1, 1);
  const Ref& in = ctx.in(0);
  const Ref& out = ctx.out(0);
  ctx.expect_tensor(in, "input");
  if (out.type.dtype != DType::Int64 || out.type.ndim != 2 || !out.type.is_contiguous() ||
      out.type.sizes[1] != in.type.ndim)
    ctx.fail("out must be a dense Int64 [n, ndim] tensor");
  onrt_kernel_fn fn = kernels::nonzero_kernel(in.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(in.type.dtype));
  if (in.type.numel() == 0) return;
  kernels::NonzeroParams p;
  ArgMap am;
  p.in = am.tensor(in);
  p.out = am.tensor(out);
  ctx.emit("Nonzero", fn, p, am);
}

// Isin: elements, test -> out(Bool); attr[0] = invert
void lower_isin(LowerCtx& ctx) {
  ctx.expect_counts(2, 1);
  const Ref& el = ctx.in(0);
  const Ref& te = ctx.in(1);
  const Ref& out = ctx.out(0);
  ctx.expect_tensor(el, "elements");
  ctx.expect_tensor(te, "test_elements");
  if (el.type.dtype != te.type.dtype) ctx.fail("elements and test_elements must share a dtype");
  if (out.type.dtype != DType::Bool) ctx.fail("out must be Bool");
  ctx.expect_same_sizes(out, el.type, "out");
  onrt_kernel_fn fn = kernels::isin_kernel(el.type.dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(el.type.dtype));
  if (out.type.numel() == 0) return;
  kernels::IsinParams p;
  ArgMap am;
  p.invert = ctx.attr(0, 0) ? 1 : 0;
  p.elements = am.tensor(el);
  p.test = am.tensor(te);
  p.out = am.tensor(out);
  ctx.emit("Isin", fn, p, am);
}

}  // namespace openneuron::compiler::detail
