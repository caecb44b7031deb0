// Native math ops: elementwise, reductions, matrix engine, softmax and losses.
// Each ATen op maps to one compiler op; the tables at the end register one
// line per op (functional, in-place and out= variants come from one line).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/addr_native.h>
#include <torch/library.h>

#include "bridge.h"
#include "engine.h"
#include "output_layout.h"
#include "native_ops.h"
#include "op_checks.h"

namespace openneuron::bridge {
namespace {

using compiler::Op;

// ------------------------------------------------------------ common checks

// An elementwise operand: a device tensor expanded to the result shape, or a scalar.
Operand elementwise_operand(const at::Tensor& t, c10::ScalarType compute, at::IntArrayRef shape) {
  if (is_cpu_scalar(t)) return scalar_operand(t.item(), compute);
  return tensor_operand(to_dtype_on_device(t, compute).expand(shape));
}

// Writes the result of `body(target)` into `out`, through a temporary when the
// dtype differs or out's layout overlaps itself.
template <typename Body>
void write_result(const at::Tensor& out, c10::ScalarType result_dtype, Body&& body) {
  const bool direct = out.scalar_type() == result_dtype &&
                      at::has_internal_overlap(out) != at::MemOverlap::Yes;
  if (direct) {
    body(out);
    return;
  }
  at::Tensor tmp = empty_device(out.sizes(), result_dtype, out.device());
  body(tmp);
  copy_on_device(out, tmp);
}


// ---------------------------------------------------------------- unary

enum class UnaryKind {
  SameType,      // relu, neg, abs: integers stay integers
  FloatResult,   // exp, sqrt, sigmoid: integers promote to the default float
  BoolResult,    // logical_not
};

c10::ScalarType unary_result(UnaryKind kind, c10::ScalarType in) {
  switch (kind) {
    case UnaryKind::FloatResult:
      return c10::isIntegralType(in, true) ? c10::typeMetaToScalarType(c10::get_default_dtype())
                                           : in;
    case UnaryKind::BoolResult: return c10::kBool;
    default: return in;
  }
}

void unary_into(Op op, const at::Tensor& self, const at::Tensor& out, c10::ScalarType compute,
                std::vector<int64_t> attrs = {}) {
  if (out.numel() == 0) return;
  write_result(out, op == Op::LogicalNot ? c10::kBool : compute, [&](const at::Tensor& target) {
    launch(op, {tensor_operand(to_dtype_on_device(self, compute))}, {tensor_operand(target)},
           attrs);
  });
}

c10::ScalarType unary_compute(UnaryKind kind, c10::ScalarType in) {
  return kind == UnaryKind::BoolResult ? in : unary_result(kind, in);
}

// rsqrt in float16/bfloat16 runs PyTorch's CPU kernel (host library), float32 our own.
// Ours rounds 1/sqrt(x) once, as the CPU's vectorised loop does; but the scalar tail of
// that loop (elements past the last full vector: all of a small tensor) rounds sqrt(x) to
// the half type first, so the CPU's result can be an ulp off ours depending on where an
// element sits, which rsqrt's gradient (it cubes the result) amplifies beyond tolerance.
// Running the CPU's own kernel gives its results bit for bit without copying its loop
// structure. pow(x, -0.5) does the same (ops_transformer.cpp).
template <Op kOp>
void decline_half_rsqrt(c10::ScalarType compute) {
  if constexpr (kOp == Op::Rsqrt) decline_half_types(compute, "rsqrt");
}

template <Op kOp, UnaryKind kKind>
at::Tensor unary_fn(const at::Tensor& self) {
  decline_half_rsqrt<kOp>(unary_compute(kKind, self.scalar_type()));
  const auto dtype = unary_result(kKind, self.scalar_type());
  at::Tensor out = empty_elementwise(self.sizes(), dtype, self.device(), {&self});
  unary_into(kOp, self, out, unary_compute(kKind, self.scalar_type()));
  return out;
}

template <Op kOp, UnaryKind kKind>
at::Tensor& unary_inplace(at::Tensor& self) {
  check_cast(unary_result(kKind, self.scalar_type()), self);
  decline_half_rsqrt<kOp>(unary_compute(kKind, self.scalar_type()));
  unary_into(kOp, self, self, unary_compute(kKind, self.scalar_type()));
  return self;
}

template <Op kOp, UnaryKind kKind>
at::Tensor& unary_out(const at::Tensor& self, at::Tensor& out) {
  check_out_device(out, self.device(), op_name(kOp));
  check_cast(unary_result(kKind, self.scalar_type()), out);
  decline_half_rsqrt<kOp>(unary_compute(kKind, self.scalar_type()));
  at::native::resize_output(out, self.sizes());
  unary_into(kOp, self, out, unary_compute(kKind, self.scalar_type()));
  return out;
}

int64_t gelu_attr(c10::string_view approximate) {
  if (approximate == "none") return 0;
  TORCH_CHECK(approximate == "tanh", "approximate argument must be either none or tanh.");
  return 1;
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor out = empty_elementwise(self.sizes(), self.scalar_type(), self.device(), {&self});
  unary_into(Op::Gelu, self, out, self.scalar_type(), {gelu_attr(approximate)});
  return out;
}
at::Tensor& gelu_(at::Tensor& self, c10::string_view approximate) {
  unary_into(Op::Gelu, self, self, self.scalar_type(), {gelu_attr(approximate)});
  return self;
}
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  unary_into(Op::Gelu, self, out, self.scalar_type(), {gelu_attr(approximate)});
  return out;
}

// --------------------------------------------------------------- binary

enum class BinaryKind {
  Arithmetic,  // result = promoted type
  TrueDivide,  // integers promote to the default float
  Comparison,  // result Bool, compared in the promoted type
  Logical,     // result Bool
};

c10::ScalarType binary_compute(BinaryKind kind, const at::Tensor& a, const at::Tensor& b) {
  c10::ScalarType t = at::result_type(a, b);
  if (kind == BinaryKind::TrueDivide && c10::isIntegralType(t, true)) {
    t = c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  return t;
}

c10::ScalarType binary_result(BinaryKind kind, c10::ScalarType compute) {
  return kind == BinaryKind::Comparison || kind == BinaryKind::Logical ? c10::kBool : compute;
}

void binary_into(Op op, BinaryKind kind, const at::Tensor& a, const at::Tensor& b,
                 const std::optional<at::Scalar>& alpha, const at::Tensor& out,
                 c10::ScalarType compute) {
  if (out.numel() == 0) return;
  // The CPU's mul and true div (cpu/BinaryOpsKernel.cpp mul_kernel, div_true_kernel) read a
  // single-element second operand unrounded, as float, when the common dtype is Half/BFloat16:
  // float(a) * b rounded once. A 0-dim device tensor of another dtype (a float32 norm, say)
  // would otherwise be rounded to Half/BFloat16 first. Float32 in, one rounding out: the same.
  if ((op == Op::Mul || op == Op::Div) && !alpha.has_value() &&
      (compute == c10::kHalf || compute == c10::kBFloat16) && b.dim() == 0 && !is_cpu_scalar(b) &&
      b.scalar_type() != compute && !b.is_complex()) {
    at::Tensor wide = empty_device(out.sizes(), c10::kFloat, out.device());
    binary_into(op, kind, a, b, alpha, wide, c10::kFloat);
    copy_on_device(out, wide);
    return;
  }
  const at::IntArrayRef shape = out.sizes();
  Operand oa = elementwise_operand(a, compute, shape);
  Operand ob = elementwise_operand(b, compute, shape);
  write_result(out, binary_result(kind, compute), [&](const at::Tensor& target) {
    if (alpha.has_value()) {
      launch(op, {oa, ob, scalar_operand(*alpha, compute)}, {tensor_operand(target)});
    } else {
      launch(op, {oa, ob}, {tensor_operand(target)});
    }
  });
}

at::DimVector broadcast_shape(const at::Tensor& a, const at::Tensor& b) {
  return at::infer_size_dimvector(a.sizes(), b.sizes());
}

template <Op kOp, BinaryKind kKind>
at::Tensor binary_fn_impl(const at::Tensor& a, const at::Tensor& b,
                          const std::optional<at::Scalar>& alpha) {
  const c10::Device device = common_device(op_name(kOp), {&a, &b});
  const auto compute = binary_compute(kKind, a, b);
  at::Tensor out =
      empty_elementwise(broadcast_shape(a, b), binary_result(kKind, compute), device, {&a, &b});
  binary_into(kOp, kKind, a, b, alpha, out, compute);
  return out;
}

template <Op kOp, BinaryKind kKind>
at::Tensor& binary_inplace_impl(at::Tensor& self, const at::Tensor& other,
                                const std::optional<at::Scalar>& alpha) {
  common_device(op_name(kOp), {&self, &other});
  const auto compute = binary_compute(kKind, self, other);
  check_cast(binary_result(kKind, compute), self);
  TORCH_CHECK(broadcast_shape(self, other) == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", broadcast_shape(self, other));
  binary_into(kOp, kKind, self, other, alpha, self, compute);
  return self;
}

template <Op kOp, BinaryKind kKind>
at::Tensor& binary_out_impl(const at::Tensor& a, const at::Tensor& b,
                            const std::optional<at::Scalar>& alpha, at::Tensor& out) {
  const c10::Device device = common_device(op_name(kOp), {&a, &b});
  check_out_device(out, device, op_name(kOp));
  const auto compute = binary_compute(kKind, a, b);
  check_cast(binary_result(kKind, compute), out);
  at::native::resize_output(out, broadcast_shape(a, b));
  binary_into(kOp, kKind, a, b, alpha, out, compute);
  return out;
}

// A Python-number operand: a wrapped number, so it does not promote 0-dim tensors
// (mul.Scalar(float32 0-dim, 0.01) stays float32, as on the CPU).
at::Tensor wrap(const at::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Signatures with alpha (add, sub).
template <Op kOp>
at::Tensor alpha_tensor(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary_fn_impl<kOp, BinaryKind::Arithmetic>(a, b, alpha);
}
template <Op kOp>
at::Tensor& alpha_tensor_(at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary_inplace_impl<kOp, BinaryKind::Arithmetic>(a, b, alpha);
}
template <Op kOp>
at::Tensor& alpha_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                      at::Tensor& out) {
  return binary_out_impl<kOp, BinaryKind::Arithmetic>(a, b, alpha, out);
}
template <Op kOp>
at::Tensor alpha_scalar(const at::Tensor& a, const at::Scalar& b, const at::Scalar& alpha) {
  return binary_fn_impl<kOp, BinaryKind::Arithmetic>(a, wrap(b), alpha);
}
template <Op kOp>
at::Tensor& alpha_scalar_(at::Tensor& a, const at::Scalar& b, const at::Scalar& alpha) {
  return binary_inplace_impl<kOp, BinaryKind::Arithmetic>(a, wrap(b), alpha);
}

// Signatures without alpha.
template <Op kOp, BinaryKind kKind>
at::Tensor bin_tensor(const at::Tensor& a, const at::Tensor& b) {
  return binary_fn_impl<kOp, kKind>(a, b, std::nullopt);
}
template <Op kOp, BinaryKind kKind>
at::Tensor& bin_tensor_(at::Tensor& a, const at::Tensor& b) {
  return binary_inplace_impl<kOp, kKind>(a, b, std::nullopt);
}
template <Op kOp, BinaryKind kKind>
at::Tensor& bin_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return binary_out_impl<kOp, kKind>(a, b, std::nullopt, out);
}
template <Op kOp, BinaryKind kKind>
at::Tensor bin_scalar(const at::Tensor& a, const at::Scalar& b) {
  return binary_fn_impl<kOp, kKind>(a, wrap(b), std::nullopt);
}
template <Op kOp, BinaryKind kKind>
at::Tensor& bin_scalar_(at::Tensor& a, const at::Scalar& b) {
  return binary_inplace_impl<kOp, kKind>(a, wrap(b), std::nullopt);
}
template <Op kOp, BinaryKind kKind>
at::Tensor& bin_scalar_out(const at::Tensor& a, const at::Scalar& b, at::Tensor& out) {
  return binary_out_impl<kOp, kKind>(a, wrap(b), std::nullopt, out);
}

Op div_op(std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return Op::Div;
  if (*mode == "trunc") return Op::DivTrunc;
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or "
              "'floor' but found '", *mode, "'");
  return Op::FloorDivide;
}

at::Tensor div_mode(const at::Tensor& a, const at::Tensor& b,
                    std::optional<c10::string_view> mode) {
  const c10::Device device = common_device("div", {&a, &b});
  const Op op = div_op(mode);
  const BinaryKind kind = op == Op::Div ? BinaryKind::TrueDivide : BinaryKind::Arithmetic;
  const auto compute = binary_compute(kind, a, b);
  at::Tensor out = empty_elementwise(broadcast_shape(a, b), compute, device, {&a, &b});
  binary_into(op, kind, a, b, std::nullopt, out, compute);
  return out;
}
at::Tensor& div_mode_(at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  const Op op = div_op(mode);
  const BinaryKind kind = op == Op::Div ? BinaryKind::TrueDivide : BinaryKind::Arithmetic;
  common_device("div_", {&a, &b});
  const auto compute = binary_compute(kind, a, b);
  check_cast(compute, a);
  binary_into(op, kind, a, b, std::nullopt, a, compute);
  return a;
}

// -------------------------------------------------- elementwise backward

template <Op kOp>
at::Tensor backward2(const at::Tensor& grad, const at::Tensor& other) {
  const c10::Device device = common_device(op_name(kOp), {&grad, &other});
  const auto compute = at::result_type(grad, other);
  const auto shape = broadcast_shape(grad, other);
  at::Tensor out = empty_elementwise(shape, compute, device, {&grad, &other});
  if (out.numel() == 0) return out;
  launch(kOp, {elementwise_operand(grad, compute, shape), elementwise_operand(other, compute, shape)},
         {tensor_operand(out)});
  return out;
}

at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self,
                              const at::Scalar& threshold) {
  const c10::Device device = common_device("threshold_backward", {&grad, &self});
  const auto compute = at::result_type(grad, self);
  const auto shape = broadcast_shape(grad, self);
  // The CPU iterates (self, grad): self's layout decides.
  at::Tensor out = empty_elementwise(shape, compute, device, {&self, &grad});
  if (out.numel() == 0) return out;
  launch(Op::ThresholdBackward,
         {elementwise_operand(grad, compute, shape), elementwise_operand(self, compute, shape),
          scalar_operand(threshold, compute)},
         {tensor_operand(out)});
  return out;
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self,
                         c10::string_view approximate) {
  const c10::Device device = common_device("gelu_backward", {&grad, &self});
  const auto compute = at::result_type(grad, self);
  const auto shape = broadcast_shape(grad, self);
  at::Tensor out = empty_elementwise(shape, compute, device, {&grad, &self});
  if (out.numel() == 0) return out;
  launch(Op::GeluBackward,
         {elementwise_operand(grad, compute, shape), elementwise_operand(self, compute, shape)},
         {tensor_operand(out)}, {gelu_attr(approximate)});
  return out;
}

