// Reductions: sum (and nansum), mean, prod, amax/amin, max/min of a whole tensor, all/any,
// var/std (and var_mean/std_mean) and vector norms. Each launches the reduce family's
// compiler ops (lower_reduce.cpp) over a bit mask of reduced dims.
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/linalg_vector_norm_meta.h>

#include <limits>

#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// The reduced dims of a reduction as a bit mask, with its keepdim and result shapes.
struct ReducePlan {
  int64_t mask = 0;
  at::DimVector keep_shape;  // reduced dims as size 1
  at::DimVector out_shape;   // keepdim applied
};

ReducePlan plan_reduce(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) {
  ReducePlan p;
  const int64_t nd = self.dim();
  if (nd == 0) {
    // A 0-dim tensor reduces to itself; dim 0 / -1 are valid names for it.
    if (dims.has_value()) {
      for (int64_t d : *dims) c10::maybe_wrap_dim(d, nd);
    }
  } else if (!dims.has_value() || dims->empty()) {
    p.mask = (int64_t(1) << nd) - 1;
  } else {
    for (int64_t d : *dims) {
      const int64_t w = c10::maybe_wrap_dim(d, nd);
      TORCH_CHECK(!(p.mask & (int64_t(1) << w)), "dim ", w,
                  " appears multiple times in the list of dims");
      p.mask |= int64_t(1) << w;
    }
  }
  for (int64_t i = 0; i < nd; ++i) {
    const bool reduced = p.mask & (int64_t(1) << i);
    p.keep_shape.push_back(reduced ? 1 : self.size(i));
    if (!reduced || keepdim) p.out_shape.push_back(reduced ? 1 : self.size(i));
  }
  return p;
}

// Reduces `in` over the plan's dims into `out` (plan.out_shape; the engine writes its
// keepdim view). An empty input gives `empty_value`, or raises when the reduction has
// no identity (nullopt). The engine writes `result` (out's dtype unless given), then
// the values are converted into `out`.
void reduce_into(Op op, const Tensor& in, const ReducePlan& plan, const Tensor& out,
                 std::optional<double> empty_value,
                 std::optional<c10::ScalarType> result = std::nullopt) {
  if (out.numel() == 0) return;
  if (in.numel() == 0) {
    TORCH_CHECK_INDEX(empty_value.has_value(), op_name(op),  // IndexError, as on the CPU
                      "(): cannot reduce over an empty dimension (the operation has no identity)");
    fill_scalar_device(out, *empty_value);
    return;
  }
  write_result(
      out, result.value_or(out.scalar_type()),
      [&](const Tensor& target) {
        launch(op, {tensor_operand(in)}, {tensor_operand(target.view(plan.keep_shape))},
               {plan.mask});
      },
      Target::Contiguous);
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::Tensor out =
      empty_device(plan.out_shape, narrow_dtype(integral_to_long(self, dtype)), self.device());
  reduce_into(Op::Sum, self, plan, out, 0.0);
  return out;
}
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::native::resize_output(out, plan.out_shape);
  reduce_into(Op::Sum, self, plan, out, 0.0);
  return out;
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  const auto out_dtype = dtype.value_or(self.scalar_type());
  TORCH_CHECK(c10::isFloatingType(out_dtype) || c10::isComplexType(out_dtype),
              "mean(): could not infer output dtype. Input dtype must be either a floating point "
              "or complex dtype. Got: ",
              out_dtype);
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::Tensor out = empty_device(plan.out_shape, narrow_dtype(out_dtype), self.device());
  reduce_into(Op::Mean, self, plan, out, std::numeric_limits<double>::quiet_NaN());
  return out;
}
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::native::resize_output(out, plan.out_shape);
  reduce_into(Op::Mean, self, plan, out, std::numeric_limits<double>::quiet_NaN());
  return out;
}

