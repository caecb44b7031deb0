// Selection by position: argmax/argmin and max/min along a dim, tril/triu,
// masked_fill and the scans (cumsum, cumprod). Each launches a compiler op of the
// select family (lower_select.cpp); masked_fill is a Where.
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// argmax/argmin and max/min over a dim.
template <bool kMax>
void argreduce_into(const Tensor& self, int64_t dim, bool keepdim, const Tensor& indices,
                    const Tensor* values) {
  at::DimVector keep(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) keep[dim] = 1;
  if (indices.numel() == 0) return;
  const bool direct_i = indices.is_contiguous();
  const bool direct_v =
      values == nullptr || (values->is_contiguous() && values->scalar_type() == self.scalar_type());
  Tensor ti = direct_i ? indices : empty_device(indices.sizes(), c10::kLong, indices.device());
  Tensor tv = values == nullptr ? Tensor()
              : direct_v        ? *values
                         : empty_device(values->sizes(), self.scalar_type(), values->device());
  Tensor in = self.dim() == 0 ? self.view({1}) : self;
  at::DimVector k2 = self.dim() == 0 ? at::DimVector{1} : keep;
  if (values != nullptr) {
    launch(kMax ? Op::ArgMax : Op::ArgMin, {tensor_operand(in)},
           {tensor_operand(ti.view(k2)), tensor_operand(tv.view(k2))}, {self.dim() == 0 ? 0 : dim});
  } else {
    launch(kMax ? Op::ArgMax : Op::ArgMin, {tensor_operand(in)}, {tensor_operand(ti.view(k2))},
           {self.dim() == 0 ? 0 : dim});
  }
  if (!direct_i) copy_on_device(indices, ti);
  if (!direct_v) copy_on_device(*values, tv);
}

template <bool kMax>
Tensor& argmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  const char* name = kMax ? "argmax()" : "argmin()";
  check_out_device(out, self.device(), name);
  TORCH_CHECK(out.scalar_type() == c10::kLong,
              "Expected out tensor to have dtype long int, but got ", out.scalar_type(),
              " instead");
  Tensor in = self;
  int64_t d = 0;
  at::DimVector shape;
  if (!dim.has_value()) {
    TORCH_CHECK_INDEX(self.numel() > 0, name,
                      ": Expected reduction dim to be specified for input.numel() == 0.");
    in = self.reshape({-1});
    if (keepdim) shape.assign(self.dim(), 1);
  } else {
    d = c10::maybe_wrap_dim(*dim, self.dim());
    if (self.dim() > 0) {
      TORCH_CHECK_INDEX(self.size(d) != 0, name, ": Expected reduction dim ", d,
                        " to have non-zero size.");
      for (int64_t i = 0; i < self.dim(); ++i)
        if (i != d || keepdim) shape.push_back(i == d ? 1 : self.size(i));
    }
  }
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::DimVector keep(in.sizes().begin(), in.sizes().end());
  if (in.dim() > 0) keep[d] = 1;
  Tensor flat = out.is_contiguous() ? out : empty_device(out.sizes(), c10::kLong, out.device());
  argreduce_into<kMax>(in, d, true, flat.view(keep.empty() ? at::DimVector{} : keep), nullptr);
  if (!flat.is_same(out)) copy_on_device(out, flat);
  return out;
}

template <bool kMax>
std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                                         Tensor& values, Tensor& indices) {
  const char* name = kMax ? "max()" : "min()";
  check_out_device(values, self.device(), name);
  check_out_device(indices, self.device(), name);
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == c10::kLong,
              "Expected out tensor to have dtype long int, but got ", indices.scalar_type(),
              " instead");
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  at::DimVector shape;
  if (self.dim() > 0) {
    TORCH_CHECK_INDEX(self.size(d) != 0, name, ": Expected reduction dim ", d,
                      " to have non-zero size.");
    for (int64_t i = 0; i < self.dim(); ++i)
      if (i != d || keepdim) shape.push_back(i == d ? 1 : self.size(i));
  }
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  if (values.numel() == 0) return {values, indices};
  at::DimVector keep(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) keep[d] = 1;
  Tensor vi = values.is_contiguous()
                  ? values
                  : empty_device(values.sizes(), values.scalar_type(), values.device());
  Tensor ii = indices.is_contiguous() ? indices
                                      : empty_device(indices.sizes(), c10::kLong, indices.device());
  Tensor vk = vi.view(keep), ik = ii.view(keep);
  argreduce_into<kMax>(self, d, true, ik, &vk);
  if (!vi.is_same(values)) copy_on_device(values, vi);
  if (!ii.is_same(indices)) copy_on_device(indices, ii);
  return {values, indices};
}

