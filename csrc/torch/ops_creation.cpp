// Creation and copy: allocation (empty, empty_strided), views and set_, resize_,
// copies between host and device and between cores, _local_scalar_dense, fill_,
// zero_, arange, cat and record_stream. Lowering: lower_creation.cpp (Copy, Fill, Arange).
#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "graph_capture.h"
#include "op_helpers.h"

namespace openneuron::bridge {

c10::Device checked_device(std::optional<c10::Device> device_opt) {
  c10::Device device = c10::device_or_default(device_opt);
  TORCH_INTERNAL_ASSERT(device.is_privateuseone());
  if (!device.has_index()) device = c10::Device(device.type(), current_device());
  check_device_index(device.index());
  ensure_initialized();
  return device;
}

namespace {

using at::Tensor;
using compiler::Op;

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron supports only the strided layout, got ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is a CPU property");
}


// FP8 is a trn3 feature (README, "Behaviour to know"): on other platform profiles creating a
// float8 tensor fails with the reason and the way out, rather than later in an op.
c10::ScalarType device_dtype(std::optional<c10::ScalarType> dtype, c10::Device dev) {
  const c10::ScalarType t = c10::dtype_or_default(dtype);
  if (c10::isFloat8Type(t)) {
    onrt_device_properties p{};
    ONRT_CHECK(onrt_device_get_properties(dev.index(), &p));
    TORCH_CHECK_TYPE(p.supports_fp8 != 0, "neuron: ", t, " needs the trn3 platform profile, but ",
                     dev, " is ", p.platform,
                     "; start the process with OPENNEURON_PLATFORM=trn3 to use FP8");
  }
  return narrow_dtype(t);
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  const c10::Device dev = checked_device(device);
  c10::DeviceGuard guard(dev);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), ks,
                                   device_dtype(dtype, dev), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  const c10::Device dev = checked_device(device);
  c10::DeviceGuard guard(dev);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(
      size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1), ks, device_dtype(dtype, dev));
}

// Autograd's zero gradients (e.g. sgn's backward): a plain zero tensor here,
// where CUDA returns a lazily-zero one; the values are the same.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> layout,
                                 std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory) {
  at::Tensor t = empty_memory_format(size, dtype, layout, device, pin_memory, std::nullopt);
  if (t.numel() > 0) fill_scalar_device(t, 0.0);
  return t;
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  // View metadata only: the CPU implementation never touches data.
  return at::cpu::as_strided_symint(self, size, stride, std::move(storage_offset));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef sym_size,
                          std::optional<at::MemoryFormat> memory_format) {
  const c10::IntArrayRef size = C10_AS_INTARRAYREF_SLOW(sym_size);
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() == size && !memory_format.has_value()) return self;
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value()) impl->empty_tensor_restride(*memory_format);
  const size_t needed = at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.element_size(), self.storage_offset());
  const c10::Storage& storage = impl->unsafe_storage();
  if (needed > storage.nbytes()) {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(self.device());
    resize_storage_bytes(storage, needed);
  }
  return self;
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}
at::Tensor& set_storage(at::Tensor& self, at::Storage source) {
  return at::native::set_(self, std::move(source));
}
at::Tensor& set_storage_offset(at::Tensor& self, at::Storage storage, int64_t offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::cpu::set_(self, std::move(storage), offset, size, stride);
}
at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  at::Storage empty(at::Storage::use_byte_size_t(), 0,
                    c10::GetAllocator(c10::DeviceType::PrivateUse1), true);
  return at::native::set_(self, empty);
}

// ------------------------------------------------------------------ copies

bool is_dense_contiguous(const at::Tensor& t) { return t.is_contiguous() && !t.is_conj(); }