template <Op kOp>
at::Tensor amax_amin(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  // The CPU's check (its meta function): an empty tensor needs dims, none of them empty.
  if (self.numel() == 0)
    at::native::zero_numel_check_dims(self, dims, kOp == Op::Amax ? "amax()" : "amin()");
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::Tensor out = empty_device(plan.out_shape, self.scalar_type(), self.device());
  reduce_into(kOp, self, plan, out, std::nullopt);
  return out;
}

// all/any: values as Bool, then min/max.
void check_allany_out(const char* name, const Tensor& out) {
  // uint8 results are kept for compatibility, as on the CPU.
  TORCH_CHECK(out.scalar_type() == c10::kBool || out.scalar_type() == c10::kByte, name,
              " only supports bool tensor for result, got: ", out.scalar_type());
}

template <bool kAll>
Tensor& allany_impl(const Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, Tensor& out) {
  const char* name = kAll ? "all" : "any";
  check_out_device(out, self.device(), name);
  check_allany_out(name, out);
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::native::resize_output(out, plan.out_shape);
  Tensor b = to_dtype_on_device(self, c10::kBool);
  reduce_into(kAll ? Op::Amin : Op::Amax, b, plan, out, kAll ? 1.0 : 0.0, c10::kBool);
  return out;
}
template <bool kAll>
Tensor& allany_all_out(const Tensor& self, Tensor& out) {
  return allany_impl<kAll>(self, std::nullopt, false, out);
}
template <bool kAll>
Tensor& allany_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  return allany_impl<kAll>(self, at::IntArrayRef{dim}, keepdim, out);
}
template <bool kAll>
Tensor& allany_dims_out(const Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                        Tensor& out) {
  if (dims.has_value() && dims->empty()) {  // no dims: elementwise cast
    check_out_device(out, self.device(), kAll ? "all" : "any");
    check_allany_out(kAll ? "all" : "any", out);
    at::native::resize_output(out, self.sizes());
    copy_on_device(out, to_dtype_on_device(self, c10::kBool));
    return out;
  }
  return allany_impl<kAll>(self, dims, keepdim, out);
}

template <bool kMax>
Tensor max_all(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, kMax ? "max()" : "min()",
              ": Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  Tensor out = empty_device({}, self.scalar_type(), self.device());
  reduce_into(kMax ? Op::Amax : Op::Amin, self, plan_reduce(self, std::nullopt, false), out, 0);
  return out;
}
template <bool kMax>
Tensor& max_all_out(const Tensor& self, Tensor& out) {
  Tensor r = max_all<kMax>(self);
  at::native::resize_output(out, {});
  copy_on_device(out, r);
  return out;
}

Tensor& prod_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, Tensor& out) {
  check_out_device(out, self.device(), "prod");
  const ReducePlan plan = plan_reduce(self, at::IntArrayRef{dim}, keepdim);
  at::native::resize_output(out, plan.out_shape);
  Tensor in = to_dtype_on_device(self, narrow_dtype(integral_to_long(self, dtype)));
  reduce_into(Op::Prod, in, plan, out, 1.0);
  return out;
}
Tensor prod_all(const Tensor& self, std::optional<c10::ScalarType> dtype) {
  Tensor out = empty_device({}, narrow_dtype(integral_to_long(self, dtype)), self.device());
  Tensor in = to_dtype_on_device(self, out.scalar_type());
  reduce_into(Op::Prod, in, plan_reduce(self, std::nullopt, false), out, 1.0);
  return out;
}

// ------------------------------------------------------------ var / std, vector norm