// --------------------------------------------------------------- ternary

at::Tensor where_self(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b) {
  const c10::Device device = common_device("where", {&cond, &a, &b});
  const auto compute = at::result_type(a, b);
  const auto shape = at::infer_size_dimvector(cond.sizes(), broadcast_shape(a, b));
  at::Tensor out = empty_elementwise(shape, compute, device, {&cond, &a, &b});
  if (out.numel() == 0) return out;
  launch(Op::Where,
         {elementwise_operand(cond, c10::kBool, shape), elementwise_operand(a, compute, shape),
          elementwise_operand(b, compute, shape)},
         {tensor_operand(out)});
  return out;
}

template <Op kOp>
void addc_into(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
               const at::Scalar& value, const at::Tensor& out) {
  const auto compute = at::native::result_type({self, t1, t2}) ;
  const auto shape = out.sizes();
  if (out.numel() == 0) return;
  Operand o0 = elementwise_operand(self, compute, shape);
  Operand o1 = elementwise_operand(t1, compute, shape);
  Operand o2 = elementwise_operand(t2, compute, shape);
  write_result(out, compute, [&](const at::Tensor& target) {
    launch(kOp, {o0, o1, o2, scalar_operand(value, compute)}, {tensor_operand(target)});
  });
}

template <Op kOp>
at::Tensor addc(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                const at::Scalar& value) {
  const c10::Device device = common_device(op_name(kOp), {&self, &t1, &t2});
  const auto compute = at::native::result_type({self, t1, t2});
  const auto shape = at::infer_size_dimvector(self.sizes(), broadcast_shape(t1, t2));
  at::Tensor out = empty_elementwise(shape, compute, device, {&self, &t1, &t2});
  addc_into<kOp>(self, t1, t2, value, out);
  return out;
}
template <Op kOp>
at::Tensor& addc_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                  const at::Scalar& value) {
  common_device(op_name(kOp), {&self, &t1, &t2});
  addc_into<kOp>(self, t1, t2, value, self);
  return self;
}
template <Op kOp>
at::Tensor& addc_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                     const at::Scalar& value, at::Tensor& out) {
  common_device(op_name(kOp), {&self, &t1, &t2});
  at::native::resize_output(out, at::infer_size_dimvector(self.sizes(), broadcast_shape(t1, t2)));
  addc_into<kOp>(self, t1, t2, value, out);
  return out;
}

