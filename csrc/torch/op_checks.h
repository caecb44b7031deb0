// Argument checks every native op registration shares, with PyTorch's own
// error messages.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace openneuron::bridge {

// CPU 0-dim tensors take part as scalars, as with CUDA.
inline bool is_cpu_scalar(const at::Tensor& t) {
  return t.defined() && t.is_cpu() && t.dim() == 0;
}

// The neuron device of the tensor arguments (CPU scalars and undefined
// tensors skipped); any other mix raises PyTorch's usual device-mismatch error.
c10::Device common_device(const char* method, std::initializer_list<const at::Tensor*> tensors);

// `out` must be on `device`, else the same device-mismatch error.
void check_out_device(const at::Tensor& out, c10::Device device, const char* method);

// A result of type `from` must be castable to out's dtype.
void check_cast(c10::ScalarType from, const at::Tensor& out);

}  // namespace openneuron::bridge
