// Native ops every device needs: allocation, views, copies between host and
// device and between cores, scalars, fills, factories and random sampling.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <torch/library.h>

#include <atomic>

#include "bridge.h"
#include "engine.h"
#include "native_ops.h"

namespace openneuron::bridge {

using compiler::Op;

c10::ScalarType narrow_dtype(c10::ScalarType t) {
  if (t != c10::kDouble && t != c10::kComplexDouble) return t;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    TORCH_WARN(
        "neuron: float64 is not a device type; float64 data is stored and computed as float32 "
        "(complex128 as complex64) on neuron. This warning is shown once.");
  }
  return t == c10::kDouble ? c10::kFloat : c10::kComplexFloat;
}

namespace {

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron supports only the strided layout, got ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is a CPU property");
}

c10::Device checked_device(std::optional<c10::Device> device_opt) {
  c10::Device device = c10::device_or_default(device_opt);
  TORCH_INTERNAL_ASSERT(device.is_privateuseone());
  if (!device.has_index()) device = c10::Device(device.type(), current_device());
  check_device_index(device.index());
  ensure_initialized();
  return device;
}

// FP8 is a trn3 feature (DESIGN.md): on other platform profiles creating a
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
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
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
  return at::detail::empty_strided_generic(size, stride,
                                           c10::GetAllocator(c10::DeviceType::PrivateUse1), ks,
                                           device_dtype(dtype, dev));
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

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> storage_offset) {
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
  const size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                         self.element_size(),
                                                         self.storage_offset());
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
  at::Tensor host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  host = host.resolve_conj().resolve_neg();
  const c10::DeviceIndex dev = dst.device().index();
  at::Tensor target = is_dense_contiguous(dst) ? dst : empty_device(dst.sizes(), dst.scalar_type(),
                                                                     dst.device());
  ONRT_CHECK(onrt_memcpy(target.data_ptr(), host.const_data_ptr(), host.nbytes(),
                         ONRT_COPY_HOST_TO_DEVICE, current_runtime_stream(dev)));
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

void device_to_host(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceIndex dev = src.device().index();
  at::Tensor dense = is_dense_contiguous(src) ? src : [&] {
    at::Tensor t = empty_device(src.sizes(), src.scalar_type(), src.device());
    copy_on_device(t, src);
    return t;
  }();
  const bool direct = dst.scalar_type() == src.scalar_type() && dst.is_contiguous() &&
                      dst.sizes() == src.sizes();
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
  at::Tensor dense = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  at::Tensor target = is_dense_contiguous(dst) ? dst : empty_device(dst.sizes(), dst.scalar_type(),
                                                                     dst.device());
  // The source core's queued work must finish before its bytes are read.
  ONRT_CHECK(onrt_stream_synchronize(current_runtime_stream(src.device().index())));
  ONRT_CHECK(onrt_memcpy(target.data_ptr(), dense.const_data_ptr(), dense.nbytes(),
                         ONRT_COPY_DEVICE_TO_DEVICE,
                         current_runtime_stream(dst.device().index())));
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

// Conjugate and negative views are lazy bits on the tensor, not data: the
// engines copy raw values, so such sources are resolved on the host.
bool has_lazy_bits(const at::Tensor& t) { return t.is_conj() || t.is_neg(); }

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  if (dst.numel() == 0) return dst;
  if (self.is_privateuseone() && has_lazy_bits(self)) {
    const bool conj = self.is_conj(), neg = self.is_neg();
    at::Tensor raw = self;
    if (conj) raw = raw.conj();  // drops the bit: a view of the physical values
    if (neg) raw = at::_neg_view(raw);
    at::Tensor host = at::empty(raw.sizes(), raw.options().device(at::kCPU));
    device_to_host(host, raw);
    if (neg) host = host.neg();
    if (conj) host = host.conj_physical();
    if (dst.is_privateuseone()) {
      host_to_device(dst, host);
    } else {
      dst.copy_(host);
    }
    return dst;
  }
  const bool src_dev = self.is_privateuseone();
  const bool dst_dev = dst.is_privateuseone();
  if (src_dev && dst_dev) {
    device_to_device(dst, self);
  } else if (dst_dev) {
    TORCH_CHECK(self.is_cpu(), "neuron: cannot copy from ", self.device(), " to ", dst.device());
    host_to_device(dst, self);
  } else {
    TORCH_CHECK(dst.is_cpu(), "neuron: cannot copy from ", self.device(), " to ", dst.device());
    device_to_host(dst, self);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  ONRT_CHECK(onrt_memcpy(host.data_ptr(), self.const_data_ptr(), self.element_size(),
                         ONRT_COPY_DEVICE_TO_HOST,
                         current_runtime_stream(self.device().index())));
  return host.item();
}

// -------------------------------------------------------- fills, factories

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
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
  // Size computation and checks follow ATen's arange exactly.
  const double xstart = start.toDouble(), xend = end.toDouble(), xstep = step.toDouble();
  TORCH_CHECK(xstep > 0 || xstep < 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(xstart) && std::isfinite(xend), "unsupported range: ", xstart, " -> ",
              xend);
  TORCH_CHECK(((xstep > 0) && (xend >= xstart)) || ((xstep < 0) && (xend <= xstart)),
              "upper bound and larger bound inconsistent with step sign");
  // Like ATen, integral results take the bounds in the integer type first
  // (arange(0, 2.5, 1.2, dtype=int64) is arange(0, 2, 1)), but only int64 also
  // counts its length that way: the narrower integer types count it from the
  // real bounds (arange(0, 3.1, dtype=int16) has 4 elements).
  const bool integral = c10::isIntegralType(out.scalar_type(), true);
  int64_t size;
  if (integral && out.scalar_type() == c10::kLong) {
    const int64_t s = start.toLong(), e = end.toLong(), st = step.toLong();
    TORCH_CHECK(st != 0, "step must be nonzero");
    size = static_cast<int64_t>(std::ceil(static_cast<double>(e - s) / static_cast<double>(st)));
    size = std::max<int64_t>(size, 0);
  } else {
    TORCH_CHECK(!integral || step.toLong() != 0, "step must be nonzero");
    size = static_cast<int64_t>(std::ceil((xend - xstart) / xstep));
  }
  if (out.numel() != size) at::native::resize_output(out, {size});
  if (size == 0) return out;
  at::Tensor target = out.is_contiguous() ? out : empty_device({size}, out.scalar_type(), out.device());
  launch(Op::Arange,
         {integral ? int_operand(start.toLong()) : float_operand(xstart),
          integral ? int_operand(step.toLong()) : float_operand(xstep)},
         {tensor_operand(target)});
  if (!target.is_same(out)) copy_on_device(out, target);
  return out;
}