void lerp_into(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
               const at::Tensor& out) {
  if (out.numel() == 0) return;
  const auto compute = self.scalar_type();
  const auto shape = out.sizes();
  launch(Op::Lerp,
         {elementwise_operand(self, compute, shape), elementwise_operand(end, compute, shape),
          elementwise_operand(weight, compute, shape)},
         {tensor_operand(out)});
}
at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  common_device("lerp_", {&self, &end});
  lerp_into(self, end, wrap(weight), self);
  return self;
}
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  common_device("lerp_", {&self, &end, &weight});
  lerp_into(self, end, weight, self);
  return self;
}

void clamp_into(const at::Tensor& self, const std::optional<at::Scalar>& lo,
                const std::optional<at::Scalar>& hi, const at::Tensor& out) {
  TORCH_CHECK(lo.has_value() || hi.has_value(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (out.numel() == 0) return;
  const auto compute = out.scalar_type();
  const double inf = std::numeric_limits<double>::infinity();
  auto bound = [&](const std::optional<at::Scalar>& s, double dflt) {
    if (s.has_value()) return scalar_operand(*s, compute);
    if (c10::isIntegralType(compute, true)) {
      return int_operand(dflt < 0 ? std::numeric_limits<int64_t>::min()
                                  : std::numeric_limits<int64_t>::max());
    }
    return float_operand(dflt);
  };
  launch(Op::Clamp, {tensor_operand(to_dtype_on_device(self, compute)), bound(lo, -inf), bound(hi, inf)},
         {tensor_operand(out)});
}
at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& lo,
                 const std::optional<at::Scalar>& hi) {
  at::Tensor out = empty_elementwise(self.sizes(), self.scalar_type(), self.device(), {&self});
  clamp_into(self, lo, hi, out);
  return out;
}
at::Tensor& clamp_(at::Tensor& self, const std::optional<at::Scalar>& lo,
                   const std::optional<at::Scalar>& hi) {
  clamp_into(self, lo, hi, self);
  return self;
}

// ----------------------------------------------------------- reductions

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

void reduce_into(Op op, const at::Tensor& self, const ReducePlan& plan, const at::Tensor& out) {
  // `out` has plan.out_shape; the engine writes the keepdim view of it.
  at::Tensor keep = out.numel() == 0 ? out : out.view(plan.keep_shape);
  if (out.numel() == 0) return;
  if (self.numel() == 0) {
    TORCH_CHECK(op == Op::Sum || op == Op::Mean || op == Op::Prod, op_name(op),
                "(): cannot reduce over an empty dimension (the operation has no identity)");
    fill_scalar_device(keep, op == Op::Sum ? 0.0 : op == Op::Prod ? 1.0
                                                  : std::numeric_limits<double>::quiet_NaN());
    return;
  }
  write_result(out, out.scalar_type(), [&](const at::Tensor& target) {
    launch(op, {tensor_operand(self)}, {tensor_operand(target.view(plan.keep_shape))}, {plan.mask});
  });
}

c10::ScalarType sum_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type();
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::Tensor out = empty_device(plan.out_shape, narrow_dtype(sum_dtype(self, dtype)), self.device());
  reduce_into(Op::Sum, self, plan, out);
  return out;
}
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::native::resize_output(out, plan.out_shape);
  reduce_into(Op::Sum, self, plan, out);
  return out;
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  const auto out_dtype = dtype.value_or(self.scalar_type());
  TORCH_CHECK(c10::isFloatingType(out_dtype) || c10::isComplexType(out_dtype),
              "mean(): could not infer output dtype. Input dtype must be either a floating point "
              "or complex dtype. Got: ", out_dtype);
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::Tensor out = empty_device(plan.out_shape, narrow_dtype(out_dtype), self.device());
  reduce_into(Op::Mean, self, plan, out);
  return out;
}
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::native::resize_output(out, plan.out_shape);
  reduce_into(Op::Mean, self, plan, out);
  return out;
}

