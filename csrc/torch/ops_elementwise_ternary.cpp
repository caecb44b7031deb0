// The ternary elementwise ops: where, addcmul/addcdiv, lerp and clamp (with
// clamp_min/clamp_max, its one-bound forms). Each ATen op launches one compiler op of
// the elementwise family (lower_elementwise.cpp), in the CPU's result type and with
// TensorIterator's checks (elementwise_checks.h).
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>

#include <limits>

#include "elementwise_checks.h"
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

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

// The checks of the CPU's addcmul/addcdiv meta functions, in their order (`out`
// undefined: a new result).
template <Op kOp>
void check_addc(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                const at::Tensor& out) {
  if constexpr (kOp == Op::Addcdiv) {
    TORCH_CHECK(!(c10::isIntegralType(t1.scalar_type(), true) &&
                  c10::isIntegralType(t2.scalar_type(), true)),
                "Integer division with addcdiv is no longer supported, and in a future  ",
                "release addcdiv will perform a true division of tensor1 and tensor2. ",
                "The historic addcdiv behavior can be implemented as ",
                "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ",
                "for integer inputs and as ",
                "(input + value * tensor1 / tensor2) for float inputs. ",
                "The future addcdiv behavior is just the latter implementation: ",
                "(input + value * tensor1 / tensor2), for all dtypes.");
  }
  if (out.defined()) check_cast(at::native::result_type({self, t1, t2}), out);
}

template <Op kOp>
void addc_into(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
               const at::Scalar& value, const at::Tensor& out) {
  const auto compute = at::native::result_type({self, t1, t2});
  const auto shape = out.sizes();
  if (out.numel() == 0) return;
  check_writable(out, {&self, &t1, &t2});
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
  check_addc<kOp>(self, t1, t2, at::Tensor());
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
  check_addc<kOp>(self, t1, t2, self);
  check_output_shape(self, at::infer_size_dimvector(self.sizes(), broadcast_shape(t1, t2)));
  addc_into<kOp>(self, t1, t2, value, self);
  return self;
}
template <Op kOp>
at::Tensor& addc_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                     const at::Scalar& value, at::Tensor& out) {
  common_device(op_name(kOp), {&self, &t1, &t2});
  check_addc<kOp>(self, t1, t2, out);
  resize_out_checked(out, at::infer_size_dimvector(self.sizes(), broadcast_shape(t1, t2)),
                     {&self, &t1, &t2});
  addc_into<kOp>(self, t1, t2, value, out);
  return out;
}

void lerp_into(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
               const at::Tensor& out) {
  check_output_shape(out, at::infer_size_dimvector(self.sizes(), broadcast_shape(end, weight)));
  if (out.numel() == 0) return;
  check_writable(out, {&self, &end, &weight});
  const auto compute = self.scalar_type();
  const auto shape = out.sizes();
  launch(Op::Lerp,
         {elementwise_operand(self, compute, shape), elementwise_operand(end, compute, shape),
          elementwise_operand(weight, compute, shape)},
         {tensor_operand(out)});
}

// The dtype checks of the CPU's lerp meta functions: end in self's dtype, and so a
// weight tensor unless it is 0-dim (then promoted).
void check_lerp_end(const at::Tensor& self, const at::Tensor& end) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(),
              " for `end` but got dtype ", end.dtype());
}

