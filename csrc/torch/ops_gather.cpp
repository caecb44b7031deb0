// Gather and index: gather, scatter (and its reductions), scatter_add, index_add,
// index_copy, index_select, advanced indexing (index, index_put), nonzero,
// masked_select, sort/topk, flip/roll, isin, histc and the embedding backward. Each
// launches the gather family's compiler ops (lower_gather.cpp).
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ------------------------------------------------------------ index_select, embedding backward

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const c10::Device device = common_device("index_select", {&self, &index});
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[d] = index.numel();
  // A dim of size 0 has no valid index: the CPU's errors, raised before nothing would run.
  if (self.numel() == 0 && index.numel() > 0) {
    TORCH_CHECK(self.dim() <= 1 || self.size(d) > 0,
                "index_select(): self indexing axis dim should be positive");
    TORCH_CHECK_INDEX(self.dim() > 1, "index out of range in self");
    // The CPU bounds the indices though nothing is read: a rare case, so it may wait for
    // the index values.
    const at::Tensor flat = index.reshape({-1});
    const at::Tensor bad = flat.masked_select((flat < 0).logical_or(flat >= self.size(d)));
    TORCH_CHECK(bad.numel() == 0, "INDICES element is out of DATA bounds, id=",
                bad.numel() ? bad[0].item<int64_t>() : 0, " axis_dim=", self.size(d));
  }
  at::Tensor out = empty_device(shape, self.scalar_type(), device);
  if (out.numel() == 0) return out;
  launch(Op::IndexSelect,
         {tensor_operand(self.dim() == 0 ? self.view({1}) : self),
          tensor_operand(index.reshape({-1}))},
         {tensor_operand(self.dim() == 0 ? out.view({1}) : out)}, {d});
  return out;
}

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                    c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
  TORCH_CHECK_NOT_IMPLEMENTED(!scale_grad_by_freq,
                              "neuron: embedding backward with scale_grad_by_freq=True");
  const c10::Device device = common_device("embedding_dense_backward", {&grad, &indices});
  const int64_t dim = grad.size(-1);
  at::Tensor out = empty_device({num_weights.expect_int(), dim}, grad.scalar_type(), device);
  if (out.numel() == 0) return out;
  launch(Op::EmbeddingBackward,
         {tensor_operand(grad.reshape({-1, dim})),
          tensor_operand(to_dtype_on_device(indices, c10::kLong).reshape({-1}))},
         {tensor_operand(out)}, {padding_idx.expect_int()});
  return out;
}

// ------------------------------------------------------------ gather / scatter

void check_index_long(const Tensor& index, const char* name) {
  // The engine reads int64 indices. Others decline to the host library kernel
  // (native_ops.h): int32 is valid, and the CPU's kernel accepts or rejects the
  // rest exactly as the CPU does (an empty uint8 index is accepted).
  TORCH_CHECK_NOT_IMPLEMENTED(index.scalar_type() == c10::kLong, name, "(): ", index.scalar_type(),
                              " index (engine reads int64)");
}

Tensor& gather_out(const Tensor& self, int64_t dim, const Tensor& index, bool, Tensor& out) {
  const c10::Device device = common_device("gather", {&self, &index});
  check_out_device(out, device, "gather");
  check_index_long(index, "gather");
  dim = c10::maybe_wrap_dim(dim, self.dim());
  // As on the CPU, an empty index is not checked against self: any shape gathers nothing.
  TORCH_CHECK(index.numel() == 0 || index.dim() == self.dim() ||
                  (index.dim() <= 1 && self.dim() <= 1),
              "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < index.dim() && self.dim() > 0 && index.numel() > 0; ++d) {
    if (d == dim) continue;
    TORCH_CHECK(index.size(d) <= self.size(d), "Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", dim);
  }
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "gather(): Expected self.dtype to be equal to src.dtype");
  at::native::resize_output(out, index.sizes());
  if (out.numel() == 0) return out;
  launch(Op::Gather, {tensor_operand(self), tensor_operand(index)}, {tensor_operand(out)}, {dim});
  return out;
}