template <Op kOp>
at::Tensor amax_amin(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  const ReducePlan plan = plan_reduce(self, dims, keepdim);
  at::Tensor out = empty_device(plan.out_shape, self.scalar_type(), self.device());
  reduce_into(kOp, self, plan, out);
  return out;
}

// ------------------------------------------------------------ matrix engine

void check_matmul_dtypes(const char* name, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
}

at::Tensor neuron_mm(const at::Tensor& a, const at::Tensor& b) {
  const c10::Device device = common_device("mm", {&a, &b});
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0),
              "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_matmul_dtypes("mm", a, b);
  at::Tensor out = empty_device({a.size(0), b.size(1)}, a.scalar_type(), device);
  if (out.numel() == 0) return out;
  if (a.size(1) == 0) return out.zero_();
  launch(Op::Mm, {tensor_operand(a), tensor_operand(b)}, {tensor_operand(out)});
  return out;
}
at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  at::Tensor r = neuron_mm(a, b);
  at::native::resize_output(out, r.sizes());
  copy_on_device(out, r);
  return out;
}

at::Tensor neuron_addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::Device device = common_device("addmm", {&bias, &a, &b});
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: matrices expected, got ", a.dim(), "D, ",
              b.dim(), "D tensors");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0),
              "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_matmul_dtypes("addmm", a, b);
  const at::DimVector shape{a.size(0), b.size(1)};
  at::Tensor out = empty_device(shape, a.scalar_type(), device);
  if (out.numel() == 0) return out;
  launch(Op::Addmm,
         {elementwise_operand(bias, a.scalar_type(), shape), tensor_operand(a), tensor_operand(b),
          float_operand(real_scalar(beta)), float_operand(real_scalar(alpha))},
         {tensor_operand(out)});
  return out;
}
at::Tensor& addmm_out(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = neuron_addmm(bias, a, b, beta, alpha);
  at::native::resize_output(out, r.sizes());
  copy_on_device(out, r);
  return out;
}
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor r = neuron_addmm(self, a, b, beta, alpha);
  copy_on_device(self, r);
  return self;
}

