// Native activations (softplus, mish, hardswish, hardsigmoid, elu and the ops
// PyTorch routes through it, leaky_relu, hardtanh and relu6, log_sigmoid),
// their backward ops, and unary math (exp2 ... atanh, trunc, frac, isinf,
// isfinite, fmod). Each ATen op launches one compiler op of the activation
// family (lower_activation.cpp); dtype rules and error messages are PyTorch's.
#include <vector>

#include "elementwise_checks.h"
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// Declines (host library kernel) a dtype that is not floating, with the CPU kernel's name.
void decline_non_float(const at::Tensor& self, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", kernel,
                              "\" not implemented for '", c10::toString(self.scalar_type()), "'");
}

// out = op(in...) with a result of dtype `result`; `in` holds the tensor and
// scalar operands in the compiler op's order.
void run(Op op, const std::vector<Operand>& in, const Tensor& out, c10::ScalarType result,
         std::vector<int64_t> attrs = {}) {
  write_result(out, result, [&](const Tensor& t) {
    const Operand o = tensor_operand(t);
    launch(op, in, std::span(&o, 1), attrs);
  });
}

// ------------------------------------------------------------ forward activations

// Activation forward: out has self's dtype; coefficients are Python scalars.
// `kernel` is the CPU kernel's name, for PyTorch's own "not implemented" message.
struct Act {
  Op op;
  const char* kernel;
  bool integers;  // hardtanh also takes integer (not Bool) tensors
};

void act_check(const Act& a, const Tensor& self) {
  if (a.integers) {
    TORCH_CHECK(self.scalar_type() != c10::kBool, "Bool inputs not supported for hardtanh");
    TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", a.kernel, "\" not implemented for '",
                                c10::toString(self.scalar_type()), "'");
  } else {
    decline_non_float(self, a.kernel);
  }
}

void act_into(const Act& a, const Tensor& self, std::initializer_list<c10::Scalar> coefs,
              const Tensor& out) {
  const auto dt = self.scalar_type();
  std::vector<Operand> in{tensor_operand(self)};
  for (const c10::Scalar& c : coefs) in.push_back(scalar_operand(c, dt));
  run(a.op, in, out, dt);
}

Tensor act_fn(const Act& a, const Tensor& self, std::initializer_list<c10::Scalar> coefs) {
  act_check(a, self);
  Tensor out = empty_elementwise(self.sizes(), self.scalar_type(), self.device(), {&self});
  act_into(a, self, coefs, out);
  return out;
}
Tensor& act_inplace(const Act& a, Tensor& self, std::initializer_list<c10::Scalar> coefs) {
  act_check(a, self);
  act_into(a, self, coefs, self);
  return self;
}
Tensor& act_out(const Act& a, const Tensor& self, std::initializer_list<c10::Scalar> coefs,
                Tensor& out) {
  act_check(a, self);
  check_out_device(out, self.device(), a.kernel);
  check_cast(self.scalar_type(), out);
  resize_out_checked(out, self.sizes(), {&self});
  act_into(a, self, coefs, out);
  return out;
}

constexpr Act kSoftplus{Op::Softplus, "softplus_cpu", false};
constexpr Act kMish{Op::Mish, "mish_cpu", false};
constexpr Act kHardswish{Op::Hardswish, "hardswish_cpu", false};
constexpr Act kHardsigmoid{Op::Hardsigmoid, "hardsigmoid_cpu", false};
constexpr Act kLogSigmoid{Op::LogSigmoid, "log_sigmoid_cpu", false};
constexpr Act kElu{Op::Elu, "elu_cpu", false};
constexpr Act kLeakyRelu{Op::LeakyRelu, "leaky_relu_cpu", false};
constexpr Act kHardtanh{Op::Hardtanh, "hardtanh_cpu", true};

// Activations without coefficients: mish, hardswish, hardsigmoid.
template <const Act& A>
Tensor plain_fn(const Tensor& self) {
  return act_fn(A, self, {});
}
template <const Act& A>
Tensor& plain_(Tensor& self) {
  return act_inplace(A, self, {});
}
template <const Act& A>
Tensor& plain_out(const Tensor& self, Tensor& out) {
  return act_out(A, self, {}, out);
}