// Host memory handed to the runtime must outlive the copy: copies that touch
// user host memory are synchronous (onrt_memcpy waits), like CUDA's pageable
// copies.
void host_to_device(const at::Tensor& dst, const at::Tensor& src) {
  capture_unsupported("a copy from the host");
  at::Tensor host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  host = host.resolve_conj().resolve_neg();
  const c10::DeviceIndex dev = dst.device().index();
  at::Tensor target = is_dense_contiguous(dst)
                          ? dst
                          : empty_device_exact(dst.sizes(), dst.scalar_type(), dst.device());
  ONRT_CHECK(onrt_memcpy(target.data_ptr(), host.const_data_ptr(), host.nbytes(),
                         ONRT_COPY_HOST_TO_DEVICE, current_runtime_stream(dev)));
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

void device_to_host(const at::Tensor& dst, const at::Tensor& src) {
  capture_unsupported("a copy to the host");
  const c10::DeviceIndex dev = src.device().index();
  at::Tensor dense = is_dense_contiguous(src) ? src : [&] {
    at::Tensor t = empty_device_exact(src.sizes(), src.scalar_type(), src.device());
    copy_on_device(t, src);
    return t;
  }();
  const bool direct =
      dst.scalar_type() == src.scalar_type() && dst.is_contiguous() && dst.sizes() == src.sizes();
  at::Tensor host = direct ? dst : at::empty(src.sizes(), src.options().device(at::kCPU));
  ONRT_CHECK(onrt_memcpy(host.data_ptr(), dense.const_data_ptr(), dense.nbytes(),
                         ONRT_COPY_DEVICE_TO_HOST, current_runtime_stream(dev)));
  if (!direct) dst.copy_(host);
}

void device_to_device(const at::Tensor& dst, const at::Tensor& src) {
  if (src.device() == dst.device()) {
    copy_on_device(dst, src);
    return;
  }
  // Across cores: densify on the source core, move bytes, lay out on the target.
  capture_unsupported("a copy between devices");
  at::Tensor dense = empty_device_exact(dst.sizes(), dst.scalar_type(), src.device());
  copy_on_device(dense, src);
  at::Tensor target = is_dense_contiguous(dst)
                          ? dst
                          : empty_device_exact(dst.sizes(), dst.scalar_type(), dst.device());
  // The source core's queued work must finish before its bytes are read.
  ONRT_CHECK(onrt_stream_synchronize(current_runtime_stream(src.device().index())));
  ONRT_CHECK(onrt_memcpy(target.data_ptr(), dense.const_data_ptr(), dense.nbytes(),
                         ONRT_COPY_DEVICE_TO_DEVICE, current_runtime_stream(dst.device().index())));
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

// Conjugate and negative views are lazy bits on a tensor, not data; the engines copy
// physical values. A destination's bits move to the source (writing x through a negative
// view stores -x), so only the source carries bits; a device source's bits are then applied
// to a dense copy of its physical values by the device's own neg and conj kernels.
void move_lazy_bits_to_source(at::Tensor& src, at::Tensor& dst) {
  if (dst.is_neg()) {
    dst = at::_neg_view(dst);  // flips the bit: a view of the physical values
    src = at::_neg_view(src);
  }
  if (dst.is_conj()) {
    dst = dst.conj();
    src = src.conj();  // a real source stays as it is
  }
}

at::Tensor resolve_lazy_bits_on_device(const at::Tensor& t) {
  if (!t.is_neg() && !t.is_conj()) return t;
  at::Tensor raw = t.is_conj() ? t.conj() : t;
  if (raw.is_neg()) raw = at::_neg_view(raw);
  at::Tensor dense = empty_device_exact(raw.sizes(), raw.scalar_type(), raw.device());
  copy_on_device(dense, raw);
  if (t.is_neg()) dense.neg_();
  if (t.is_conj()) dense.conj_physical_();
  return dense;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst_arg, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst_arg.defined(), "copy_: undefined tensor");
  if (dst_arg.numel() == 0) {
    // Nothing to copy; the CPU's TensorIterator still requires src to broadcast to dst.
    check_output_shape(dst_arg, at::infer_size_dimvector(dst_arg.sizes(), self.sizes()));
    return dst_arg;
  }
  // copy_ leaves these checks to the device's _copy_from (its TensorIterator does them on
  // the CPU): a partial overlap would be a memmove here, not the CPU's error.
  if (self.is_privateuseone() && dst_arg.is_privateuseone()) {
    at::assert_no_internal_overlap(dst_arg);
    at::assert_no_partial_overlap(dst_arg, self);
  }
  at::Tensor src = self, dst = dst_arg;
  move_lazy_bits_to_source(src, dst);
  if (src.is_privateuseone()) src = resolve_lazy_bits_on_device(src);
  const bool src_dev = src.is_privateuseone();
  const bool dst_dev = dst.is_privateuseone();
  if (src_dev && dst_dev) {
    device_to_device(dst, src);
  } else if (dst_dev) {
    TORCH_CHECK(src.is_cpu(), "neuron: cannot copy from ", src.device(), " to ", dst.device());
    host_to_device(dst, src);
  } else {
    TORCH_CHECK(dst.is_cpu(), "neuron: cannot copy from ", src.device(), " to ", dst.device());
    device_to_host(dst, src);
  }
  return dst_arg;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  capture_unsupported("a device value read on the host (.item())");
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  ONRT_CHECK(onrt_memcpy(host.data_ptr(), self.const_data_ptr(), self.element_size(),
                         ONRT_COPY_DEVICE_TO_HOST, current_runtime_stream(self.device().index())));
  return host.item();
}

// -------------------------------------------------------- fills, factories

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  // The CPU's overflow check (Scalar::to): filling int8 with 200 raises, uint8 with -1 wraps.
  AT_DISPATCH_V2(self.scalar_type(), "fill_", AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), c10::kComplexHalf, c10::kHalf, c10::kBool,
                 c10::kBFloat16, AT_EXPAND(AT_FLOAT8_TYPES),
                 AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  launch(Op::Fill, {scalar_operand(value, self.scalar_type())}, {tensor_operand(self)});
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  if (value.is_privateuseone()) {
    copy_on_device(self, value);
    return self;
  }
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                       at::Tensor& out) {
  // ATen's own checks and size: only int64 counts its length from the bounds converted to
  // the integer type (arange(0, 2.5, 1.2, dtype=int64) is arange(0, 2, 1)); the other
  // types count it from the real bounds (arange(0, 3.1, dtype=int16) has 4 elements).
  const int64_t size = out.scalar_type() == c10::kLong
                           ? at::native::compute_arange_size<int64_t>(start, end, step)
                           : at::native::compute_arange_size<double>(start, end, step);
  // Integer results take start and step in the integer type (a step of 0.5 repeats start).
  const bool integral = c10::isIntegralType(out.scalar_type(), true);
  const double xstart = start.toDouble(), xstep = step.toDouble();
  if (out.numel() != size) {  // the CPU's warning and resize (RangeFactories)
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                 out.numel(), " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will "
                 "be resized to a tensor of shape (",
                 size, ",).");
    }
    out.resize_({size});
  }
  if (size == 0) return out;
  at::Tensor target =
      out.is_contiguous() ? out : empty_device({size}, out.scalar_type(), out.device());
  launch(Op::Arange,
         {integral ? int_operand(start.toLong()) : float_operand(xstart),
          integral ? int_operand(step.toLong()) : float_operand(xstep)},
         {tensor_operand(target)});
  // An out of the right size keeps its shape and strides: the values go in its logical order.
  if (!target.is_same(out)) copy_on_device(out, target.view(out.sizes()));
  return out;
}