template <Op kOp>
Tensor& tri_out(const Tensor& self, int64_t diagonal, Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, kOp == Op::Tril ? "tril" : "triu",
              ": input tensor must have at least 2 dimensions");
  check_out_device(out, self.device(), kOp == Op::Tril ? "tril" : "triu");
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  Tensor src = to_dtype_on_device(self, out.scalar_type());
  launch(kOp, {tensor_operand(src)}, {tensor_operand(out)}, {diagonal});
  return out;
}
template <Op kOp>
Tensor tri(const Tensor& self, int64_t diagonal) {
  Tensor out = empty_device_like(self, self.scalar_type());
  return tri_out<kOp>(self, diagonal, out);
}
template <Op kOp>
Tensor& tri_(Tensor& self, int64_t diagonal) {
  return tri_out<kOp>(self, diagonal, self);
}

void check_mask(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool,
              "masked_fill_ only supports boolean masks, but got mask "
              "with dtype ",
              mask.scalar_type());
  check_output_shape(self, at::infer_size_dimvector(self.sizes(), mask.sizes()));
  // The CPU's checks: an expanded self warns, a mask sharing part of self's memory raises.
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN(
        "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
        "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = "
        "scalar");
  }
  at::assert_no_partial_overlap(self, mask);
}
Tensor& masked_fill_scalar(Tensor& self, const Tensor& mask, const at::Scalar& value) {
  common_device("masked_fill_", {&self, &mask});
  check_mask(self, mask);
  if (self.numel() == 0) return self;
  launch(Op::Where,
         {tensor_operand(mask.expand(self.sizes())), scalar_operand(value, self.scalar_type()),
          tensor_operand(self)},
         {tensor_operand(self)});
  return self;
}
Tensor& masked_fill_tensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got "
              "tensor with ",
              value.dim(), " dimension(s).");
  if (value.is_cpu()) return masked_fill_scalar(self, mask, value.item());
  common_device("masked_fill_", {&self, &mask, &value});
  check_mask(self, mask);
  if (self.numel() == 0) return self;
  launch(Op::Where,
         {tensor_operand(mask.expand(self.sizes())),
          tensor_operand(to_dtype_on_device(value, self.scalar_type()).expand(self.sizes())),
          tensor_operand(self)},
         {tensor_operand(self)});
  return self;
}

template <Op kOp>
Tensor& scan_out(const Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,
                 Tensor& out) {
  check_out_device(out, self.device(), kOp == Op::Cumsum ? "cumsum" : "cumprod");
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  const auto want = narrow_dtype(integral_to_long(self, dtype));
  TORCH_CHECK(!dtype.has_value() || out.scalar_type() == want, "Expected out tensor to have dtype ",
              want, ", but got ", out.scalar_type(), " instead");
  write_result(
      out, out.scalar_type(),
      [&](const Tensor& t) {
        Tensor in = self.dim() == 0 ? self.view({1}) : self;
        launch(kOp, {tensor_operand(in)}, {tensor_operand(self.dim() == 0 ? t.view({1}) : t)}, {d});
      },
      Target::Contiguous);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("argmax.out", argmax_out<true>);
  m.impl("argmin.out", argmax_out<false>);
  m.impl("max.dim_max", max_dim_out<true>);
  m.impl("min.dim_min", max_dim_out<false>);
  m.impl("tril.out", tri_out<Op::Tril>);
  m.impl("triu.out", tri_out<Op::Triu>);
  m.impl("tril", tri<Op::Tril>);
  m.impl("triu", tri<Op::Triu>);
  m.impl("tril_", tri_<Op::Tril>);
  m.impl("triu_", tri_<Op::Triu>);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  m.impl("cumsum.out", scan_out<Op::Cumsum>);
  m.impl("cumprod.out", scan_out<Op::Cumprod>);
}

}  // namespace openneuron::bridge