void scatter_checks(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                    const char* name) {
  check_index_long(index, name);
  if (src) {
    TORCH_CHECK(src->scalar_type() == self.scalar_type(), name,
                "(): Expected self.dtype to be equal to src.dtype");
  }
  if (index.numel() == 0) return;  // as on the CPU: an empty index of any shape scatters nothing
  TORCH_CHECK(index.dim() == self.dim() || (index.dim() <= 1 && self.dim() <= 1),
              "Index tensor must have the same number of dimensions as self tensor");
  for (int64_t d = 0; d < index.dim() && self.dim() > 0; ++d) {
    const bool bad =
        (d != dim && index.size(d) > self.size(d)) || (src && index.size(d) > src->size(d));
    TORCH_CHECK(!bad, "Expected index ", index.sizes(), " to be smaller than self ", self.sizes(),
                " apart from dimension ", dim, src ? " and to be smaller size than src " : "",
                src ? c10::str(src->sizes()) : "");
  }
}

// reduce: 0 assign, 1 add, 2 prod, 3 amax, 4 amin, 5 mean
Tensor& scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                     const at::Scalar* value, int64_t reduce, bool include_self, Tensor& out,
                     const char* name) {
  const c10::Device device =
      src ? common_device(name, {&self, &index, src}) : common_device(name, {&self, &index});
  check_out_device(out, device, name);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  scatter_checks(self, dim, index, src, name);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name,
              "(): Expected out.dtype to be equal to self.dtype");
  at::native::resize_output(out, self.sizes());
  // Into a dim of size 0 every index is out of range: the CPU's error, though nothing runs.
  if (index.numel() > 0 && self.size(dim) == 0)
    TORCH_CHECK(false, "index ", index.flatten()[0].item<int64_t>(),
                " is out of bounds for dimension ", dim, " with size 0");
  if (out.numel() == 0) return out;
  if (index.numel() == 0) {
    if (!out.is_same(self)) copy_on_device(out, self);
    return out;
  }
  Operand s = src ? tensor_operand(*src) : scalar_operand(*value, self.scalar_type());
  launch(Op::Scatter, {tensor_operand(self), tensor_operand(index), s}, {tensor_operand(out)},
         {dim, reduce, include_self ? 1 : 0});
  return out;
}

int64_t scatter_reduce_kind(c10::string_view reduce, bool two) {
  if (two) {
    if (reduce == "sum") return 1;
    if (reduce == "prod") return 2;
    if (reduce == "amax") return 3;
    if (reduce == "amin") return 4;
    if (reduce == "mean") return 5;
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ",
                reduce);
  }
  if (reduce == "add") return 1;
  if (reduce == "multiply") return 2;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

Tensor& scatter_src_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, 0, true, out, "scatter");
}
Tensor& scatter_value_out(const Tensor& self, int64_t dim, const Tensor& index,
                          const at::Scalar& value, Tensor& out) {
  return scatter_impl(self, dim, index, nullptr, &value, 0, true, out, "scatter");
}
Tensor& scatter_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           c10::string_view reduce, Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, scatter_reduce_kind(reduce, false), true,
                      out, "scatter");
}
Tensor& scatter_value_reduce_out(const Tensor& self, int64_t dim, const Tensor& index,
                                 const at::Scalar& value, c10::string_view reduce, Tensor& out) {
  return scatter_impl(self, dim, index, nullptr, &value, scatter_reduce_kind(reduce, false), true,
                      out, "scatter");
}
Tensor& scatter_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, 1, true, out, "scatter_add");
}
Tensor& scatter_reduce_two_out(const Tensor& self, int64_t dim, const Tensor& index,
                               const Tensor& src, c10::string_view reduce, bool include_self,
                               Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, scatter_reduce_kind(reduce, true),
                      include_self, out, "scatter_reduce");
}