// addr: the CPU kernel (cpu/LinearAlgebraKernel.cpp addr_kernel) converts beta and alpha to
// the tensors' dtype and evaluates beta*self + (alpha*vec1)*vec2 in that dtype, every product
// and the sum rounded to it (self ignored when beta is 0). The composite math_addr rounds
// differently (alpha*(vec1*vec2), beta kept in double): in bfloat16 results differ by many ulps
// where the two terms cancel. Same sequence of device ops here, so same roundings.
at::Tensor neuron_addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                       const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::ScalarType dt = self.scalar_type();
  // Float32/64 go to BLAS ger on the CPU (different order, within tolerance): composite there.
  if (!at::isReducedFloatingType(dt) || vec1.scalar_type() != dt || vec2.scalar_type() != dt)
    return at::native::math_addr(self, vec1, vec2, beta, alpha);
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  const c10::Device device = common_device("addr", {&self, &vec1, &vec2});
  const at::Tensor b = at::scalar_tensor(beta, at::TensorOptions().dtype(dt));  // rounded to dt
  const at::Tensor a = at::scalar_tensor(alpha, at::TensorOptions().dtype(dt));
  const at::Tensor prod = at::mul(at::mul(vec1, a.to(device)).unsqueeze(1), vec2);
  TORCH_CHECK(at::is_expandable_to(self.sizes(), prod.sizes()), "The expanded size of the tensor (",
              self.sizes(), ") must match the existing size ", prod.sizes());
  if (b.item().toComplexDouble() == 0.0) return prod;
  return at::add(at::mul(self, b.to(device)), prod);
}
at::Tensor& addr_out(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = neuron_addr(self, vec1, vec2, beta, alpha);
  TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "result type ", r.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor neuron_bmm(const at::Tensor& a, const at::Tensor& b) {
  const c10::Device device = common_device("bmm", {&a, &b});
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ",
              a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  check_matmul_dtypes("bmm", a, b);
  at::Tensor out = empty_device({a.size(0), a.size(1), b.size(2)}, a.scalar_type(), device);
  if (out.numel() == 0) return out;
  if (a.size(2) == 0) return out.zero_();
  launch(Op::Bmm, {tensor_operand(a), tensor_operand(b)}, {tensor_operand(out)});
  return out;
}
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  at::Tensor r = neuron_bmm(a, b);
  at::native::resize_output(out, r.sizes());
  copy_on_device(out, r);
  return out;
}

