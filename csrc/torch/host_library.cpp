// Host library kernels: ops with no lowering of our own run PyTorch's own CPU
// kernel in place on device memory.
//
// A virtual NeuronCore's memory is host memory (onrt_device_properties.host_mapped),
// so an op without a native lowering does not need the CPU fallback's copy-out and
// copy-back: once the current stream has drained, the CPU kernel runs over CPU
// tensors that alias the device tensors' bytes. In-place and out= results land in
// device memory directly, views map back onto the device storage, and only fresh
// outputs are copied once into device memory. The kernel runs on the calling thread
// (PyTorch's intra-op pool, never oversubscribing the engines' pool) in stream order.
//
// Where host code cannot address device memory (OPENNEURON_PROTECT_MEMORY=1, or
// a real device), each device storage the op touches is copied to the host
// whole instead, and copied back if the op writes it: slower, same semantics.
//
// Such ops are counted per op (openneuron.library_stats()) and reported as
// "native (library)" by the conformance harness, apart from our own lowerings.
// Random ops get a CPU generator seeded from the device generator (see
// host_generator). Tensors on two devices (CPU scalars excepted) raise PyTorch's
// device-mismatch error. Calls this cannot run in place take the CPU fallback
// (fallback.cpp), warned about and counted as before: a CPU generator given to a
// device op, host tensors where PyTorch allows them (x[cpu_index]), and ops that
// change storages.
// OPENNEURON_HOST_LIBRARY=0 sends every such op to the CPU fallback instead.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "bridge.h"
#include "graph_capture.h"
#include "native_ops.h"

