// Quantized tensors on neuron (torch.quantize_per_tensor of a neuron tensor; quint8,
// qint8 and qint32), at the level CUDA has them: a QTensorImpl over device memory.
// Allocation, views, quantizer accessors, copies and int_repr are here (ATen's
// device-generic implementations where it has them); every other quantized op runs on
// the CPU through layout_cpu_fallback (fallback.cpp), under the CPU fallback's policy.
// There are no quantized kernels of our own: neuron computes in the floating types.
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

#include "bridge.h"

namespace openneuron::bridge {
namespace {

at::Tensor new_device_qtensor(c10::IntArrayRef size, std::optional<c10::IntArrayRef> stride,
                              std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory, at::QuantizerPtr quantizer,
                              std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron: quantized tensors are strided, got ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is a CPU property");
  const c10::ScalarType type = quantizer->scalar_type();
  TORCH_CHECK(!dtype.has_value() || *dtype == type, "neuron: quantized dtype ", *dtype,
              " differs from its quantizer's ", type);
  TORCH_CHECK(type == at::kQUInt8 || type == at::kQInt8 || type == at::kQInt32,
              "neuron: quantized tensors of ", type,
              " are not supported (quint8, qint8 and qint32 are)");
  at::native::check_size_nonnegative(size);
  const c10::Device dev = checked_device(device);
  c10::DeviceGuard guard(dev);
  const size_t item = c10::elementSize(type);
  const size_t bytes = stride.has_value()
                           ? at::detail::computeStorageNbytes(size, *stride, item)
                           : static_cast<size_t>(c10::multiply_integers(size)) * item;
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::PrivateUse1);
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), bytes,
                                                       allocator->allocate(bytes), allocator,
                                                       /*resizable=*/true);
  at::Tensor t = at::detail::make_tensor<at::QTensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::QuantizedPrivateUse1),
      c10::scalarTypeToTypeMeta(type), std::move(quantizer));
  auto* impl = at::get_qtensorimpl(t);
  if (stride.has_value()) {
    impl->set_sizes_and_strides(size, *stride);
  } else {
    impl->set_sizes_contiguous(size);
    impl->empty_tensor_restride(memory_format.value_or(c10::MemoryFormat::Contiguous));
  }
  return t;
}

at::Tensor empty_affine_quantized(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                  std::optional<c10::Layout> layout,
                                  std::optional<c10::Device> device, std::optional<bool> pin,
                                  double scale, int64_t zero_point,
                                  std::optional<c10::MemoryFormat> memory_format) {
  const c10::ScalarType type = dtype.value_or(at::kQUInt8);
  return new_device_qtensor(size, std::nullopt, dtype, layout, device, pin,
                            at::make_per_tensor_affine_quantizer(scale, zero_point, type),
                            memory_format);
}

// The quantizer keeps its scales and zero points on the CPU: every kernel that reads
// them runs there (through the fallback).
at::Tensor empty_per_channel_affine_quantized(c10::IntArrayRef size, const at::Tensor& scales,
                                              const at::Tensor& zero_points, int64_t axis,
                                              std::optional<c10::ScalarType> dtype,
                                              std::optional<c10::Layout> layout,
                                              std::optional<c10::Device> device,
                                              std::optional<bool> pin,
                                              std::optional<c10::MemoryFormat> memory_format) {
  const c10::ScalarType type = dtype.value_or(at::kQUInt8);
  return new_device_qtensor(
      size, std::nullopt, dtype, layout, device, pin,
      at::make_per_channel_affine_quantizer(scales.cpu(), zero_points.cpu(), axis, type),
      memory_format);
}

// at::empty of a quantized dtype: a tensor whose quantizer is set by what is copied in.
at::Tensor empty_unknown_quantized(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                   std::optional<c10::Layout> layout,
                                   std::optional<c10::Device> device, std::optional<bool> pin,
                                   std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(dtype.has_value(), "neuron: a quantized empty tensor needs its dtype");
  return new_device_qtensor(size, std::nullopt, dtype, layout, device, pin,
                            at::make_unknown_quantizer(*dtype), memory_format);
}