// ------------------------------------------------------ softmax and losses

template <Op kOp>
at::Tensor softmax_fwd(const at::Tensor& self, int64_t dim, bool half_to_float) {
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  const auto dtype = half_to_float ? c10::kFloat : self.scalar_type();
  at::Tensor out = empty_device(self.sizes(), dtype, self.device());
  if (out.numel() == 0) return out;
  at::Tensor in = to_dtype_on_device(self, dtype);
  if (self.dim() == 0) {
    // softmax of a scalar is 1 (log_softmax 0).
    return kOp == Op::Softmax ? out.fill_(1) : out.fill_(0);
  }
  launch(kOp, {tensor_operand(in)}, {tensor_operand(out)}, {d});
  return out;
}

template <Op kOp>
at::Tensor softmax_bwd(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                       c10::ScalarType input_dtype) {
  const c10::Device device = common_device(op_name(kOp), {&grad, &output});
  const int64_t d = c10::maybe_wrap_dim(dim, grad.dim());
  at::Tensor out = empty_device(grad.sizes(), grad.scalar_type(), device);
  if (out.numel() == 0) return out;
  if (grad.dim() == 0) return out.fill_(0);
  launch(kOp, {tensor_operand(grad), tensor_operand(to_dtype_on_device(output, grad.scalar_type()))},
         {tensor_operand(out)}, {d});
  if (input_dtype != grad.scalar_type()) return to_dtype_on_device(out, input_dtype);
  return out;
}