template <Op kOp>
Tensor& index_addcopy_out(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& source, const at::Scalar& alpha, Tensor& out) {
  const char* name = kOp == Op::IndexAdd ? "index_add_" : "index_copy_";
  const c10::Device device = common_device(name, {&self, &index, &source});
  check_out_device(out, device, name);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, name, "(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt, name,
              "(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), name, "(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(source.dim() == self.dim() || (source.dim() <= 1 && self.dim() <= 1), name,
              "(): Source/destination tensor must have same number of dimensions");
  const int64_t n = source.dim() > 0 ? source.size(dim) : 1;
  TORCH_CHECK_INDEX(index.numel() == n, name, "(): Number of indices (", index.numel(),
                    ") should be equal to source.size(dim) (", n, ")");
  // Into a dim of size 0 every index is out of range; the CPU raises though nothing would be
  // written (index_copy_ only when its source has elements to copy).
  if (index.numel() > 0 && self.dim() > 0 && self.size(dim) == 0) {
    TORCH_CHECK_INDEX(kOp != Op::IndexAdd || self.dim() > 1, "index out of range in self");
    TORCH_CHECK(kOp != Op::IndexCopy || source.numel() == 0, name,
                "(): index out of range: dimension ", dim, " of self has size 0");
  }
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  if (index.numel() == 0) {
    if (!out.is_same(self)) copy_on_device(out, self);
    return out;
  }
  if (kOp == Op::IndexAdd) {
    launch(kOp,
           {tensor_operand(self), tensor_operand(index), tensor_operand(source),
            scalar_operand(alpha, self.scalar_type())},
           {tensor_operand(out)}, {dim});
  } else {
    launch(kOp, {tensor_operand(self), tensor_operand(index), tensor_operand(source)},
           {tensor_operand(out)}, {dim});
  }
  return out;
}
Tensor& index_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      const at::Scalar& alpha, Tensor& out) {
  return index_addcopy_out<Op::IndexAdd>(self, dim, index, source, alpha, out);
}
Tensor& index_copy_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                       Tensor& out) {
  return index_addcopy_out<Op::IndexCopy>(self, dim, index, source, 1, out);
}

// ------------------------------------------------------------ nonzero, advanced indexing