at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  common_device("lerp_", {&self, &end});
  check_lerp_end(self, end);
  lerp_into(self, end, wrapped_scalar(weight), self);
  return self;
}
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  common_device("lerp_", {&self, &end, &weight});
  check_lerp_end(self, end);
  TORCH_CHECK(weight.dim() == 0 || self.dtype() == weight.dtype(), "expected dtype ", self.dtype(),
              " for `weight` but got dtype ", weight.dtype());
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
      // The missing bound is the type's own limit: a wider one would wrap when the
      // kernel converts it to the type (int32's bound from INT64_MIN is 0).
      const bool low = dflt < 0;
      switch (compute) {
        case c10::kBool:
          return int_operand(low ? 0 : 1);
        case c10::kByte:
          return int_operand(low ? 0 : std::numeric_limits<uint8_t>::max());
        case c10::kChar:
          return int_operand(low ? std::numeric_limits<int8_t>::min()
                                 : std::numeric_limits<int8_t>::max());
        case c10::kShort:
          return int_operand(low ? std::numeric_limits<int16_t>::min()
                                 : std::numeric_limits<int16_t>::max());
        case c10::kInt:
          return int_operand(low ? std::numeric_limits<int32_t>::min()
                                 : std::numeric_limits<int32_t>::max());
        default:
          return int_operand(low ? std::numeric_limits<int64_t>::min()
                                 : std::numeric_limits<int64_t>::max());
      }
    }
    return float_operand(dflt);
  };
  launch(Op::Clamp,
         {tensor_operand(to_dtype_on_device(self, compute)), bound(lo, -inf), bound(hi, inf)},
         {tensor_operand(out)});
}
// As the CPU: integer and bool inputs promote with the bounds (clamp(int, 0.5) is float).
c10::ScalarType clamp_result(const at::Tensor& self, const std::optional<at::Scalar>& lo,
                             const std::optional<at::Scalar>& hi) {
  TORCH_CHECK(!self.is_complex(), "clamp is not supported for complex types");
  if (c10::isFloatingType(self.scalar_type())) return self.scalar_type();
  at::native::ResultTypeState state = at::native::update_result_type_state(self, {});
  if (lo.has_value()) state = at::native::update_result_type_state(*lo, state);
  if (hi.has_value()) state = at::native::update_result_type_state(*hi, state);
  return at::native::result_type(state);
}
at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& lo,
                 const std::optional<at::Scalar>& hi) {
  at::Tensor out =
      empty_elementwise(self.sizes(), clamp_result(self, lo, hi), self.device(), {&self});
  clamp_into(self, lo, hi, out);
  return out;
}
at::Tensor& clamp_(at::Tensor& self, const std::optional<at::Scalar>& lo,
                   const std::optional<at::Scalar>& hi) {
  const c10::ScalarType result = clamp_result(self, lo, hi);
  TORCH_CHECK(result == self.scalar_type(), "result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
  clamp_into(self, lo, hi, self);
  return self;
}
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<at::Scalar>& lo,
                      const std::optional<at::Scalar>& hi, at::Tensor& out) {
  check_out_device(out, self.device(), "clamp");
  const c10::ScalarType result = clamp_result(self, lo, hi);
  // The CPU's clamp is a structured unary op: out has the result's dtype.
  TORCH_CHECK(out.scalar_type() == result, "Found dtype ", out.scalar_type(), " but expected ",
              result);
  resize_out_checked(out, self.sizes(), {&self});
  write_result(out, result, [&](const at::Tensor& t) { clamp_into(self, lo, hi, t); });
  return out;
}
// clamp_min/clamp_max with a number are clamp with one bound (PyTorch's own CPU kernels
// share clamp's semantics: NaN propagates, integers promote with the bound).
at::Tensor clamp_min(const at::Tensor& self, const at::Scalar& lo) {
  return bridge::clamp(self, lo, std::nullopt);
}
at::Tensor& clamp_min_(at::Tensor& self, const at::Scalar& lo) {
  return bridge::clamp_(self, lo, std::nullopt);
}
at::Tensor& clamp_min_out(const at::Tensor& self, const at::Scalar& lo, at::Tensor& out) {
  return clamp_out(self, lo, std::nullopt, out);
}
at::Tensor clamp_max(const at::Tensor& self, const at::Scalar& hi) {
  return bridge::clamp(self, std::nullopt, hi);
}
at::Tensor& clamp_max_(at::Tensor& self, const at::Scalar& hi) {
  return bridge::clamp_(self, std::nullopt, hi);
}
at::Tensor& clamp_max_out(const at::Tensor& self, const at::Scalar& hi, at::Tensor& out) {
  return clamp_out(self, std::nullopt, hi, out);
}

Tensor& where_out(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const c10::Device device = common_device("where", {&cond, &a, &b});
  check_out_device(out, device, "where");
  const auto compute = at::result_type(a, b);
  check_cast(compute, out);
  const auto shape =
      at::infer_size_dimvector(cond.sizes(), at::infer_size_dimvector(a.sizes(), b.sizes()));
  resize_out_checked(out, shape, {&cond, &a, &b});
  if (out.numel() == 0) return out;
  Operand oc = elementwise_operand(cond, c10::kBool, shape);
  Operand oa = elementwise_operand(a, compute, shape);
  Operand ob = elementwise_operand(b, compute, shape);
  write_result(
      out, compute, [&](const Tensor& t) { launch(Op::Where, {oc, oa, ob}, {tensor_operand(t)}); },
      Target::Contiguous);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
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
  m.impl("clamp.out", clamp_out);
  m.impl("clamp_min", clamp_min);
  m.impl("clamp_min_", clamp_min_);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max", clamp_max);
  m.impl("clamp_max_", clamp_max_);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("where.self_out", where_out);
}

}  // namespace openneuron::bridge