Tensor softplus(const Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold) {
  return act_fn(kSoftplus, self, {beta, threshold});
}
Tensor& softplus_out(const Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold,
                     Tensor& out) {
  return act_out(kSoftplus, self, {beta, threshold}, out);
}

Tensor elu(const Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
           const c10::Scalar& input_scale) {
  return act_fn(kElu, self, {alpha, scale, input_scale});
}
Tensor& elu_(Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
             const c10::Scalar& input_scale) {
  return act_inplace(kElu, self, {alpha, scale, input_scale});
}
Tensor& elu_out(const Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                const c10::Scalar& input_scale, Tensor& out) {
  return act_out(kElu, self, {alpha, scale, input_scale}, out);
}

Tensor leaky_relu(const Tensor& self, const c10::Scalar& slope) {
  return act_fn(kLeakyRelu, self, {slope});
}
Tensor& leaky_relu_(Tensor& self, const c10::Scalar& slope) {
  return act_inplace(kLeakyRelu, self, {slope});
}
Tensor& leaky_relu_out(const Tensor& self, const c10::Scalar& slope, Tensor& out) {
  return act_out(kLeakyRelu, self, {slope}, out);
}

Tensor hardtanh(const Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  return act_fn(kHardtanh, self, {lo, hi});
}
Tensor& hardtanh_(Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  return act_inplace(kHardtanh, self, {lo, hi});
}
Tensor& hardtanh_out(const Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi,
                     Tensor& out) {
  return act_out(kHardtanh, self, {lo, hi}, out);
}

// The buffer is left empty, as on CUDA: log_sigmoid_backward recomputes
// exp(-|x|) instead of reading it, which saves a tensor per call.
std::tuple<Tensor, Tensor> log_sigmoid_forward(const Tensor& self) {
  Tensor out = act_fn(kLogSigmoid, self, {});
  return {out, empty_device({0}, self.scalar_type(), self.device())};
}
std::tuple<Tensor&, Tensor&> log_sigmoid_forward_out(const Tensor& self, Tensor& out,
                                                     Tensor& buffer) {
  // The CPU's resizes out first (resize_as_), without TensorIterator's overlap check.
  at::native::resize_output(out, self.sizes());
  act_out(kLogSigmoid, self, {}, out);
  return {out, buffer};
}

// ------------------------------------------------------------ backward

// grad_input = op(grad, self, coefs...) in the promoted dtype of grad and self.
Tensor& bwd_into(Op op, const char* name, const Tensor& grad, const Tensor& self,
                 std::initializer_list<c10::Scalar> coefs, Tensor& grad_input,
                 std::vector<int64_t> attrs = {}) {
  const c10::Device device = common_device(name, {&grad, &self});
  const auto compute = at::result_type(grad, self);
  decline_non_float(self, name);
  const auto shape = at::infer_size_dimvector(grad.sizes(), self.sizes());
  if (grad_input.defined()) {
    check_out_device(grad_input, device, name);
    check_cast(compute, grad_input);
    resize_out_checked(grad_input, shape, {&grad, &self});
  } else {
    // The CPU's leaky_relu_backward iterates (self, grad); the others (grad, self).
    grad_input = op == Op::LeakyReluBackward
                     ? empty_elementwise(shape, compute, device, {&self, &grad})
                     : empty_elementwise(shape, compute, device, {&grad, &self});
  }
  if (grad_input.numel() == 0) return grad_input;
  std::vector<Operand> in{elementwise_operand(grad, compute, shape),
                          elementwise_operand(self, compute, shape)};
  for (const c10::Scalar& c : coefs) in.push_back(scalar_operand(c, compute));
  run(op, in, grad_input, compute, std::move(attrs));
  return grad_input;
}

template <Op kOp>
Tensor bwd2(const Tensor& grad, const Tensor& self) {
  Tensor gi;
  return bwd_into(kOp, op_name(kOp), grad, self, {}, gi);
}
template <Op kOp>
Tensor& bwd2_out(const Tensor& grad, const Tensor& self, Tensor& grad_input) {
  return bwd_into(kOp, op_name(kOp), grad, self, {}, grad_input);
}