namespace openneuron::bridge {
namespace {

bool library_enabled() {
  const char* v = std::getenv("OPENNEURON_HOST_LIBRARY");
  return v == nullptr || std::string_view(v) != "0";
}

bool host_mapped(c10::DeviceIndex index) {
  onrt_device_properties p{};
  return onrt_device_get_properties(index, &p) == ONRT_OK && p.host_mapped != 0;
}

// Ops whose meaning is about storages or devices rather than values: aliasing
// would change what they do.
bool changes_storage(const std::string& name) {
  for (std::string_view prefix : {"aten::set_", "aten::resize", "aten::_copy_from",
                                  "aten::_pin_memory", "aten::is_pinned", "aten::record_stream"}) {
    if (std::string_view(name).substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// Ops that take host tensors beside device ones, as on CUDA (indices of x[i]).
bool accepts_host_tensors(const std::string& name) {
  return name.rfind("aten::index", 0) == 0 || name.rfind("aten::_index_put_impl_", 0) == 0;
}

// t's geometry on `storage`, a host storage standing for t's device storage.
at::Tensor host_alias_on(const at::Tensor& t, c10::Storage storage) {
  at::Tensor h = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  h.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  h._set_conj(t.is_conj());
  h._set_neg(t.is_neg());
  return h;
}

}  // namespace

// A CPU tensor over the same bytes as device tensor `t`, with t's geometry. Its
// storage spans t's whole device storage so views returned by the CPU kernel can
// be mapped back; it is resizable through the CPU allocator so an out= argument
// the kernel must grow gets host memory, which is then written back.
at::Tensor host_alias(const at::Tensor& t) {
  const c10::Storage& s = t.storage();
  return host_alias_on(t, c10::Storage(c10::Storage::use_byte_size_t(), s.nbytes(),
                                       c10::DataPtr(s.mutable_data(), c10::Device(c10::kCPU)),
                                       c10::GetCPUAllocator(), /*resizable=*/true));
}

namespace {

struct Alias {
  at::Tensor device;
  at::Tensor host;
  const void* bytes;  // the host storage's bytes as given, to tell whether they moved
  bool staged;        // the host storage is a copy of the device one, not an alias
  bool written;       // an argument the op writes (schema alias info)
};

// A host copy of t's whole device storage with t's geometry: the host library's
// stand-in for an alias where host code cannot address the device's memory.
at::Tensor host_copy_of(const at::Tensor& t) {
  const c10::Storage& s = t.storage();
  c10::Allocator* cpu = c10::GetCPUAllocator();
  c10::Storage h(c10::Storage::use_byte_size_t(), s.nbytes(), cpu->allocate(s.nbytes()), cpu,
                 /*resizable=*/true);
  if (s.nbytes() > 0) {
    ONRT_CHECK(onrt_memcpy(h.mutable_data(), s.data(), s.nbytes(), ONRT_COPY_DEVICE_TO_HOST,
                           current_runtime_stream(t.device().index())));
  }
  return host_alias_on(t, std::move(h));
}

// The arguments of one call, rewritten to host aliases.
class AliasedCall {
 public:
  explicit AliasedCall(const std::string& op_name) : op_name_(op_name) {}

  // Rewrites the arguments in place; false when one rules out running in place.
  bool alias_arguments(const c10::FunctionSchema& schema, torch::jit::Stack* stack, size_t first) {
    std::vector<size_t> generators;
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const c10::AliasInfo* info = schema.arguments()[i].alias_info();
      writing_ = info != nullptr && info->isWrite();
      if (is_generator(schema.arguments()[i].real_type())) {
        generators.push_back(first + i);
      } else if (!alias_value((*stack)[first + i])) {
        return false;
      }
    }
    if (device_ < 0) return false;
    for (size_t i : generators) {
      if (!host_generator((*stack)[i])) return false;
    }
    if (other_device_.has_value()) {
      if (accepts_host_tensors(op_name_)) return false;  // e.g. x[cpu_index]: the fallback
      mismatch(*other_device_);
    }
    return true;
  }

  c10::DeviceIndex device() const { return device_; }

  // Results of in-place and out= arguments back into the device tensors: in
  // place when the kernel kept the bytes, else (an out= it had to grow) copied.
  void write_back() {
    copy_back_staged();
    for (Alias& a : aliases_) {
      c10::TensorImpl* dev = a.device.unsafeGetTensorImpl();
      const at::Tensor& h = a.host;
      if (h.storage().data() == a.bytes) {
        if (h.sizes() != a.device.sizes() || h.strides() != a.device.strides() ||
            h.storage_offset() != a.device.storage_offset()) {
          dev->set_sizes_and_strides(h.sizes(), h.strides(), h.storage_offset());
        }
        // Kernels may finish with a lazy conjugate (linalg_lu_solve flips the
        // out tensor's conj bit): the bits are part of the result.
        if (h.is_conj() != a.device.is_conj()) dev->_set_conj(h.is_conj());
        if (h.is_neg() != a.device.is_neg()) dev->_set_neg(h.is_neg());
        continue;
      }
      a.device.resize_(h.sizes());
      if (a.device.strides() != h.strides() && h.is_non_overlapping_and_dense()) {
        a.device.as_strided_(h.sizes(), h.strides());
      }
      a.device.copy_(h);
    }
  }

  // Staged storages an argument the op writes lives in go back whole to the
  // device (once each: views of one storage share one host copy); ones the
  // kernel moved (an out= it grew) are copied below like aliased ones.
  void copy_back_staged() {
    std::vector<const void*> done;
    for (const Alias& a : aliases_) {
      if (!a.staged || a.host.storage().data() != a.bytes) continue;
      bool written = false;
      for (const Alias& b : aliases_) written = written || (b.written && b.bytes == a.bytes);
      if (!written || std::find(done.begin(), done.end(), a.bytes) != done.end()) continue;
      done.push_back(a.bytes);
      const c10::Storage& d = a.device.storage();
      if (d.nbytes() == 0) continue;
      ONRT_CHECK(onrt_memcpy(d.mutable_data(), a.bytes, d.nbytes(), ONRT_COPY_HOST_TO_DEVICE,
                             current_runtime_stream(device_)));
    }
  }

  // A value the CPU kernel returned, as the device value it stands for.
  c10::IValue to_device(const c10::IValue& v) {
    if (v.isTensor()) return to_device(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(to_device(t));
      return out;
    }
    return v;
  }

 private:
  static bool is_generator(const c10::TypePtr& type) {
    if (type->kind() == c10::TypeKind::OptionalType) {
      return is_generator(type->castRaw<c10::OptionalType>()->getElementType());
    }
    return type->kind() == c10::TypeKind::GeneratorType;
  }

  // Random ops draw from the device's generator, not the CPU's: the CPU kernel
  // gets a CPU generator seeded from a Philox reservation of the device
  // generator (the user's, or the device default), so results follow
  // torch.manual_seed and each call advances the device generator.
  bool host_generator(c10::IValue& v) {
    std::optional<at::Generator> gen;
    if (!v.isNone()) {
      gen = v.toGenerator();
      if (gen->device().type() != c10::DeviceType::PrivateUse1) return false;
    }
    const auto [seed, offset] = philox_reserve(gen, device_, /*increment=*/4);
    v = at::make_generator<at::CPUGeneratorImpl>(seed ^ (offset * 0x9E3779B97F4A7C15ULL));
    return true;
  }

  bool alias_value(c10::IValue& v) {
    if (v.isTensor()) return alias_tensor(v, v.toTensor());
    if (v.isDevice()) return host_device(v);
    if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      c10::List<at::Tensor> hosts;
      hosts.reserve(list.size());
      for (const at::Tensor& t : list) {
        c10::IValue e(t);
        if (!alias_tensor(e, t)) return false;
        hosts.push_back(e.toTensor());
      }
      v = hosts;
      return true;
    }
    if (v.isList() && is_optional_tensor_list(v.toList())) {  // Tensor?[] (indices)
      c10::List<c10::IValue> list = v.toList();
      c10::impl::GenericList hosts(list.elementType());
      for (const c10::IValue& e : list) {
        c10::IValue copy = e;
        if (copy.isTensor() && !alias_tensor(copy, e.toTensor())) return false;
        hosts.push_back(copy);
      }
      v = hosts;
    }
    return true;
  }

  // A factory's device argument: the CPU kernel builds the result on the host,
  // then it is copied once to the named device, like any fresh output.
  bool host_device(c10::IValue& v) {
    const c10::Device d = v.toDevice();
    if (!d.is_privateuseone()) return false;
    const c10::DeviceIndex index = d.has_index() ? d.index() : current_device();
    if (device_ >= 0 && index != device_) mismatch(c10::Device(d.type(), index));
    device_ = index;
    v = c10::Device(c10::kCPU);
    return true;
  }

  static bool is_optional_tensor_list(const c10::List<c10::IValue>& list) {
    const c10::TypePtr& t = list.elementType();
    return t->kind() == c10::TypeKind::OptionalType &&
           t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  }

  bool alias_tensor(c10::IValue& slot, const at::Tensor& t) {
    if (!t.defined()) return true;
    if (t.is_cpu() && t.dim() == 0) return true;  // wrapped scalars are fine as they are
    if (t.layout() != c10::kStrided) return false;
    if (!t.is_privateuseone()) {
      other_device_ = t.device();  // an error once a neuron tensor is seen too
      return true;
    }
    const c10::DeviceIndex index = t.device().index();
    if (device_ >= 0 && index != device_) mismatch(t.device());
    if (device_ < 0) staged_ = !host_mapped(index);
    device_ = index;
    for (Alias& a : aliases_) {  // the same tensor twice shares one alias
      if (a.device.is_same(t)) {
        a.written = a.written || writing_;
        slot = a.host;
        return true;
      }
    }
    // Views of one device storage share one host storage, so the CPU kernel's
    // own overlap checks (put_, index_put_, ...) see that they alias.
    at::Tensor h;
    for (const Alias& a : aliases_) {
      if (a.device.storage().is_alias_of(t.storage())) {
        h = host_alias_on(t, a.host.storage());
        break;
      }
    }
    if (!h.defined()) h = staged_ ? host_copy_of(t) : host_alias(t);
    aliases_.push_back({t, h, h.storage().data(), staged_, writing_});
    slot = h;
    return true;
  }

  at::Tensor to_device(const at::Tensor& r) {
    if (!r.defined() || !r.is_cpu()) return r;
    // A sparse result (embedding_bag's sparse gradient) has no storage to alias: its
    // indices and values are copied to the device (ops_sparse.cpp); a quantized one
    // moves with its quantizer (ops_quantized.cpp).
    if (r.is_sparse() || r.is_quantized()) {
      return r.to(c10::Device(c10::DeviceType::PrivateUse1, device_));
    }
    for (const Alias& a : aliases_) {
      if (r.is_same(a.host)) return a.device;
    }
    for (const Alias& a : aliases_) {  // a view of an argument: the same view on device
      if (r.storage().is_alias_of(a.host.storage()) && r.storage().data() == a.bytes) {
        at::Tensor v = at::detail::make_tensor<c10::TensorImpl>(
            c10::TensorImpl::VIEW, c10::Storage(a.device.storage()), a.device.key_set(),
            r.dtype());
        v.unsafeGetTensorImpl()->set_sizes_and_strides(r.sizes(), r.strides(),
                                                       r.storage_offset());
        v._set_conj(r.is_conj());
        v._set_neg(r.is_neg());
        return v;
      }
    }
    const c10::Device dev(c10::DeviceType::PrivateUse1, device_);
    const auto options = r.options().device(dev).dtype(narrow_dtype(r.scalar_type()));
    at::Tensor out = r.is_non_overlapping_and_dense()
                         ? at::empty_strided(r.sizes(), r.strides(), options)
                         : at::empty(r.sizes(), options);
    out.copy_(r);
    return out;
  }

  // An op given tensors on two devices fails as on any PyTorch device, instead
  // of the fallback quietly moving them (CPU scalars excepted).
  [[noreturn]] void mismatch(c10::Device a, c10::Device b) const {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                "devices, ", a, " and ", b, "!");
  }
  [[noreturn]] void mismatch(c10::Device other) const {
    mismatch(c10::Device(c10::DeviceType::PrivateUse1, device_), other);
  }

  const std::string& op_name_;
  std::vector<Alias> aliases_;
  c10::DeviceIndex device_ = -1;
  bool staged_ = false;   // host code cannot address the device's memory (host_copy_of)
  bool writing_ = false;  // the argument being aliased is one the op writes
  std::optional<c10::Device> other_device_;
};

}  // namespace

void host_copy(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceIndex index = dst.device().index();
  capture_unsupported("a copy the device cannot convert (run on the host)");
  if (!host_mapped(index)) {
    // Staged: converted on the host between two copies of one dtype each,
    // which the copy engine covers.
    dst.copy_(src.cpu().to(dst.scalar_type()));
    return;
  }
  ONRT_CHECK(onrt_stream_synchronize(current_runtime_stream(index)));
  host_alias(dst).copy_(host_alias(src));
}

bool try_host_library_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!library_enabled()) return false;
  const c10::FunctionSchema& schema = op.schema();
  const std::string name = op_name(op);
  if (changes_storage(name)) return false;
  const size_t num_args = schema.arguments().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_args);
  const size_t first = stack->size() - num_args;

  // Rewrite a copy of the arguments: if any rules out running in place, the
  // caller's stack is untouched for the CPU fallback.
  const c10::OperatorHandle* target = &op;
  if (name == "aten::convolution_overrideable") {
    // The backend hook of aten::convolution, which the CPU has no kernel for:
    // the same arguments run the CPU's own convolution.
    static const c10::OperatorHandle convolution =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
    target = &convolution;
  }
  const bool conv_backward = name == "aten::convolution_backward_overrideable";
  if (conv_backward) {
    static const c10::OperatorHandle convolution_backward =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
    target = &convolution_backward;
  }
  torch::jit::Stack args(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  AliasedCall call(name);
  if (!call.alias_arguments(schema, &args, 0)) return false;

  if (conv_backward) {
    // convolution_backward also takes the bias sizes: [output channels].
    const at::Tensor& weight = args[2].toTensor();
    const bool transposed = args[6].toBool();
    const int64_t groups = args[8].toInt();
    const int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
    args.insert(args.begin() + 3, c10::IValue(std::vector<int64_t>{channels}));
  }
  capture_unsupported("a host library kernel (PyTorch's CPU kernel on device memory)");
  const auto start = std::chrono::steady_clock::now();
  ONRT_CHECK(onrt_stream_synchronize(current_runtime_stream(call.device())));
  target->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &args);
  call.write_back();
  const int64_t elapsed =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();

  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  for (const c10::IValue& r : args) stack->push_back(call.to_device(r));
  library_calls().add(name);
  library_calls().add_cost(name, elapsed, 0, 0);
  return true;
}

const c10::OperatorHandle& aten_operator(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, c10::OperatorHandle> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(name);
  if (it == handles.end()) {
    const size_t dot = name.find('.');
    const std::string base = "aten::" + name.substr(0, dot);
    const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
    it = handles
             .emplace(name, c10::Dispatcher::singleton().findSchemaOrThrow(base.c_str(),
                                                                          overload.c_str()))
             .first;
  }
  return it->second;
}

}  // namespace openneuron::bridge