// cat: slices of the result copied from each input (dtype converted on the way).
at::DimVector cat_shape(const std::vector<std::reference_wrapper<const Tensor>>& ts, int64_t& dim,
                        const Tensor*& ref) {
  TORCH_CHECK(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
  auto skip = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  ref = nullptr;
  for (const Tensor& t : ts)
    if (!skip(t)) {
      ref = &t;
      break;
    }
  if (ref == nullptr) return {0};
  TORCH_CHECK(ref->dim() > 0, "zero-dimensional tensor (at position 0) cannot be concatenated");
  dim = c10::maybe_wrap_dim(dim, ref->dim());
  at::DimVector shape(ref->sizes().begin(), ref->sizes().end());
  shape[dim] = 0;
  int64_t i = 0;
  for (const Tensor& t : ts) {
    if (!skip(t)) {
      TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ",
                  ref->dim(), " and ", t.dim());
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (d == dim) continue;
        TORCH_CHECK(t.size(d) == ref->size(d), "Sizes of tensors must match except in dimension ",
                    dim, ". Expected size ", ref->size(d), " but got size ", t.size(d),
                    " for tensor number ", i, " in the list.");
      }
      shape[dim] += t.size(dim);
    }
    ++i;
  }
  return shape;
}

void cat_into(const std::vector<std::reference_wrapper<const Tensor>>& ts, int64_t dim,
              const Tensor& out) {
  int64_t off = 0;
  for (const Tensor& t : ts) {
    // An empty input adds nothing: a legacy [0] tensor is skipped, and an empty one of
    // out's rank would leave out empty too.
    if (t.numel() == 0) continue;
    copy_on_device(out.narrow(dim, off, t.size(dim)), t);
    off += t.size(dim);
  }
}