Tensor softplus_backward(const Tensor& grad, const Tensor& self, const c10::Scalar& beta,
                         const c10::Scalar& threshold) {
  Tensor gi;
  return bwd_into(Op::SoftplusBackward, "softplus_backward", grad, self, {beta, threshold}, gi);
}
Tensor& softplus_backward_out(const Tensor& grad, const Tensor& self, const c10::Scalar& beta,
                              const c10::Scalar& threshold, Tensor& gi) {
  return bwd_into(Op::SoftplusBackward, "softplus_backward", grad, self, {beta, threshold}, gi);
}

Tensor& elu_backward_out(const Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                         const c10::Scalar& input_scale, bool is_result,
                         const Tensor& self_or_result, Tensor& gi) {
  TORCH_CHECK(!is_result || alpha.to<double>() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  return bwd_into(Op::EluBackward, "elu_backward", grad, self_or_result,
                  {alpha, scale, input_scale}, gi, {is_result ? 1 : 0});
}
Tensor elu_backward(const Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                    const c10::Scalar& input_scale, bool is_result, const Tensor& self_or_result) {
  Tensor gi;
  return elu_backward_out(grad, alpha, scale, input_scale, is_result, self_or_result, gi);
}

// With a non-negative slope the sign of the result is the sign of self, so
// the same formula serves self_is_result.
Tensor& leaky_relu_backward_out(const Tensor& grad, const Tensor& self, const c10::Scalar& slope,
                                bool self_is_result, Tensor& gi) {
  TORCH_CHECK(!self_is_result || slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which "
              "is not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place "
              "leakRelu backward calculation with negative slope");
  return bwd_into(Op::LeakyReluBackward, "leaky_relu_backward", grad, self, {slope}, gi);
}
Tensor leaky_relu_backward(const Tensor& grad, const Tensor& self, const c10::Scalar& slope,
                           bool self_is_result) {
  Tensor gi;
  return leaky_relu_backward_out(grad, self, slope, self_is_result, gi);
}

Tensor& hardtanh_backward_out(const Tensor& grad, const Tensor& self, const c10::Scalar& lo,
                              const c10::Scalar& hi, Tensor& gi) {
  return bwd_into(Op::HardtanhBackward, "hardtanh_backward", grad, self, {lo, hi}, gi);
}
Tensor hardtanh_backward(const Tensor& grad, const Tensor& self, const c10::Scalar& lo,
                         const c10::Scalar& hi) {
  Tensor gi;
  return hardtanh_backward_out(grad, self, lo, hi, gi);
}

Tensor& log_sigmoid_backward_out(const Tensor& grad, const Tensor& self, const Tensor& buffer,
                                 Tensor& gi) {
  return bwd_into(Op::LogSigmoidBackward, "log_sigmoid_backward", grad, self, {}, gi);
}
Tensor log_sigmoid_backward(const Tensor& grad, const Tensor& self, const Tensor& buffer) {
  Tensor gi;
  return log_sigmoid_backward_out(grad, self, buffer, gi);
}

// ------------------------------------------------------------ unary math

enum class Kind {
  FloatResult,  // integers and Bool promote to the default float dtype
  SameType,     // trunc: integers are their own result; Bool rejected
  FloatOnly,    // frac
};

c10::ScalarType math_result(Kind kind, c10::ScalarType in) {
  if (kind == Kind::FloatResult && c10::isIntegralType(in, /*includeBool=*/true))
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  return in;
}

void math_check(Kind kind, const char* kernel, const Tensor& self) {
  const auto t = self.scalar_type();
  const bool ok = kind == Kind::FloatResult ? !self.is_complex()
                  : kind == Kind::SameType  ? t != c10::kBool && !self.is_complex()
                                            : at::isFloatingType(t);
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", kernel, "\" not implemented for '", c10::toString(t), "'");
}