Tensor& nonzero_out(const Tensor& self, Tensor& out) {
  check_out_device(out, self.device(), "nonzero");
  TORCH_CHECK(out.scalar_type() == c10::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  TORCH_CHECK(!self.is_complex(), "nonzero is not supported for complex inputs");
  int64_t n = 0;
  if (self.numel() > 0) {
    Tensor cnt = empty_device({}, c10::kLong, self.device());
    Tensor b = to_dtype_on_device(self, c10::kBool);
    launch(Op::Sum, {tensor_operand(to_dtype_on_device(b, c10::kLong))},
           {tensor_operand(cnt.view(at::DimVector(self.dim(), 1)))},
           {self.dim() == 0 ? 0 : (int64_t(1) << self.dim()) - 1});
    n = cnt.item<int64_t>();  // the output size needs the count: a synchronisation
  }
  at::native::resize_output(out, {n, self.dim()});
  if (n == 0 || self.dim() == 0) return out;
  write_result(
      out, c10::kLong,
      [&](const Tensor& t) { launch(Op::Nonzero, {tensor_operand(self)}, {tensor_operand(t)}); },
      Target::Contiguous);
  return out;
}
Tensor nonzero(const Tensor& self) {
  Tensor out = empty_device({0}, c10::kLong, self.device());
  return bridge::nonzero_out(self, out);
}

struct IndexPlan {
  Tensor self;     // possibly permuted so indexed dims are consecutive
  Tensor indices;  // [m, count] Int64, dense
  int64_t pos = 0, m = 0, count = 0;
  at::DimVector idx_shape;   // broadcast shape of the index tensors
  at::DimVector full_shape;  // result shape
  at::DimVector flat_shape;  // result with idx dims merged into count
};

// warn_uint8: index_put_ warns of a uint8 mask here, as the CPU's does; index's structured
// meta function has warned already.
IndexPlan make_index_plan(const Tensor& self, const c10::List<std::optional<Tensor>>& indices,
                          bool warn_uint8) {
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(),
                    "too many indices for tensor of dimension ", self.dim(), " (got ",
                    indices.size(), ")");
  // Expand boolean masks into long indices (one per masked dim).
  std::vector<Tensor> idx;  // per self dim, undefined = full slice
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<Tensor> o = indices.get(i);
    if (!o.has_value() || !o->defined()) {
      idx.emplace_back();
      continue;
    }
    Tensor t = *o;
    if (t.device() != self.device()) t = t.to(self.device());
    if (t.scalar_type() == c10::kBool || t.scalar_type() == c10::kByte) {
      if (warn_uint8 && t.scalar_type() == c10::kByte) {
        TORCH_WARN(
            "indexing with dtype torch.uint8 is now deprecated,"
            " please use a dtype torch.bool instead.");
      }
      const int64_t start = static_cast<int64_t>(idx.size());
      for (int64_t j = 0; j < t.dim(); ++j) {
        TORCH_CHECK_INDEX(start + j < self.dim() && t.size(j) == self.size(start + j),
                          "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", start + j);
      }
      Tensor nz = bridge::nonzero(t);
      for (int64_t j = 0; j < t.dim(); ++j) idx.push_back(nz.select(1, j));
      if (t.dim() == 0) {
        TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: 0-d boolean index");
      }
    } else {
      TORCH_CHECK_INDEX(t.scalar_type() == c10::kLong || t.scalar_type() == c10::kInt,
                        "tensors used as indices must be long, int, byte or bool tensors");
      idx.push_back(t);
    }
  }
  while (static_cast<int64_t>(idx.size()) < self.dim()) idx.emplace_back();
  TORCH_CHECK_INDEX(static_cast<int64_t>(idx.size()) <= self.dim(),
                    "too many indices for tensor of dimension ", self.dim(), " (got ", idx.size(),
                    ")");
  std::vector<int64_t> where;
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d].defined()) where.push_back(static_cast<int64_t>(d));
  TORCH_INTERNAL_ASSERT(!where.empty());
  IndexPlan p;
  p.m = static_cast<int64_t>(where.size());
  bool adjacent = where.back() - where.front() + 1 == p.m;
  p.self = self;
  std::vector<Tensor> used;
  if (adjacent) {
    p.pos = where.front();
    for (int64_t d : where) used.push_back(idx[d]);
  } else {
    std::vector<int64_t> perm(where.begin(), where.end());
    for (int64_t d = 0; d < self.dim(); ++d)
      if (!idx[d].defined()) perm.push_back(d);
    p.self = self.permute(perm);
    p.pos = 0;
    for (int64_t d : where) used.push_back(idx[d]);
  }
  at::DimVector shape;
  for (const Tensor& t : used) {
    // ATen's expand_outplace message and error type (IndexError), for index_put_ too.
    bool broadcasts = true;
    const auto ts = t.sizes();
    for (size_t k = 1; k <= std::min(shape.size(), ts.size()); ++k) {
      const int64_t a = shape[shape.size() - k], b = ts[ts.size() - k];
      broadcasts = broadcasts && (a == b || a == 1 || b == 1);
    }
    if (!broadcasts) {
      std::ostringstream shapes;
      for (size_t k = 0; k < used.size(); ++k) shapes << (k ? ", " : "") << used[k].sizes();
      TORCH_CHECK_INDEX(false,
                        "shape mismatch: indexing tensors could not be broadcast together "
                        "with shapes ",
                        shapes.str());
    }
    shape = at::infer_size_dimvector(shape, t.sizes());
  }
  p.idx_shape = shape;
  p.count = c10::multiply_integers(shape);
  // No number indexes a dim of size 0 (the CPU's check, in AdvancedIndex, before any kernel).
  for (size_t k = 0; k < used.size() && p.count > 0; ++k) {
    TORCH_CHECK_INDEX(p.self.size(p.pos + static_cast<int64_t>(k)) > 0,
                      "index is out of bounds for dimension with size 0");
  }
  p.indices = empty_device({p.m, p.count}, c10::kLong, self.device());
  for (int64_t k = 0; k < p.m && p.count > 0; ++k)
    copy_on_device(p.indices.select(0, k).view(shape), used[k].expand(shape));
  const auto ss = p.self.sizes();
  p.full_shape.assign(ss.begin(), ss.begin() + p.pos);
  p.flat_shape = p.full_shape;
  p.full_shape.append(shape.begin(), shape.end());
  p.flat_shape.push_back(p.count);
  for (int64_t d = p.pos + p.m; d < p.self.dim(); ++d) {
    p.full_shape.push_back(ss[d]);
    p.flat_shape.push_back(ss[d]);
  }
  return p;
}

bool all_undefined(const c10::List<std::optional<Tensor>>& indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<Tensor> o = indices.get(i);
    if (o.has_value() && o->defined()) return false;
  }
  return true;
}

