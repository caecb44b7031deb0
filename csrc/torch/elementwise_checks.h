// Checks and shapes shared by the elementwise op files (ops_elementwise.cpp,
// ops_elementwise_ternary.cpp, ops_activation.cpp): TensorIterator's rules, as the CPU
// applies them.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "op_checks.h"
#include "output_layout.h"

namespace openneuron::bridge {

inline at::DimVector broadcast_shape(const at::Tensor& a, const at::Tensor& b) {
  return at::infer_size_dimvector(a.sizes(), b.sizes());
}

// What TensorIterator checks before the CPU writes `out` (in place or out=): no element
// written twice through a stride-0 or self-overlapping view, and no input sharing only part
// of its memory with `out` (it would read values already overwritten). An input that is
// `out` exactly is fine.
inline void check_writable(const at::Tensor& out, std::initializer_list<const at::Tensor*> inputs) {
  at::assert_no_internal_overlap(out);
  for (const at::Tensor* in : inputs) {
    if (in->defined() && !is_cpu_scalar(*in)) at::assert_no_partial_overlap(out, *in);
  }
}

// An out= result resized as TensorIterator resizes it: checked first (resizing out= a
// reshaped view of an input in place turns their partial overlap into a full one, which
// no later check would see), then laid out as the inputs are.
inline void resize_out_checked(const at::Tensor& out, at::IntArrayRef shape,
                               std::initializer_list<const at::Tensor*> inputs) {
  check_writable(out, inputs);
  resize_elementwise_out(out, shape, inputs);
}

}  // namespace openneuron::bridge