// RNG: the generator hands out disjoint Philox counter ranges.
std::pair<Operand, Operand> philox(const at::Tensor& self, std::optional<at::Generator> gen) {
  auto [seed, offset] = philox_reserve(gen, self.device().index(), self.numel());
  return {int_operand(static_cast<int64_t>(seed)), int_operand(static_cast<int64_t>(offset))};
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  if (self.numel() == 0) return self;
  auto [seed, offset] = philox(self, gen);
  launch(Op::Uniform, {seed, offset, float_operand(from), float_operand(to)},
         {tensor_operand(self)});
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() == 0) return self;
  auto [seed, offset] = philox(self, gen);
  launch(Op::Normal, {seed, offset, float_operand(mean), float_operand(std)},
         {tensor_operand(self)});
  return self;
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  auto [seed, offset] = philox(self, gen);
  launch(Op::Bernoulli, {seed, offset, float_operand(p)}, {tensor_operand(self)});
  return self;
}

at::Tensor& random_from_to(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                           std::optional<at::Generator> gen) {
  int64_t hi;
  if (to.has_value()) {
    hi = *to;
  } else if (c10::isFloatingType(self.scalar_type())) {
    hi = int64_t(1) << std::numeric_limits<float>::digits;
  } else {
    hi = std::numeric_limits<int64_t>::max();
  }
  TORCH_CHECK(from < hi, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", hi);
  if (self.numel() == 0) return self;
  auto [seed, offset] = philox(self, gen);
  launch(Op::RandInt, {seed, offset, int_operand(from), int_operand(hi)}, {tensor_operand(self)});
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_to(self, 0, to, std::move(gen));
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  int64_t hi;
  switch (self.scalar_type()) {
    case c10::kBool: hi = 2; break;
    case c10::kByte: hi = 256; break;
    case c10::kChar: hi = 128; break;
    case c10::kShort: hi = 1 << 15; break;
    case c10::kInt: hi = int64_t(1) << 31; break;
    case c10::kLong: hi = std::numeric_limits<int64_t>::max(); break;
    case c10::kBFloat16: hi = 1 << 8; break;
    case c10::kHalf: hi = 1 << 11; break;
    default: hi = int64_t(1) << 24; break;
  }
  return random_from_to(self, 0, hi, std::move(gen));
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

// One line per op.
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
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("arange.start_out", arange_out);
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("random_.from", random_from_to);
  m.impl("random_.to", random_to);
  m.impl("random_", random_);
}

}  // namespace openneuron::bridge