Tensor& index_out(const Tensor& self, const c10::List<std::optional<Tensor>>& indices,
                  Tensor& out) {
  check_out_device(out, self.device(), "index");
  if (all_undefined(indices)) {
    at::native::resize_output(out, self.sizes());
    copy_on_device(out, self);
    return out;
  }
  IndexPlan p = make_index_plan(self, indices, /*warn_uint8=*/false);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(),
              ") and result (", out.scalar_type(), ") must have the same scalar type");
  at::native::resize_output(out, p.full_shape);
  if (out.numel() == 0) return out;
  write_result(
      out, self.scalar_type(),
      [&](const Tensor& t) {
        launch(Op::Index, {tensor_operand(p.self), tensor_operand(p.indices)},
               {tensor_operand(t.view(p.flat_shape))}, {p.pos});
      },
      Target::Contiguous);
  return out;
}

Tensor& index_put_impl_(Tensor& self, const c10::List<std::optional<Tensor>>& indices,
                        const Tensor& values, bool accumulate, bool /*unsafe*/) {
  common_device("index_put_", {&self, &values});
  // The CPU checks the values' shape against the indexing result first, then their dtype.
  auto check_dtype = [&] {
    TORCH_CHECK(values.scalar_type() == self.scalar_type(),
                "Index put requires the source and destination dtypes "
                "match, got ",
                self.scalar_type(), " for the destination and ", values.scalar_type(),
                " for the source.");
  };
  // The CPU's checks: an expanded self warns; values or indices in self's memory raise.
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN(
        "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
        "performing this operation. This also applies to advanced indexing e.g. tensor[indices] "
        "= tensor");
  }
  if (!is_cpu_scalar(values)) at::assert_no_overlap(self, values);
  for (const std::optional<Tensor>& index : indices) {
    if (index.has_value() && index->defined()) at::assert_no_overlap(self, *index);
  }
  if (all_undefined(indices)) {
    TORCH_CHECK(at::is_expandable_to(values.sizes(), self.sizes()),
                "shape mismatch: value tensor of shape ", values.sizes(),
                " cannot be broadcast to indexing result of shape ", self.sizes());
    check_dtype();
    if (accumulate)
      self.add_(values);
    else
      copy_on_device(self, values);
    return self;
  }
  IndexPlan p = make_index_plan(self, indices, /*warn_uint8=*/true);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), p.full_shape),
              "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", at::IntArrayRef(p.full_shape));
  check_dtype();
  if (p.count == 0 || self.numel() == 0) return self;
  Tensor v = values.is_cpu() ? values.to(self.device()) : values;
  v = v.expand(p.full_shape).reshape(p.flat_shape);
  Tensor target = p.self;  // a view of self
  launch(Op::IndexPut, {tensor_operand(target), tensor_operand(p.indices), tensor_operand(v)},
         {tensor_operand(target)}, {p.pos, accumulate ? 1 : 0});
  return self;
}

Tensor& masked_select_out(const Tensor& self, const Tensor& mask, Tensor& out) {
  common_device("masked_select", {&self, &mask});
  check_out_device(out, self.device(), "masked_select");
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_select: expected BoolTensor for mask");
  const auto shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  Tensor s = self.expand(shape), m = mask.expand(shape);
  if (s.dim() == 0) {
    s = s.view({1});
    m = m.view({1});
  }
  c10::List<std::optional<Tensor>> l;
  l.push_back(m);
  return bridge::index_out(s, l, out);
}
Tensor masked_select(const Tensor& self, const Tensor& mask) {
  Tensor out = empty_device({0}, self.scalar_type(), self.device());
  return bridge::masked_select_out(self, mask, out);
}

// ------------------------------------------------------------ sort / topk

// stable=false reproduces the CPU's at::sort tie order (not a stable one), see sort_entry.
void sort_into(const Tensor& self, int64_t dim, bool descending, const Tensor& values,
               const Tensor& indices, bool stable = true) {
  if (values.numel() == 0) return;
  Tensor in = self.dim() == 0 ? self.view({1}) : self;
  Tensor v = self.dim() == 0 ? values.view({1}) : values;
  Tensor i = self.dim() == 0 ? indices.view({1}) : indices;
  launch(Op::Sort, {tensor_operand(in)}, {tensor_operand(v), tensor_operand(i)},
         {dim, descending ? 1 : 0, stable ? 1 : 0});
}

