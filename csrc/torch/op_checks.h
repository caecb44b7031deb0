// Argument checks every native op registration shares, with PyTorch's own
// error messages.
#pragma once

#include <ATen/TensorMeta.h>
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

// An output that is also read (in place, or an out= that is an input) is not resized
// (TensorIterator's rule): the inputs' broadcast shape must be its own, empty or not.
inline void check_output_shape(const at::Tensor& out, at::IntArrayRef broadcast) {
  TORCH_CHECK(out.sizes().equals(broadcast), "output with shape ", out.sizes(),
              " doesn't match the broadcast shape ", broadcast);
}

// A structured ATen kernel's meta function run for its argument checks alone (PyTorch's
// own checks, in its order, with its messages): the output it describes is discarded.
// MetaChecks<at::meta::structured_linalg_vector_norm>().meta(self, ord, dim, keepdim, dtype);
// For meta functions that derive from MetaBase directly (not TensorIteratorBase).
template <class Meta>
struct MetaChecks final : Meta {
  const at::Tensor& maybe_get_output(int64_t) override {
    static const at::Tensor undefined;
    return undefined;
  }
  void set_output_strided(int64_t, at::IntArrayRef, at::IntArrayRef, at::TensorOptions) override {}
  void set_output_raw_strided(int64_t, at::IntArrayRef, at::IntArrayRef,
                              at::TensorOptions) override {}
};

}  // namespace openneuron::bridge
