// Elementwise ops: unary math, binary arithmetic with PyTorch's type promotion,
// comparisons, logical and bitwise ops, pow, remainder, atan2, floor_divide,
// isnan/isposinf/isneginf and the elementwise backward ops (threshold, gelu, sigmoid,
// tanh, silu); the ternary ops are in ops_elementwise_ternary.cpp. Each ATen op
// launches one compiler op of the elementwise family (lower_elementwise.cpp).
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TypeProperties.h>

#include "elementwise_checks.h"
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ---------------------------------------------------------------- unary

enum class UnaryKind {
  SameType,     // relu, neg, abs: integers stay integers
  FloatResult,  // exp, sqrt, sigmoid: integers promote to the default float
  BoolResult,   // logical_not
};

c10::ScalarType unary_result(UnaryKind kind, c10::ScalarType in) {
  switch (kind) {
    case UnaryKind::FloatResult:
      return c10::isIntegralType(in, true) ? c10::typeMetaToScalarType(c10::get_default_dtype())
                                           : in;
    case UnaryKind::BoolResult:
      return c10::kBool;
    default:
      return in;
  }
}

void unary_into(Op op, const at::Tensor& self, const at::Tensor& out, c10::ScalarType compute,
                std::vector<int64_t> attrs = {}) {
  // The CPU refuses a bool neg or relu before it looks at the size.
  const bool is_bool = self.scalar_type() == c10::kBool;
  TORCH_CHECK(op != Op::Neg || !is_bool,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
              "invert a mask, use the `~` or `logical_not()` operator instead.");
  TORCH_CHECK(op != Op::Relu || !is_bool, "Boolean inputs not supported for relu");
  if (out.numel() == 0) return;
  check_writable(out, {&self});
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
// structure. pow(x, -0.5) does the same (below).
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
  // The CPU's same-type unary ops (TensorIterator::unary_op) take no out of another dtype.
  TORCH_CHECK(kKind != UnaryKind::SameType || out.scalar_type() == self.scalar_type(),
              "Found dtype ", out.scalar_type(), " but expected ", self.scalar_type());
  decline_half_rsqrt<kOp>(unary_compute(kKind, self.scalar_type()));
  resize_out_checked(out, self.sizes(), {&self});
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
  resize_out_checked(out, self.sizes(), {&self});
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
  if (alpha.has_value()) at::native::alpha_check(compute, *alpha);
  if (op == Op::Sub) at::native::sub_check(a, b);
  if (out.numel() == 0) return;
  check_writable(out, {&a, &b});
  // The CPU's mul and true div (cpu/BinaryOpsKernel.cpp mul_kernel, div_true_kernel) read a
  // single-element second operand unrounded, as float, when the common dtype is Half/BFloat16:
  // float(a) * b rounded once. A 0-dim device tensor of another dtype (a float32 norm, say)
  // would otherwise be rounded to Half/BFloat16 first. Float32 in, one rounding out: the same.
  if ((op == Op::Mul || op == Op::Div) && !alpha.has_value() &&
      (compute == c10::kHalf || compute == c10::kBFloat16) && b.dim() == 0 && !is_cpu_scalar(b) &&
      b.scalar_type() != compute && !b.is_complex()) {
    at::Tensor wide = empty_device(out.sizes(), c10::kFloat, out.device());
    binary_into(op, kind, a, b, alpha, wide, c10::kFloat);
    // Rounded to the result type even when out= is wider, as the CPU's cast of it is.
    copy_on_device(out, out.scalar_type() == compute ? wide : to_dtype_on_device(wide, compute));
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
  check_output_shape(self, broadcast_shape(self, other));
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
  const auto shape = broadcast_shape(a, b);
  // An out that is also an input is read as well as written: it is not resized
  // (TensorIterator's rule, and its message).
  if (out.is_same(a) || out.is_same(b)) check_output_shape(out, shape);
  resize_out_checked(out, shape, {&a, &b});
  binary_into(kOp, kKind, a, b, alpha, out, compute);
  return out;
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
  return binary_fn_impl<kOp, BinaryKind::Arithmetic>(a, wrapped_scalar(b), alpha);
}
template <Op kOp>
at::Tensor& alpha_scalar_(at::Tensor& a, const at::Scalar& b, const at::Scalar& alpha) {
  return binary_inplace_impl<kOp, BinaryKind::Arithmetic>(a, wrapped_scalar(b), alpha);
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
  return binary_fn_impl<kOp, kKind>(a, wrapped_scalar(b), std::nullopt);
}
template <Op kOp, BinaryKind kKind>
at::Tensor& bin_scalar_(at::Tensor& a, const at::Scalar& b) {
  return binary_inplace_impl<kOp, kKind>(a, wrapped_scalar(b), std::nullopt);
}
template <Op kOp, BinaryKind kKind>
at::Tensor& bin_scalar_out(const at::Tensor& a, const at::Scalar& b, at::Tensor& out) {
  return binary_out_impl<kOp, kKind>(a, wrapped_scalar(b), std::nullopt, out);
}

Op div_op(std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return Op::Div;
  if (*mode == "trunc") return Op::DivTrunc;
  TORCH_CHECK(*mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or "
              "'floor' but found '",
              *mode, "'");
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
  launch(kOp,
         {elementwise_operand(grad, compute, shape), elementwise_operand(other, compute, shape)},
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

// out= of a binary op computed in `compute`, once the op's own checks have passed:
// out must be castable from `compute` and is resized to the broadcast shape.
Tensor& promoted_binary_out(Op op, const Tensor& a, const Tensor& b, c10::ScalarType compute,
                            Tensor& out) {
  check_cast(compute, out);
  const auto shape = broadcast_shape(a, b);
  resize_out_checked(out, shape, {&a, &b});
  if (out.numel() == 0) return out;
  // Remainder and atan2 read a CPU scalar in the common dtype; floor division and pow
  // (their CPU kernels' special cases) its original value.
  const bool in_dtype = op == Op::Remainder || op == Op::Atan2;
  const Operand oa = in_dtype ? elementwise_operand_in_dtype(a, compute, shape)
                              : elementwise_operand(a, compute, shape);
  const Operand ob = in_dtype ? elementwise_operand_in_dtype(b, compute, shape)
                              : elementwise_operand(b, compute, shape);
  write_result(
      out, compute,
      [&](const Tensor& t) {
        launch(op, {oa, ob}, {tensor_operand(t)});
      },
      Target::Contiguous);
  return out;
}

// isposinf / isneginf / isnan: comparisons against a scalar (integers: all false).
template <int kWhich>  // 0 isnan, 1 isposinf, -1 isneginf
void isx_into(const Tensor& self, const Tensor& out) {
  if (out.numel() == 0) return;
  if (!at::isFloatingType(self.scalar_type())) {
    fill_scalar_device(out, 0);
    return;
  }
  write_result(
      out, c10::kBool,
      [&](const Tensor& t) {
        if (kWhich == 0) {
          launch(Op::Ne, {tensor_operand(self), tensor_operand(self)}, {tensor_operand(t)});
        } else {
          const double inf = std::numeric_limits<double>::infinity();
          launch(Op::Eq, {tensor_operand(self), float_operand(kWhich > 0 ? inf : -inf)},
                 {tensor_operand(t)});
        }
      },
      Target::Contiguous);
}
template <int kWhich>
Tensor& isx_out(const Tensor& self, Tensor& out) {
  const char* name = kWhich == 0 ? "isnan" : kWhich > 0 ? "isposinf" : "isneginf";
  TORCH_CHECK(kWhich == 0 || !self.is_complex(), name, " does not support complex inputs.");
  if (self.is_complex()) {  // isnan: either part is NaN
    check_out_device(out, self.device(), name);
    at::native::resize_output(out, self.sizes());
    out.copy_(at::isnan(at::view_as_real(self)).any(-1));
    return out;
  }
  TORCH_CHECK(out.scalar_type() == c10::kBool, name, " does not support non-boolean outputs.");
  check_out_device(out, self.device(), name);
  // isnan.out is generated (a result copied into out): the CPU checks no overlap there.
  if (kWhich == 0)
    at::native::resize_output(out, self.sizes());
  else
    resize_out_checked(out, self.sizes(), {&self});
  isx_into<kWhich>(self, out);
  return out;
}
template <int kWhich>
Tensor isx(const Tensor& self) {
  Tensor out = empty_elementwise(self.sizes(), c10::kBool, self.device(), {&self});
  return isx_out<kWhich>(self, out);
}

template <Op kOp>
Tensor& bitwise_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* name = kOp == Op::BitwiseAnd  ? "bitwise_and_cpu"
                     : kOp == Op::BitwiseOr ? "bitwise_or_cpu"
                                            : "bitwise_xor_cpu";
  const c10::Device device = common_device(name, {&a, &b});
  check_out_device(out, device, name);
  const auto compute = at::result_type(a, b);
  TORCH_CHECK(c10::isIntegralType(compute, true), "\"", name, "\" not implemented for '",
              c10::toString(compute), "'");
  return promoted_binary_out(kOp, a, b, compute, out);
}

Tensor& bitwise_not_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(c10::isIntegralType(self.scalar_type(), true),
              "\"bitwise_not_cpu\" not implemented for '", c10::toString(self.scalar_type()), "'");
  check_out_device(out, self.device(), "bitwise_not");
  check_cast(self.scalar_type(), out);
  resize_out_checked(out, self.sizes(), {&self});
  if (out.numel() == 0) return out;
  write_result(
      out, self.scalar_type(),
      [&](const Tensor& t) {
        if (self.scalar_type() == c10::kBool) {
          launch(Op::LogicalNot, {tensor_operand(self)}, {tensor_operand(t)});
        } else {
          launch(Op::BitwiseXor, {tensor_operand(self), int_operand(-1)}, {tensor_operand(t)});
        }
      },
      Target::Contiguous);
  return out;
}

// complex32 (ComplexHalf) pow: the CPU's kernel has none (CUDA's has); it is computed in
// complex64, through the complex path below, and rounded to complex32 once.
Tensor& pow_complex_half_out(const Tensor& result, Tensor& out) {
  check_cast(c10::kComplexHalf, out);
  at::native::resize_output(out, result.sizes());
  if (out.numel() > 0) copy_on_device(out, result);
  return out;
}

Tensor& pow_ts_out(const Tensor& self, const at::Scalar& exp, Tensor& out) {
  check_out_device(out, self.device(), "pow");
  const auto compute = at::result_type(self, exp);
  if (compute == c10::kComplexHalf)
    return pow_complex_half_out(at::pow(self.to(c10::kComplexFloat), exp), out);
  if (c10::isComplexType(compute) || exp.isComplex()) {
    route_to_cpu("aten::pow", "Tensor_Scalar_out", self, exp, out);
    return out;
  }
  TORCH_CHECK(
      !(c10::isIntegralType(self.scalar_type(), true) && exp.isIntegral(true) && exp.toLong() < 0),
      "Integers to negative integer powers are not allowed.");
  check_cast(compute, out);
  const double e = exp.toDouble();
  // In float16/bfloat16, x ** -0.5 is the CPU's rsqrt (or its half-type pow), whose
  // results depend on the CPU loop's structure: its own kernel runs (host library), as
  // for rsqrt (above).
  if (e == -0.5) decline_half_types(compute, "pow(x, -0.5)");
  resize_out_checked(out, self.sizes(), {&self});
  if (out.numel() == 0) return out;
  Tensor x = to_dtype_on_device(self, compute);
  // The CPU's pow by a scalar is its sqrt or rsqrt for 0.5 and -0.5 (not for float16),
  // which differ from pow for -inf and -0.0. The Pow engine takes its shortcuts for 2, 3,
  // -1 and -2 itself.
  const bool root = compute != c10::kHalf && (e == 0.5 || e == -0.5);
  write_result(
      out, compute,
      [&](const Tensor& t) {
        if (e == 1.0) {
          copy_on_device(t, x);
        } else if (root) {
          launch(e > 0 ? Op::Sqrt : Op::Rsqrt, {tensor_operand(x)}, {tensor_operand(t)});
        } else {
          launch(Op::Pow, {tensor_operand(x), scalar_operand(exp, compute)}, {tensor_operand(t)});
        }
      },
      Target::Contiguous);
  return out;
}

Tensor& pow_tt_out(const Tensor& self, const Tensor& exponent, Tensor& out) {
  const c10::Device device = common_device("pow", {&self, &exponent});
  check_out_device(out, device, "pow");
  const auto compute = at::result_type(self, exponent);
  if (compute == c10::kComplexHalf) {
    return pow_complex_half_out(
        at::pow(self.to(c10::kComplexFloat), exponent.to(c10::kComplexFloat)), out);
  }
  if (c10::isComplexType(compute)) {
    route_to_cpu("aten::pow", "Tensor_Tensor_out", self, exponent, out);
    return out;
  }
  return promoted_binary_out(Op::Pow, self, exponent, compute, out);
}

Tensor& pow_st_out(const at::Scalar& self, const Tensor& exponent, Tensor& out) {
  check_out_device(out, exponent.device(), "pow");
  const auto compute = at::result_type(self, exponent);
  if (compute == c10::kComplexHalf)
    return pow_complex_half_out(at::pow(self, exponent.to(c10::kComplexFloat)), out);
  if (c10::isComplexType(compute) || self.isComplex()) {
    route_to_cpu("aten::pow", "Scalar_out", self, exponent, out);
    return out;
  }
  check_cast(compute, out);
  // The CPU's pow(number, tensor) does not check out's overlap with the exponent.
  at::native::resize_output(out, exponent.sizes());
  if (out.numel() == 0) return out;
  Tensor x = to_dtype_on_device(exponent, compute);
  write_result(
      out, compute,
      [&](const Tensor& t) {
        launch(Op::Pow, {scalar_operand(self, compute), tensor_operand(x)}, {tensor_operand(t)});
      },
      Target::Contiguous);
  return out;
}

Tensor& floor_divide_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const c10::Device device = common_device("floor_divide", {&a, &b});
  check_out_device(out, device, "floor_divide");
  const auto compute = at::result_type(a, b);
  TORCH_CHECK(compute != c10::kBool, "\"div_floor_cpu\" not implemented for 'Bool'");
  return promoted_binary_out(Op::FloorDivide, a, b, compute, out);
}
// remainder (Python's modulo), atan2: arithmetic binary ops with promotion.
template <Op kOp>
Tensor& binary_promote_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* name = kOp == Op::Remainder ? "remainder" : "atan2";
  const c10::Device device = common_device(name, {&a, &b});
  check_out_device(out, device, name);
  auto compute = at::result_type(a, b);
  if (kOp == Op::Atan2 && c10::isIntegralType(compute, true))
    compute = c10::typeMetaToScalarType(c10::get_default_dtype());
  TORCH_CHECK(compute != c10::kBool || kOp != Op::Remainder,
              "\"remainder_cpu\" not implemented for 'Bool'");
  return promoted_binary_out(kOp, a, b, compute, out);
}
Tensor& remainder_scalar_tensor_out(const at::Scalar& a, const Tensor& b, Tensor& out) {
  return binary_promote_out<Op::Remainder>(wrapped_scalar(a), b, out);
}

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  const c10::Device device = common_device("floor_divide", {&a, &b});
  Tensor out = empty_elementwise(at::infer_size_dimvector(a.sizes(), b.sizes()),
                                 at::result_type(a, b), device, {&a, &b});
  return bridge::floor_divide_out(a, b, out);
}
Tensor& floor_divide_(Tensor& a, const Tensor& b) { return bridge::floor_divide_out(a, b, a); }

}  // namespace

