// Nested tensors (torch.nested.nested_tensor(..., device="neuron"), the strided
// layout): a NestedTensorImpl whose buffer is a dense neuron tensor and whose sizes
// and strides stay on the CPU, as on CUDA. Copies between devices, allocation, views
// and metadata are ATen's device-generic nested implementations (the ones PyTorch
// registers for every device with nested tensors); every other nested op, such as
// nn.TransformerEncoderLayer's inference fast path, runs on the CPU through
// layout_cpu_fallback (fallback.cpp), under the CPU fallback's policy.
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/chunk_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/detach_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/is_same_size_native.h>
#include <ATen/ops/narrow_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/split_with_sizes_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/transpose_native.h>
#include <ATen/ops/unbind_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include "bridge.h"

namespace openneuron::bridge {

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_cpu_fallback>());
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", at::native::_to_copy_nested);
  m.impl("empty_like", at::native::empty_like_nested);
  m.impl("copy_", at::native::copy_nested_);
  m.impl("clone", at::native::clone_nested);
  m.impl("alias", at::native::alias_nested);
  m.impl("detach", at::native::detach);
  m.impl("_nested_tensor_size", at::native::_nested_tensor_size);
  m.impl("_nested_tensor_strides", at::native::_nested_tensor_strides);
  m.impl("_nested_tensor_storage_offsets", at::native::_nested_tensor_storage_offsets);
  m.impl("is_same_size", at::native::nested_is_same_size);
  m.impl("view", at::native::view_nested);
  m.impl("values", at::native::values_nested);
  m.impl("unbind.int", at::native::NestedTensor_unbind);
  m.impl("select.int", at::native::select_nested);
  m.impl("narrow", at::native::narrow_nested_symint);
  m.impl("split_with_sizes", at::native::split_with_sizes_nested);
  m.impl("chunk", at::native::chunk_nested_tensor);
  m.impl("transpose.int", at::native::transpose_nested);
  m.impl("squeeze", at::native::squeeze_nested);
  m.impl("squeeze.dim", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(
                            at::native::squeeze_dim_nested)));
  m.impl("squeeze.dims", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, c10::IntArrayRef)>(
                             at::native::squeeze_dim_nested)));
  m.impl("unsqueeze", at::native::unsqueeze_nested);
  m.impl("fill_.Scalar", TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(
                             at::native::fill_nested_)));
  m.impl("fill_.Tensor", TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, const at::Tensor&)>(
                             at::native::fill_nested_)));
  m.impl("zero_", at::native::zero_nested_);
}

}  // namespace openneuron::bridge