at::Tensor empty_strided_unknown_quantized(c10::IntArrayRef size, c10::IntArrayRef stride,
                                           std::optional<c10::ScalarType> dtype,
                                           std::optional<c10::Layout> layout,
                                           std::optional<c10::Device> device,
                                           std::optional<bool> pin) {
  TORCH_CHECK(dtype.has_value(), "neuron: a quantized empty tensor needs its dtype");
  return new_device_qtensor(size, stride, dtype, layout, device, pin,
                            at::make_unknown_quantizer(*dtype), std::nullopt);
}

// The integers a quantized tensor stores, as a plain tensor over the same bytes.
at::Tensor integer_view(const at::Tensor& q) {
  at::Tensor t = at::empty({0}, q.options().dtype(c10::toUnderlying(q.scalar_type())));
  return t.set_(q.storage(), q.storage_offset(), q.sizes(), q.strides());
}

// The stored integers, in the layout the CPU's int_repr gives.
at::Tensor int_repr(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options()
                                               .dtype(c10::toUnderlying(self.scalar_type()))
                                               .memory_format(self.suggest_memory_format()));
  return out.copy_(integer_view(self));
}

// copy_ between a neuron quantized tensor and another quantized tensor (either device):
// the integers move as they are and the destination takes the source's quantizer, as
// copy_ between two quantized CPU tensors does. A float source is quantized on the CPU
// with the destination's quantizer, as the CPU's copy_ does.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(dst.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use "
              "dequantize to get a float Tensor from a quantized Tensor");
  if (!self.is_quantized()) {
    at::Tensor staged = at::empty_quantized(dst.sizes(), dst, dst.options().device(at::kCPU));
    staged.copy_(self.cpu());
    integer_view(dst).copy_(integer_view(staged), non_blocking);
    return dst;
  }
  // A destination made by at::empty has no quantizer yet (UnknownQuantizer).
  const bool dst_unknown =
      dynamic_cast<const at::UnknownQuantizer*>(at::get_qtensorimpl(dst)->quantizer().get());
  TORCH_CHECK(dst_unknown || self.qscheme() == dst.qscheme(),
              "Quantized Copy only works with same qscheme");
  TORCH_CHECK(self.scalar_type() == dst.scalar_type(), "Copying from ", self.scalar_type(), " to ",
              dst.scalar_type(), " is not allowed");
  at::set_quantizer_(dst, self.quantizer());
  integer_view(dst).copy_(integer_view(self), non_blocking);
  return dst;
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_cpu_fallback>());
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", empty_affine_quantized);
  m.impl("_empty_per_channel_affine_quantized", empty_per_channel_affine_quantized);
  m.impl("empty.memory_format", empty_unknown_quantized);
  m.impl("empty_strided", empty_strided_unknown_quantized);
  m.impl("empty_quantized", at::native::empty_quantized);
  m.impl("empty_like", at::native::empty_like_quantized);
  m.impl("as_strided", at::native::as_strided_qtensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("squeeze",
         TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(at::native::squeeze_quantized)));
  m.impl("squeeze.dim", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(
                            at::native::squeeze_quantized)));
  m.impl("squeeze.dims", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, c10::IntArrayRef)>(
                             at::native::squeeze_quantized)));
  m.impl("unsqueeze", at::native::unsqueeze_quantized);
  m.impl("set_.source_Storage_storage_offset", at::native::set_storage_quantized_);
  m.impl("q_scale", at::native::q_scale_quant);
  m.impl("q_zero_point", at::native::q_zero_point_quant);
  m.impl("qscheme", at::native::qscheme_quant);
  m.impl("q_per_channel_scales", at::native::q_per_channel_scales);
  m.impl("q_per_channel_zero_points", at::native::q_per_channel_zero_points);
  m.impl("q_per_channel_axis", at::native::q_per_channel_axis);
  m.impl("clone", at::native::quantized_clone);
  m.impl("int_repr", int_repr);
  m.impl("_copy_from", copy_from);
}

}  // namespace openneuron::bridge