Operand optional_tensor(const std::optional<at::Tensor>& t, c10::ScalarType dtype) {
  if (!t.has_value() || !t->defined()) return none_operand();
  return tensor_operand(to_dtype_on_device(*t, dtype).contiguous());
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, int64_t ignore_index) {
  const c10::Device device = common_device("nll_loss_forward", {&self, &target});
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const bool batched = self.dim() == 2;
  TORCH_CHECK(!batched || self.size(0) == target.size(0), "size mismatch (got input: ",
              self.sizes(), ", target: ", target.sizes(), ")");
  const int64_t classes = self.size(-1);
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->numel() == classes, "weight tensor should be defined either for all ",
                classes, " classes or no classes but got weight tensor of shape: ", weight->sizes());
  }
  at::Tensor out = reduction == 0 && batched
                       ? empty_device({self.size(0)}, self.scalar_type(), device)
                       : empty_device({}, self.scalar_type(), device);
  at::Tensor total_weight = empty_device({}, self.scalar_type(), device);
  launch(Op::NllLoss,
         {tensor_operand(self), tensor_operand(to_dtype_on_device(target, c10::kLong)),
          optional_tensor(weight, self.scalar_type())},
         {tensor_operand(out), tensor_operand(total_weight)}, {reduction, ignore_index});
  return {out, total_weight};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  const c10::Device device =
      common_device("nll_loss_backward", {&grad_output, &self, &target, &total_weight});
  at::Tensor grad_input = empty_device(self.sizes(), self.scalar_type(), device);
  if (grad_input.numel() == 0) return grad_input;
  launch(Op::NllLossBackward,
         {tensor_operand(to_dtype_on_device(grad_output, self.scalar_type())),
          tensor_operand(self), tensor_operand(to_dtype_on_device(target, c10::kLong)),
          optional_tensor(weight, self.scalar_type()),
          tensor_operand(to_dtype_on_device(total_weight, self.scalar_type()))},
         {tensor_operand(grad_input)}, {reduction, ignore_index});
  return grad_input;
}