// One struct per math op (MATH_OP below): its compiler op, result kind and
// ATen name.
template <class M>
void math_into(const Tensor& self, const Tensor& out) {
  const auto dt = math_result(M::kKind, self.scalar_type());
  run(M::kOp, {tensor_operand(to_dtype_on_device(self, dt))}, out, dt);
}
template <class M>
Tensor& math_out(const Tensor& self, Tensor& out) {
  math_check(M::kKind, M::kName, self);  // complex declines to the host library kernel
  check_out_device(out, self.device(), M::kName);
  check_cast(math_result(M::kKind, self.scalar_type()), out);
  resize_out_checked(out, self.sizes(), {&self});
  math_into<M>(self, out);
  return out;
}
template <class M>
Tensor math_fn(const Tensor& self) {
  Tensor out = empty_elementwise(self.sizes(), math_result(M::kKind, self.scalar_type()),
                                 self.device(), {&self});
  return math_out<M>(self, out);
}
template <class M>
Tensor& math_(Tensor& self) {
  math_check(M::kKind, M::kName, self);
  check_cast(math_result(M::kKind, self.scalar_type()), self);
  math_into<M>(self, self);
  return self;
}

#define MATH_OP(name, op, kind)                          \
  struct M_##name {                                      \
    static constexpr Op kOp = Op::op;                    \
    static constexpr Kind kKind = Kind::kind;            \
    static constexpr const char* kName = "aten::" #name; \
  };
MATH_OP(exp2, Exp2, FloatResult)
MATH_OP(expm1, Expm1, FloatResult)
MATH_OP(log1p, Log1p, FloatResult)
MATH_OP(log2, Log2, FloatResult)
MATH_OP(log10, Log10, FloatResult)
MATH_OP(tan, Tan, FloatResult)
MATH_OP(asin, Asin, FloatResult)
MATH_OP(acos, Acos, FloatResult)
MATH_OP(atan, Atan, FloatResult)
MATH_OP(sinh, Sinh, FloatResult)
MATH_OP(cosh, Cosh, FloatResult)
MATH_OP(asinh, Asinh, FloatResult)
MATH_OP(acosh, Acosh, FloatResult)
MATH_OP(atanh, Atanh, FloatResult)
MATH_OP(trunc, Trunc, SameType)
MATH_OP(frac, Frac, FloatOnly)
#undef MATH_OP

// isinf / isfinite: Bool out, any real input (integers: never infinite).
template <Op kOp>
Tensor& isx_out(const Tensor& self, Tensor& out) {
  check_out_device(out, self.device(), op_name(kOp));
  check_cast(c10::kBool, out);
  // isinf.out is generated (a result copied into out): the CPU checks no overlap.
  at::native::resize_output(out, self.sizes());
  if (self.is_complex()) {
    // Infinite if either part is; finite if both are.
    const Tensor parts = empty_device(at::view_as_real(self).sizes(), c10::kBool, self.device());
    run(kOp, {tensor_operand(at::view_as_real(self))}, parts, c10::kBool);
    out.copy_(kOp == Op::IsInf ? parts.any(-1) : parts.all(-1));
    return out;
  }
  run(kOp, {tensor_operand(self)}, out, c10::kBool);
  return out;
}
template <Op kOp>
Tensor isx(const Tensor& self) {
  Tensor out = empty_elementwise(self.sizes(), c10::kBool, self.device(), {&self});
  return isx_out<kOp>(self, out);
}

// fmod: PyTorch's type promotion; the Scalar overloads treat the number as a
// wrapped number (it does not promote the tensor's dtype category downwards).
// Bool and complex decline (PyTorch's kernel has no Bool fmod either).
void fmod_check(c10::ScalarType compute) {
  TORCH_CHECK_NOT_IMPLEMENTED(compute != c10::kBool && !c10::isComplexType(compute),
                              "\"fmod_cpu\" not implemented for '", c10::toString(compute), "'");
}