struct VarResult {
  Tensor var, mean;
};
// The deviations from the mean are squared and summed in double by Var/Std
// (Std takes the root before narrowing), as the CPU's Welford accumulation is.
VarResult var_mean_impl(const Tensor& self, at::OptionalIntArrayRef dims,
                        const std::optional<at::Scalar>& correction, bool keepdim, bool std_dev) {
  const auto dt = self.scalar_type();
  const c10::ScalarType acc = at::isReducedFloatingType(dt) ? c10::kFloat : dt;
  Tensor x = to_dtype_on_device(self, acc);
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  int64_t n = 1;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (plan.mask & (int64_t(1) << i)) n *= self.size(i);
  const double c = correction.has_value() ? correction->toDouble() : 1.0;
  Tensor mean = empty_device(plan.keep_shape, acc, self.device());
  Tensor sq = empty_device(plan.keep_shape, acc, self.device());
  if (self.numel() == 0) {
    fill_scalar_device(mean, std::numeric_limits<double>::quiet_NaN());
    fill_scalar_device(sq, std::numeric_limits<double>::quiet_NaN());
  } else {
    launch(Op::Mean, {tensor_operand(x)}, {tensor_operand(mean)}, {plan.mask});
    Tensor d = empty_device(self.sizes(), acc, self.device());
    launch(Op::Sub,
           {tensor_operand(x), tensor_operand(mean.expand(self.sizes())), float_operand(1.0)},
           {tensor_operand(d)});
    launch(std_dev ? Op::Std : Op::Var,
           {tensor_operand(d), float_operand(std::max(0.0, static_cast<double>(n) - c))},
           {tensor_operand(sq)}, {plan.mask});
  }
  return {sq.view(plan.out_shape), mean.view(plan.out_shape)};
}

template <bool kStd>
Tensor& var_out(const Tensor& self, at::OptionalIntArrayRef dims,
                const std::optional<at::Scalar>& correction, bool keepdim, Tensor& out) {
  const char* name = kStd ? "std" : "var";
  check_out_device(out, self.device(), name);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || self.is_complex(), name,
              " only supports floating-point and complex dtypes. Got: ", self.scalar_type());
  if (self.is_complex()) {
    route_to_cpu(kStd ? "aten::std" : "aten::var", "correction_out", self, dims, correction,
                 keepdim, out);
    return out;
  }
  Tensor v = var_mean_impl(self, dims, correction, keepdim, kStd).var;
  at::native::resize_output(out, v.sizes());
  copy_on_device(out, v);
  return out;
}
template <bool kStd>
Tensor var_fn(const Tensor& self, at::OptionalIntArrayRef dims,
              const std::optional<at::Scalar>& correction, bool keepdim) {
  // The variance of complex values is real.
  Tensor out = empty_device({0}, c10::toRealValueType(self.scalar_type()), self.device());
  return var_out<kStd>(self, dims, correction, keepdim, out);
}
template <bool kStd>
std::tuple<Tensor, Tensor> var_mean_fn(const Tensor& self, at::OptionalIntArrayRef dims,
                                       const std::optional<at::Scalar>& correction, bool keepdim) {
  if (self.is_complex()) {
    return {var_fn<kStd>(self, dims, correction, keepdim), at::mean(self, dims, keepdim)};
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), kStd ? "std_mean" : "var_mean",
              " only support floating point and complex dtypes");
  VarResult r = var_mean_impl(self, dims, correction, keepdim, kStd);
  return {to_dtype_on_device(r.var, self.scalar_type()),
          to_dtype_on_device(r.mean, self.scalar_type())};
}