std::tuple<Tensor&, Tensor&> sort_stable_out(const Tensor& self, std::optional<bool> stable,
                                             int64_t dim, bool descending, Tensor& values,
                                             Tensor& indices) {
  check_out_device(values, self.device(), "sort");
  check_out_device(indices, self.device(), "sort");
  TORCH_CHECK(!self.is_complex(), "sort(): input tensor must be of non-complex type");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == c10::kLong,
              "Expected out tensor to have dtype long int, but got ", indices.scalar_type(),
              " instead");
  dim = c10::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  sort_into(self, dim, descending, values, indices, stable.value_or(false));
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topk_out(const Tensor& self, c10::SymInt k_s, int64_t dim,
                                      bool largest, bool, Tensor& values, Tensor& indices) {
  check_out_device(values, self.device(), "topk");
  check_out_device(indices, self.device(), "topk");
  const int64_t k = k_s.expect_int();
  dim = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t size = self.dim() > 0 ? self.size(dim) : 1;
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[dim] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  sort_into(self, dim, largest, values, indices);
  return {values, indices};
}

// ------------------------------------------------------------ flip, roll

// flip: one Index launch per flipped dim with reversed positions.
Tensor flip(const Tensor& self, at::IntArrayRef dims) {
  uint64_t seen = 0;
  std::vector<int64_t> ds;
  for (int64_t d : dims) {
    const int64_t w = c10::maybe_wrap_dim(d, self.dim());
    TORCH_CHECK(!(seen & (uint64_t(1) << w)),
                "dims has duplicates, original flip dims size=", dims.size(),
                ", but unique flip dims size=", __builtin_popcountll(seen));
    seen |= uint64_t(1) << w;
    if (self.dim() > 0 && self.size(w) > 1) ds.push_back(w);  // a 0-d tensor takes dim 0
  }
  if (self.numel() == 0 || ds.empty()) return self.clone();
  Tensor cur = self;
  for (int64_t w : ds) {
    const int64_t n = self.size(w);
    Tensor idx = empty_device({1, n}, c10::kLong, self.device());
    launch(Op::Arange, {int_operand(n - 1), int_operand(-1)}, {tensor_operand(idx.view({n}))});
    // The CPU's flip keeps the input's layout (empty_like, preserve format).
    Tensor out = empty_elementwise(self.sizes(), self.scalar_type(), self.device(), {&self});
    launch(Op::Index, {tensor_operand(cur), tensor_operand(idx)}, {tensor_operand(out)}, {w});
    cur = out;
  }
  return cur;
}

Tensor roll(const Tensor& self, c10::SymIntArrayRef shifts_s, at::IntArrayRef dims) {
  const at::IntArrayRef shifts = C10_AS_INTARRAYREF_SLOW(shifts_s);
  TORCH_CHECK(!shifts.empty(), "`shifts` required");  // the CPU's first check
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(),
                ", dims:", dims.size());
    return bridge::roll(self.reshape({-1}), shifts_s, at::IntArrayRef{0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(),
              "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  Tensor cur = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = c10::maybe_wrap_dim(dims[i], self.dim());
    Tensor out = empty_device_like(self, self.scalar_type());
    const int64_t n = self.size(d);
    if (out.numel() == 0) return out;
    int64_t s = n == 0 ? 0 : shifts[i] % n;
    if (s < 0) s += n;
    if (s == 0) {
      copy_on_device(out, cur);
    } else {
      copy_on_device(out.narrow(d, s, n - s), cur.narrow(d, 0, n - s));
      copy_on_device(out.narrow(d, 0, s), cur.narrow(d, n - s, s));
    }
    cur = out;
  }
  return cur.is_same(self) ? self.clone() : cur;
}

// ------------------------------------------------------------ isin

// out = whether each element of e is in t (both in one dtype); an empty t: none is.
Tensor& isin_into(const Tensor& e, const Tensor& t, bool invert, Tensor& out) {
  if (t.numel() == 0) {
    fill_scalar_device(out, invert ? 1 : 0);
    return out;
  }
  write_result(
      out, c10::kBool,
      [&](const Tensor& o) {
        launch(Op::Isin, {tensor_operand(e), tensor_operand(t)}, {tensor_operand(o)},
               {invert ? 1 : 0});
      },
      Target::Contiguous);
  return out;
}

