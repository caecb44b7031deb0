// Lowerings of softmax family, nll_loss, index_select, embedding backward.
#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

int normalize_dim(LowerCtx& ctx, int64_t dim, int ndim) {
  const int n = std::max(ndim, 1);
  if (dim < -n || dim >= n)
    ctx.fail("dim " + std::to_string(dim) + " out of range for " + std::to_string(ndim) + " dims");
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

bool is_index_dtype(DType d) { return d == DType::Int64 || d == DType::Int32; }

}  // namespace

void lower_softmax(LowerCtx& ctx) {
  kernels::SoftmaxParams p;
  ArgMap am;
  const Op op = ctx.op();
  const bool backward = op == Op::SoftmaxBackward || op == Op::LogSoftmaxBackward;
  ctx.expect_counts(backward ? 2 : 1, 1);
  switch (op) {
    case Op::Softmax: p.op = kernels::SoftmaxOp::Softmax; break;
    case Op::LogSoftmax: p.op = kernels::SoftmaxOp::LogSoftmax; break;
    case Op::SoftmaxBackward: p.op = kernels::SoftmaxOp::SoftmaxBackward; break;
    default: p.op = kernels::SoftmaxOp::LogSoftmaxBackward; break;
  }
  const Ref& in0 = ctx.in(0);
  ctx.expect_tensor(in0, "input");
  const Ref& out = ctx.out(0);
  ctx.expect_same_sizes(out, in0.type, "output");
  p.dim = normalize_dim(ctx, ctx.attr(0, -1), in0.type.ndim);
  if (in0.type.ndim == 0) p.dim = 0;
  onrt_kernel_fn fn = kernels::softmax_kernel(p.op, out.type.dtype, in0.type.dtype);
  if (!fn)
    ctx.fail(std::string("unsupported dtypes ") + dtype_name(in0.type.dtype) + " -> " +
             dtype_name(out.type.dtype));
  if (out.type.numel() == 0) return;
  p.in0 = am.tensor(in0);
  if (backward) {
    ctx.expect_tensor(ctx.in(1), "output");
    ctx.expect_same_sizes(ctx.in(1), in0.type, "output");
    p.in1 = am.tensor(ctx.as_dtype(ctx.in(1), in0.type.dtype));
  }
  p.out = am.tensor(out);
  ctx.emit(op_name(op), fn, p, am);
}

namespace {

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
  const int dim = normalize_dim(ctx, ctx.attr(0, 0), self.type.ndim);
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

}  // namespace openneuron::compiler::detail