c10::Device cat_device(const std::vector<std::reference_wrapper<const Tensor>>& ts) {
  std::optional<c10::Device> device;
  for (const Tensor& t : ts) c10::impl::check_and_update_common_device(device, t, "cat", "tensors");
  return *device;
}

// The result's memory format, as the CPU's cat chooses it: the inputs' (legacy empty ones
// aside) when they all suggest the same one, else contiguous.
at::MemoryFormat cat_memory_format(const std::vector<std::reference_wrapper<const Tensor>>& ts) {
  std::optional<at::MemoryFormat> format;
  for (const Tensor& t : ts) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    const at::MemoryFormat f = t.suggest_memory_format();
    if (format.has_value() && *format != f) return at::MemoryFormat::Contiguous;
    format = f;
  }
  return format.value_or(at::MemoryFormat::Contiguous);
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  auto ts = tensors.materialize();
  const Tensor* ref;
  const auto shape = cat_shape(ts, dim, ref);
  const c10::Device device = cat_device(ts);
  const auto dtype = at::native::result_type(tensors);
  Tensor out = empty_in_format(shape, dtype, device, cat_memory_format(ts));
  cat_into(ts, dim, out);
  return out;
}

Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  auto ts = tensors.materialize();
  const Tensor* ref;
  const auto shape = cat_shape(ts, dim, ref);
  check_out_device(out, cat_device(ts), "cat");
  TORCH_CHECK_TYPE(c10::canCast(at::native::result_type(tensors), out.scalar_type()),
                   "torch.cat(): input types can't be cast to the desired output type ",
                   out.scalar_type());
  at::assert_no_internal_overlap(out);  // the CPU's cat checks, before any size
  for (const Tensor& t : ts) at::assert_no_overlap(out, t);
  if (at::native::resize_output(out, shape)) {
    const auto strides = memory_format_strides(shape, cat_memory_format(ts));
    if (!strides.empty()) out.as_strided_(shape, strides);
  }
  cat_into(ts, dim, out);
  return out;
}

// Tensor.record_stream: the caching allocator hands the block out again only
// after the work queued on `stream` so far has run (torch.cuda's semantics).
void record_stream(Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a neuron stream, got ", stream);
  TORCH_CHECK(stream.device_index() == self.device().index(), "record_stream: ", stream,
              " is on another core than the tensor (", self.device(), ")");
  c10::getDeviceAllocator(c10::DeviceType::PrivateUse1)
      ->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

// Copies resolve conjugate/negative bits themselves (copy_from above). Without
// these fallthroughs, the bits' fallback materialises the source with clone(),
// which calls copy_ -> _copy_from again: unbounded recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_.source_Storage", set_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("record_stream", record_stream);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("arange.start_out", arange_out);
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
}

}  // namespace openneuron::bridge
