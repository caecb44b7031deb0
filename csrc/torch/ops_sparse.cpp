// Sparse COO tensors on neuron: indices and values are dense neuron tensors inside a
// SparseTensorImpl. The structure ops (construction, accessors, resize, copy) are ATen's
// own device-generic implementations; every other sparse op runs through a fallback that
// moves its sparse and dense arguments to the CPU, runs the CPU's sparse kernel and moves
// the results back, under the CPU fallback's policy (OPENNEURON_FALLBACK, warning, count).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include <chrono>
#include <optional>

#include "bridge.h"

namespace openneuron::bridge {
namespace {

bool on_neuron(const at::Tensor& t) { return t.defined() && t.device().is_privateuseone(); }

// A CPU copy of a neuron argument (sparse or dense); anything else as it is.
c10::IValue to_cpu(const c10::IValue& v, std::optional<c10::Device>& device) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!on_neuron(t)) return v;
    device = t.device();
    return t.cpu();
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) {
      if (on_neuron(t)) device = t.device();
      out.push_back(on_neuron(t) ? t.cpu() : t);
    }
    return out;
  }
  if (v.isDevice() && v.toDevice().is_privateuseone()) {
    device = v.toDevice();
    return c10::Device(c10::kCPU);
  }
  return v;
}

// Timed for `openneuron report`; the bytes a sparse tensor's indices and
// values move are not counted.
void sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_cpu_fallback(op);
  const auto start = std::chrono::steady_clock::now();
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  std::vector<c10::IValue> originals(stack->end() - num_args, stack->end());
  std::optional<c10::Device> device;
  for (size_t i = 0; i < num_args; ++i) {
    (*stack)[stack->size() - num_args + i] = to_cpu(originals[i], device);
  }
  std::vector<c10::IValue> cpu_args(stack->end() - num_args, stack->end());
  op.callBoxed(stack);
  // Arguments the op writes (in-place self, out=) take the CPU's result, sparse or dense.
  for (size_t i = 0; i < num_args; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || !originals[i].isTensor()) continue;
    const at::Tensor& orig = originals[i].toTensor();
    if (on_neuron(orig)) const_cast<at::Tensor&>(orig).copy_(cpu_args[i].toTensor());
  }
  const size_t num_returns = schema.returns().size();
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& v = (*stack)[stack->size() - num_returns + r];
    if (!v.isTensor() || !v.toTensor().defined() || !device.has_value()) continue;
    // A return that aliases a written argument is that argument itself.
    const auto* alias = schema.returns()[r].alias_info();
    bool returned_arg = false;
    for (size_t i = 0; alias != nullptr && alias->isWrite() && i < num_args; ++i) {
      if (cpu_args[i].isTensor() && cpu_args[i].toTensor().is_same(v.toTensor())) {
        v = originals[i];
        returned_arg = true;
        break;
      }
    }
    if (!returned_arg && v.toTensor().device().is_cpu()) v = v.toTensor().to(*device);
  }
  fallback_calls().add_cost(
      op_name(op),
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      0, 0);
}

at::Tensor empty_sparse(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory,
                        std::optional<at::MemoryFormat> memory_format) {
  return at::native::empty_sparse(size, dtype, layout, device, pin_memory, memory_format);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("empty.memory_format", empty_sparse);
  m.impl("_sparse_coo_tensor_with_dims", at::native::new_with_dims_sparse);
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         at::native::new_with_dims_and_tensor_sparse_symint);
  m.impl("_indices", at::native::_indices_sparse);
  m.impl("_values", at::native::_values_sparse);
  m.impl("indices", at::native::indices_sparse);
  m.impl("values", at::native::values_sparse);
  m.impl("_nnz", at::native::_nnz_sparse);
  m.impl("sparse_dim", at::native::sparse_dim_sparse);
  m.impl("dense_dim", at::native::dense_dim_sparse);
  m.impl("is_coalesced", at::native::is_coalesced_sparse);
  m.impl("_coalesced_", at::native::_coalesced_sparse_);
  m.impl("sparse_resize_", at::native::sparse_resize_);
  m.impl("sparse_resize_and_clear_", at::native::sparse_resize_and_clear_);
  m.impl("copy_", at::native::copy_sparse_wrapper_);
  m.impl("copy_sparse_to_sparse_", at::native::copy_sparse_);  // the fallback writes back with it
  m.impl("zero_", at::native::zero_sparse_);
  m.impl("clone", at::native::clone_sparse);
}

}  // namespace openneuron::bridge