Tensor& vector_norm_out(const Tensor& self, const at::Scalar& ord_s, at::OptionalIntArrayRef dims,
                        bool keepdim, std::optional<c10::ScalarType> dtype, Tensor& out) {
  check_out_device(out, self.device(), "linalg.vector_norm");
  // PyTorch's checks: the input and dtype, and (an empty input) that an inf or negative
  // norm, which has no identity, reduces no empty dim.
  MetaChecks<at::meta::structured_linalg_vector_norm>().meta(self, ord_s, dims, keepdim, dtype);
  if (self.is_complex()) {
    route_to_cpu("aten::linalg_vector_norm", "out", self, ord_s, dims, keepdim, dtype, out);
    return out;
  }
  const double ord = ord_s.toDouble();
  const auto rdt = dtype.has_value() ? *dtype : self.scalar_type();
  const c10::ScalarType acc = at::isReducedFloatingType(rdt) ? c10::kFloat : rdt;
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  if (self.numel() == 0) {
    at::native::resize_output(out, plan.out_shape);
    fill_scalar_device(out, 0);  // empty sums (the checks left inf norms an empty result)
    return out;
  }
  Tensor x = to_dtype_on_device(self, acc);
  Tensor a = empty_device(self.sizes(), acc, self.device());
  Tensor r = empty_device(plan.keep_shape, acc, self.device());
  if (ord == 2) {
    launch(Op::Mul, {tensor_operand(x), tensor_operand(x)}, {tensor_operand(a)});
    launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    launch(Op::Sqrt, {tensor_operand(r)}, {tensor_operand(r)});
  } else {
    launch(Op::Abs, {tensor_operand(x)}, {tensor_operand(a)});
    if (std::isinf(ord)) {
      launch(ord > 0 ? Op::Amax : Op::Amin, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    } else if (ord == 0) {
      Tensor b = empty_device(self.sizes(), c10::kBool, self.device());
      launch(Op::Ne, {tensor_operand(x), float_operand(0)}, {tensor_operand(b)});
      copy_on_device(a, b);
      launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    } else if (ord == 1) {
      launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    } else {
      launch(Op::Pow, {tensor_operand(a), float_operand(ord)}, {tensor_operand(a)});
      launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
      launch(Op::Pow, {tensor_operand(r), float_operand(1.0 / ord)}, {tensor_operand(r)});
    }
  }
  at::native::resize_output(out, plan.out_shape);
  copy_on_device(out, r.view(plan.out_shape));
  return out;
}

// nansum: the sum with NaN read as 0 (integers have none), so a half-type result is
// rounded once from a float sum whatever the layout. Complex declines to the host
// library kernel, which raises the CPU's error.
at::Tensor without_nan(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "neuron: complex nansum");
  return c10::isFloatingType(self.scalar_type()) ? self.masked_fill(self.isnan(), 0) : self;
}
at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                  std::optional<c10::ScalarType> dtype) {
  return at::sum(without_nan(self), dims, keepdim, dtype);
}
at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                       std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  return at::sum_out(out, without_nan(self), dims, keepdim, dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("sum.dim_IntList", sum_dim);
  m.impl("sum.IntList_out", sum_out);
  m.impl("nansum", nansum);
  m.impl("nansum.out", nansum_out);
  m.impl("mean.dim", mean_dim);
  m.impl("mean.out", mean_out);
  m.impl("amax", amax_amin<Op::Amax>);
  m.impl("amin", amax_amin<Op::Amin>);
  m.impl("all.all_out", allany_all_out<true>);
  m.impl("all.out", allany_dim_out<true>);
  m.impl("all.dims_out", allany_dims_out<true>);
  m.impl("any.all_out", allany_all_out<false>);
  m.impl("any.out", allany_dim_out<false>);
  m.impl("any.dims_out", allany_dims_out<false>);
  m.impl("max", max_all<true>);
  m.impl("min", max_all<false>);
  m.impl("max.unary_out", max_all_out<true>);
  m.impl("min.unary_out", max_all_out<false>);
  m.impl("prod.int_out", prod_dim_out);
  m.impl("prod", prod_all);
  m.impl("var.correction", var_fn<false>);
  m.impl("var.correction_out", var_out<false>);
  m.impl("std.correction", var_fn<true>);
  m.impl("std.correction_out", var_out<true>);
  m.impl("var_mean.correction", var_mean_fn<false>);
  m.impl("std_mean.correction", var_mean_fn<true>);
  m.impl("linalg_vector_norm.out", vector_norm_out);
}

}  // namespace openneuron::bridge