// Registration: one line per ATen op (functional, in-place and out= variants).
#define UNARY(name, op, kind)                                \
  m.impl(#name, unary_fn<Op::op, UnaryKind::kind>);          \
  m.impl(#name "_", unary_inplace<Op::op, UnaryKind::kind>); \
  m.impl(#name ".out", unary_out<Op::op, UnaryKind::kind>);

#define BINARY_ALPHA(name, op)                     \
  m.impl(#name ".Tensor", alpha_tensor<Op::op>);   \
  m.impl(#name "_.Tensor", alpha_tensor_<Op::op>); \
  m.impl(#name ".out", alpha_out<Op::op>);         \
  m.impl(#name ".Scalar", alpha_scalar<Op::op>);   \
  m.impl(#name "_.Scalar", alpha_scalar_<Op::op>);

#define BINARY(name, op, kind)                                     \
  m.impl(#name ".Tensor", bin_tensor<Op::op, BinaryKind::kind>);   \
  m.impl(#name "_.Tensor", bin_tensor_<Op::op, BinaryKind::kind>); \
  m.impl(#name ".out", bin_out<Op::op, BinaryKind::kind>);         \
  m.impl(#name ".Scalar", bin_scalar<Op::op, BinaryKind::kind>);   \
  m.impl(#name "_.Scalar", bin_scalar_<Op::op, BinaryKind::kind>);

// conj_physical_'s composite calls a CPU DispatchStub directly. Conjugating physical values
// negates their imaginary parts, whatever lazy bits the tensor carries.
at::Tensor& conj_physical_(at::Tensor& self) {
  if (!self.is_complex() || self.numel() == 0) return self;
  at::view_as_real(self.is_conj() ? self.conj() : self).select(-1, 1).neg_();
  return self;
}

#define COMPARISON(name, op)                                             \
  m.impl(#name ".Tensor", bin_tensor<Op::op, BinaryKind::Comparison>);   \
  m.impl(#name "_.Tensor", bin_tensor_<Op::op, BinaryKind::Comparison>); \
  m.impl(#name ".Tensor_out", bin_out<Op::op, BinaryKind::Comparison>);  \
  m.impl(#name ".Scalar", bin_scalar<Op::op, BinaryKind::Comparison>);   \
  m.impl(#name "_.Scalar", bin_scalar_<Op::op, BinaryKind::Comparison>); \
  m.impl(#name ".Scalar_out", bin_scalar_out<Op::op, BinaryKind::Comparison>);

#define BINARY_PLAIN(name, op, kind)                   \
  m.impl(#name, bin_tensor<Op::op, BinaryKind::kind>); \
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
  m.impl("conj_physical_", conj_physical_);
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

  m.impl("isnan", isx<0>);
  m.impl("isposinf.out", isx_out<1>);
  m.impl("isneginf.out", isx_out<-1>);
  m.impl("bitwise_and.Tensor_out", bitwise_out<Op::BitwiseAnd>);
  m.impl("bitwise_or.Tensor_out", bitwise_out<Op::BitwiseOr>);
  m.impl("bitwise_xor.Tensor_out", bitwise_out<Op::BitwiseXor>);
  m.impl("bitwise_not.out", bitwise_not_out);

  m.impl("pow.Tensor_Scalar_out", pow_ts_out);
  m.impl("pow.Tensor_Tensor_out", pow_tt_out);
  m.impl("pow.Scalar_out", pow_st_out);
  m.impl("remainder.Tensor_out", binary_promote_out<Op::Remainder>);
  m.impl("remainder.Scalar_Tensor_out", remainder_scalar_tensor_out);
  m.impl("atan2.out", binary_promote_out<Op::Atan2>);
  m.impl("floor_divide", floor_divide);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("floor_divide_.Tensor", floor_divide_);
}

}  // namespace openneuron::bridge