// ------------------------------------------------------------- indexing

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const c10::Device device = common_device("index_select", {&self, &index});
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[d] = index.numel();
  at::Tensor out = empty_device(shape, self.scalar_type(), device);
  if (out.numel() == 0) return out;
  launch(Op::IndexSelect, {tensor_operand(self.dim() == 0 ? self.view({1}) : self),
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

}  // namespace

void fill_scalar_device(const at::Tensor& t, double value) {
  if (t.numel() == 0) return;
  launch(Op::Fill, {scalar_operand(value, t.scalar_type())}, {tensor_operand(t)});
}

// Registration tables: one line per ATen op family.
#define UNARY(name, op, kind)                                                        \
  m.impl(#name, unary_fn<Op::op, UnaryKind::kind>);                                  \
  m.impl(#name "_", unary_inplace<Op::op, UnaryKind::kind>);                         \
  m.impl(#name ".out", unary_out<Op::op, UnaryKind::kind>);

#define BINARY_ALPHA(name, op)                                                        \
  m.impl(#name ".Tensor", alpha_tensor<Op::op>);                                      \
  m.impl(#name "_.Tensor", alpha_tensor_<Op::op>);                                    \
  m.impl(#name ".out", alpha_out<Op::op>);                                            \
  m.impl(#name ".Scalar", alpha_scalar<Op::op>);                                      \
  m.impl(#name "_.Scalar", alpha_scalar_<Op::op>);

#define BINARY(name, op, kind)                                                        \
  m.impl(#name ".Tensor", bin_tensor<Op::op, BinaryKind::kind>);                      \
  m.impl(#name "_.Tensor", bin_tensor_<Op::op, BinaryKind::kind>);                    \
  m.impl(#name ".out", bin_out<Op::op, BinaryKind::kind>);                            \
  m.impl(#name ".Scalar", bin_scalar<Op::op, BinaryKind::kind>);                      \
  m.impl(#name "_.Scalar", bin_scalar_<Op::op, BinaryKind::kind>);

#define COMPARISON(name, op)                                                          \
  m.impl(#name ".Tensor", bin_tensor<Op::op, BinaryKind::Comparison>);                \
  m.impl(#name "_.Tensor", bin_tensor_<Op::op, BinaryKind::Comparison>);              \
  m.impl(#name ".Tensor_out", bin_out<Op::op, BinaryKind::Comparison>);               \
  m.impl(#name ".Scalar", bin_scalar<Op::op, BinaryKind::Comparison>);                \
  m.impl(#name "_.Scalar", bin_scalar_<Op::op, BinaryKind::Comparison>);              \
  m.impl(#name ".Scalar_out", bin_scalar_out<Op::op, BinaryKind::Comparison>);

#define BINARY_PLAIN(name, op, kind)                                                  \
  m.impl(#name, bin_tensor<Op::op, BinaryKind::kind>);                                \
  m.impl(#name ".out", bin_out<Op::op, BinaryKind::kind>);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  UNARY(neg, Neg, SameType)
  UNARY(abs, Abs, SameType)
  UNARY(relu, Relu, SameType)
  UNARY(exp, Exp, FloatResult)
  UNARY(log, Log, FloatResult)
  UNARY(sqrt, Sqrt, FloatResult)
  UNARY(rsqrt, Rsqrt, FloatResult)
  UNARY(reciprocal, Reciprocal, FloatResult)
  UNARY(sin, Sin, FloatResult)
  UNARY(cos, Cos, FloatResult)
  UNARY(tanh, Tanh, FloatResult)
  UNARY(sigmoid, Sigmoid, FloatResult)
  UNARY(silu, Silu, SameType)
  UNARY(erf, Erf, FloatResult)
  UNARY(floor, Floor, SameType)
  UNARY(ceil, Ceil, SameType)
  UNARY(round, Round, SameType)
  UNARY(sign, Sign, SameType)
  UNARY(logical_not, LogicalNot, BoolResult)
  m.impl("gelu", gelu);
  m.impl("gelu_", gelu_);
  m.impl("gelu.out", gelu_out);

  BINARY_ALPHA(add, Add)
  BINARY_ALPHA(sub, Sub)
  BINARY(mul, Mul, Arithmetic)
  BINARY(div, Div, TrueDivide)
  m.impl("div.Tensor_mode", div_mode);
  m.impl("div_.Tensor_mode", div_mode_);
  COMPARISON(eq, Eq)
  COMPARISON(ne, Ne)
  COMPARISON(lt, Lt)
  COMPARISON(le, Le)
  COMPARISON(gt, Gt)
  COMPARISON(ge, Ge)
  BINARY_PLAIN(maximum, Maximum, Arithmetic)
  BINARY_PLAIN(minimum, Minimum, Arithmetic)
  BINARY_PLAIN(logical_and, LogicalAnd, Logical)
  BINARY_PLAIN(logical_or, LogicalOr, Logical)

  m.impl("threshold_backward", threshold_backward);
  m.impl("gelu_backward", gelu_backward);
  m.impl("sigmoid_backward", backward2<Op::SigmoidBackward>);
  m.impl("tanh_backward", backward2<Op::TanhBackward>);
  m.impl("silu_backward", backward2<Op::SiluBackward>);

  m.impl("where.self", where_self);
  m.impl("addcmul", addc<Op::Addcmul>);
  m.impl("addcmul_", addc_<Op::Addcmul>);
  m.impl("addcmul.out", addc_out<Op::Addcmul>);
  m.impl("addcdiv", addc<Op::Addcdiv>);
  m.impl("addcdiv_", addc_<Op::Addcdiv>);
  m.impl("addcdiv.out", addc_out<Op::Addcdiv>);
  m.impl("lerp_.Scalar", lerp_scalar_);
  m.impl("lerp_.Tensor", lerp_tensor_);
  m.impl("clamp", clamp);
  m.impl("clamp_", clamp_);

  m.impl("sum.dim_IntList", sum_dim);
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.dim", mean_dim);
  m.impl("mean.out", mean_out);
  m.impl("amax", amax_amin<Op::Amax>);
  m.impl("amin", amax_amin<Op::Amin>);

  m.impl("mm", neuron_mm);
  m.impl("mm.out", mm_out);
  m.impl("addmm", neuron_addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("addmm_", addmm_);
  m.impl("addr", neuron_addr);
  m.impl("addr.out", addr_out);
  m.impl("bmm", neuron_bmm);
  m.impl("bmm.out", bmm_out);

  m.impl("_softmax", softmax_fwd<Op::Softmax>);
  m.impl("_log_softmax", softmax_fwd<Op::LogSoftmax>);
  m.impl("_softmax_backward_data", softmax_bwd<Op::SoftmaxBackward>);
  m.impl("_log_softmax_backward_data", softmax_bwd<Op::LogSoftmaxBackward>);
  m.impl("nll_loss_forward", nll_loss_forward);
  m.impl("nll_loss_backward", nll_loss_backward);

  m.impl("index_select", index_select);
  m.impl("embedding_dense_backward", embedding_dense_backward);
}

}  // namespace openneuron::bridge