void fmod_into(const Tensor& a, const Tensor& b, const Tensor& out, c10::ScalarType compute) {
  if (out.numel() == 0) return;
  const at::IntArrayRef shape = out.sizes();
  run(Op::Fmod,
      {elementwise_operand_in_dtype(a, compute, shape),
       elementwise_operand_in_dtype(b, compute, shape)},
      out, compute);
}
Tensor fmod_t(const Tensor& a, const Tensor& b) {
  const c10::Device device = common_device("fmod", {&a, &b});
  const auto compute = at::result_type(a, b);
  fmod_check(compute);
  Tensor out =
      empty_elementwise(at::infer_size_dimvector(a.sizes(), b.sizes()), compute, device, {&a, &b});
  fmod_into(a, b, out, compute);
  return out;
}
Tensor& fmod_t_(Tensor& a, const Tensor& b) {
  common_device("fmod_", {&a, &b});
  const auto compute = at::result_type(a, b);
  fmod_check(compute);
  check_cast(compute, a);
  check_output_shape(a, at::infer_size_dimvector(a.sizes(), b.sizes()));
  fmod_into(a, b, a, compute);
  return a;
}
Tensor& fmod_t_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const c10::Device device = common_device("fmod", {&a, &b});
  check_out_device(out, device, "fmod");
  const auto compute = at::result_type(a, b);
  fmod_check(compute);
  check_cast(compute, out);
  resize_out_checked(out, at::infer_size_dimvector(a.sizes(), b.sizes()), {&a, &b});
  fmod_into(a, b, out, compute);
  return out;
}
Tensor fmod_s(const Tensor& a, const c10::Scalar& b) { return fmod_t(a, wrapped_scalar(b)); }
Tensor& fmod_s_(Tensor& a, const c10::Scalar& b) { return fmod_t_(a, wrapped_scalar(b)); }
Tensor& fmod_s_out(const Tensor& a, const c10::Scalar& b, Tensor& out) {
  return fmod_t_out(a, wrapped_scalar(b), out);
}

}  // namespace

#define MATH_UNARY(name)              \
  m.impl(#name, math_fn<M_##name>);   \
  m.impl(#name "_", math_<M_##name>); \
  m.impl(#name ".out", math_out<M_##name>);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call (complex, integer activations) runs PyTorch's kernel
  m.impl("softplus", softplus);
  m.impl("softplus.out", softplus_out);
  m.impl("mish", plain_fn<kMish>);
  m.impl("mish_", plain_<kMish>);
  m.impl("mish.out", plain_out<kMish>);
  m.impl("hardswish", plain_fn<kHardswish>);
  m.impl("hardswish_", plain_<kHardswish>);
  m.impl("hardswish.out", plain_out<kHardswish>);
  m.impl("hardsigmoid", plain_fn<kHardsigmoid>);
  m.impl("hardsigmoid_", plain_<kHardsigmoid>);
  m.impl("hardsigmoid.out", plain_out<kHardsigmoid>);
  m.impl("elu", elu);
  m.impl("elu_", elu_);
  m.impl("elu.out", elu_out);
  m.impl("leaky_relu", leaky_relu);
  m.impl("leaky_relu_", leaky_relu_);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);

  m.impl("softplus_backward", softplus_backward);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("mish_backward", bwd2<Op::MishBackward>);
  m.impl("hardswish_backward", bwd2<Op::HardswishBackward>);
  m.impl("hardswish_backward.out", bwd2_out<Op::HardswishBackward>);
  m.impl("hardsigmoid_backward", bwd2<Op::HardsigmoidBackward>);
  m.impl("hardsigmoid_backward.grad_input", bwd2_out<Op::HardsigmoidBackward>);
  m.impl("elu_backward", elu_backward);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("leaky_relu_backward", leaky_relu_backward);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);

  MATH_UNARY(exp2)
  MATH_UNARY(expm1)
  MATH_UNARY(log1p)
  MATH_UNARY(log2)
  MATH_UNARY(log10)
  MATH_UNARY(tan)
  MATH_UNARY(asin)
  MATH_UNARY(acos)
  MATH_UNARY(atan)
  MATH_UNARY(sinh)
  MATH_UNARY(cosh)
  MATH_UNARY(asinh)
  MATH_UNARY(acosh)
  MATH_UNARY(atanh)
  MATH_UNARY(trunc)
  MATH_UNARY(frac)
  m.impl("isinf", isx<Op::IsInf>);
  m.impl("isinf.out", isx_out<Op::IsInf>);
  m.impl("isfinite", isx<Op::IsFinite>);

  m.impl("fmod.Tensor", fmod_t);
  m.impl("fmod_.Tensor", fmod_t_);
  m.impl("fmod.Tensor_out", fmod_t_out);
  m.impl("fmod.Scalar", fmod_s);
  m.impl("fmod_.Scalar", fmod_s_);
  m.impl("fmod.Scalar_out", fmod_s_out);
}

}  // namespace openneuron::bridge