Tensor& isin_tt_out(const Tensor& el, const Tensor& test, bool /*assume_unique*/, bool invert,
                    Tensor& out) {
  const c10::Device device = common_device("isin", {&el, &test});
  check_out_device(out, device, "isin");
  const auto compute = at::result_type(el, test);
  at::native::resize_output(out, el.sizes());
  if (out.numel() == 0) return out;
  const Tensor t = test.is_cpu() ? test.to(device) : test;
  return isin_into(to_dtype_on_device(el, compute), to_dtype_on_device(t, compute), invert, out);
}
Tensor& isin_ts_out(const Tensor& el, const at::Scalar& test, bool, bool invert, Tensor& out) {
  check_out_device(out, el.device(), "isin");
  const auto compute = at::result_type(el, test);
  at::native::resize_output(out, el.sizes());
  if (out.numel() == 0) return out;
  Tensor e = to_dtype_on_device(el, compute);
  write_result(
      out, c10::kBool,
      [&](const Tensor& o) {
        launch(invert ? Op::Ne : Op::Eq, {tensor_operand(e), scalar_operand(test, compute)},
               {tensor_operand(o)});
      },
      Target::Contiguous);
  return out;
}
Tensor& isin_st_out(const at::Scalar& el, const Tensor& test, bool, bool invert, Tensor& out) {
  check_out_device(out, test.device(), "isin");
  const auto compute = at::result_type(el, test);
  at::native::resize_output(out, {});
  Tensor e = empty_device({}, compute, test.device());
  fill_scalar_device(e, real_scalar(el));
  return isin_into(e, to_dtype_on_device(test, compute), invert, out);
}

// ------------------------------------------------------------ histc

// histc (integer inputs too, as CUDA: MoE routers count tokens per expert):
// bin = floor((x - min) / (max - min) * bins), x == max in the last bin,
// out-of-range values dropped; counts by scatter-add into bins + 1 slots.
Tensor histc(const Tensor& self, int64_t bins, const at::Scalar& min_s, const at::Scalar& max_s) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(!self.is_complex() && self.scalar_type() != c10::kBool,
              "\"histc\" not implemented for '", c10::toString(self.scalar_type()), "'");
  double lo = min_s.toDouble(), hi = max_s.toDouble();
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc(): range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histc(): max must be larger than min");
  Tensor x = to_dtype_on_device(self, c10::kFloat).reshape({-1});
  if (lo == hi && x.numel() > 0) {  // data range: a synchronisation, as on the CPU
    lo = x.min().item<double>();
    hi = x.max().item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  Tensor counts = empty_device({bins + 1}, self.scalar_type(), self.device());
  fill_scalar_device(counts, 0);
  if (x.numel() > 0) {
    Tensor pos = ((x - lo) * (static_cast<double>(bins) / (hi - lo))).floor_();
    pos = at::where(x.eq(hi), static_cast<double>(bins - 1), pos);
    Tensor inside = at::logical_and(x.ge(lo), x.le(hi));
    Tensor bin = at::where(inside, pos, static_cast<double>(bins)).to(c10::kLong);
    Tensor ones = empty_device({x.numel()}, self.scalar_type(), self.device());
    fill_scalar_device(ones, 1);
    launch(Op::Scatter, {tensor_operand(counts), tensor_operand(bin), tensor_operand(ones)},
           {tensor_operand(counts)}, {0, 1, 1});
  }
  return counts.narrow(0, 0, bins);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("index_select", index_select);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("gather.out", gather_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("index_add.out", index_add_out);
  m.impl("index_copy.out", index_copy_out);
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put_impl_);
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzero_out);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("sort.values_stable", sort_stable_out);
  m.impl("topk.values", topk_out);
  m.impl("flip", flip);
  m.impl("roll", roll);
  m.impl("isin.Tensor_Tensor_out", isin_tt_out);
  m.impl("isin.Tensor_Scalar_out", isin_ts_out);
  m.impl("isin.Scalar_Tensor_out", isin_st_out);
  m.impl("histc", histc);
}

}  // namespace openneuron::bridge
