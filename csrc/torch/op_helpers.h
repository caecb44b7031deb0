// Helpers every op family of the bridge shares (ops_<family>.cpp): result writing,
// operand building, optional arguments, dtype rules. One copy of each, so the
// families cannot drift apart in how they treat out= tensors or scalars.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>

#include "bridge.h"
#include "engine.h"
#include "native_ops.h"
#include "op_checks.h"
#include "output_layout.h"

namespace openneuron::bridge {

using OptTensor = std::optional<at::Tensor>;

// What an engine's output must be to be written in place.
enum class Target {
  Elementwise,  // any strides without internal overlap: the engine writes each element once
  Contiguous,   // dense row-major (engines that view the output with another shape)
};

// Runs body(target) on a device tensor of `dtype` that the engine may write: `out` itself
// when it has that dtype and the layout `need` asks for, else a temporary copied into
// `out` afterwards. Nothing runs for an empty `out`.
template <typename Body>
void write_result(const at::Tensor& out, c10::ScalarType dtype, Body&& body,
                  Target need = Target::Elementwise) {
  if (out.numel() == 0) return;
  const bool direct =
      out.scalar_type() == dtype &&
      (need == Target::Contiguous ? out.is_contiguous()
                                  : at::has_internal_overlap(out) != at::MemOverlap::Yes);
  if (direct) {
    body(out);
    return;
  }
  at::Tensor tmp = empty_device(out.sizes(), dtype, out.device());
  body(tmp);
  copy_on_device(out, tmp);
}

// An elementwise operand: a device tensor in `compute` expanded to the result shape, or,
// for a CPU 0-dim tensor, a scalar.
inline Operand elementwise_operand(const at::Tensor& t, c10::ScalarType compute,
                                   at::IntArrayRef shape) {
  if (is_cpu_scalar(t)) return scalar_operand(t.item(), compute);
  return tensor_operand(to_dtype_on_device(t, compute).expand(shape));
}

// As elementwise_operand, with a CPU scalar first cast to `compute`, as TensorIterator
// casts it for kernels that read it in the common dtype: fmod(x_f16, 1.37) divides by
// 1.3701171875. (add, mul and the divisions read the scalar's original value instead.)
inline Operand elementwise_operand_in_dtype(const at::Tensor& t, c10::ScalarType compute,
                                            at::IntArrayRef shape) {
  if (is_cpu_scalar(t) && (compute == c10::kHalf || compute == c10::kBFloat16))
    return scalar_operand(t.to(compute).item(), compute);
  return elementwise_operand(t, compute, shape);
}

// A Python-number operand as a wrapped-number tensor, so it does not promote 0-dim
// tensors (mul.Scalar(float32 0-dim, 0.01) stays float32, as on the CPU).
inline at::Tensor wrapped_scalar(const at::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Optional tensor arguments.
inline const at::Tensor& value_or_undefined(const OptTensor& t) {
  static const at::Tensor undefined;
  return t.has_value() ? *t : undefined;
}
inline Operand optional_operand(const at::Tensor& t) {
  return t.defined() ? tensor_operand(t) : none_operand();
}
inline Operand optional_operand(const OptTensor& t) {
  return optional_operand(value_or_undefined(t));
}
// In `dtype` and contiguous, for engines that read the tensor as a flat vector.
inline Operand optional_operand(const OptTensor& t, c10::ScalarType dtype) {
  if (!t.has_value() || !t->defined()) return none_operand();
  return tensor_operand(to_dtype_on_device(*t, dtype).contiguous());
}

inline at::Tensor empty_device_like(const at::Tensor& t, c10::ScalarType dtype) {
  return empty_device(t.sizes(), dtype, t.device());
}

// The engines' float dtypes.
inline bool is_half_or_float(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf;
}

// The result dtype of sum, prod and the scans: `dtype` if given, else integers (and Bool)
// accumulate in int64 and floats in their own type.
inline c10::ScalarType integral_to_long(const at::Tensor& self,
                                        std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type();
}

// Runs the CPU kernel of an op for a case the engines do not cover (counted as a fallback).
template <typename... Args>
void route_to_cpu(const char* name, const char* overload, Args&&... args) {
  std::vector<c10::IValue> stack{c10::IValue(std::forward<Args>(args))...};
  cpu_fallback_call(name, overload, &stack);
}

}  // namespace openneuron::bridge
