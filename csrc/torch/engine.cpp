#include "engine.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <atomic>

#include "bridge.h"
#include "graph_capture.h"
#include "op_checks.h"
#include "openneuron/compiler/capture.h"
#include "openneuron/compiler/compiler.h"

namespace openneuron::bridge {

DType to_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kBool:
      return DType::Bool;
    case c10::kByte:
      return DType::UInt8;
    case c10::kChar:
      return DType::Int8;
    case c10::kShort:
      return DType::Int16;
    case c10::kInt:
      return DType::Int32;
    case c10::kLong:
      return DType::Int64;
    case c10::kHalf:
      return DType::Float16;
    case c10::kBFloat16:
      return DType::BFloat16;
    case c10::kFloat:
      return DType::Float32;
    case c10::kDouble:
      return DType::Float64;
    case c10::kComplexFloat:
      return DType::Complex64;
    case c10::ScalarType::Float8_e4m3fn:
      return DType::Float8E4M3;
    case c10::ScalarType::Float8_e5m2:
      return DType::Float8E5M2;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: dtype ", t, " has no device representation");
  }
}

TensorType tensor_type(const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(t.dim() <= kMaxDims, "neuron: tensors of more than ", kMaxDims,
                              " dimensions are not supported by the engines (got ", t.dim(), ")");
  TensorType tt;
  tt.dtype = to_dtype(t.scalar_type());
  tt.ndim = static_cast<int32_t>(t.dim());
  for (int i = 0; i < tt.ndim; ++i) {
    tt.sizes[i] = t.size(i);
    tt.strides[i] = t.stride(i);
  }
  return tt;
}

Operand tensor_operand(const at::Tensor& t) {
  Operand o{compiler::ValueType::of(tensor_type(t))};
  o.arg.ptr = t.numel() == 0 ? nullptr : const_cast<void*>(t.const_data_ptr());
  o.device = t.device().index();
  o.keep = t;
  return o;
}
Operand float_operand(double v) {
  Operand o{compiler::ValueType::scalar_float()};
  o.arg.f = v;
  return o;
}
Operand int_operand(int64_t v) {
  Operand o{compiler::ValueType::scalar_int()};
  o.arg.i = v;
  return o;
}
Operand none_operand() { return Operand{compiler::ValueType::none()}; }
double real_scalar(const c10::Scalar& s) {
  TORCH_CHECK_NOT_IMPLEMENTED(!s.isComplex(), "neuron engines take real scalars, got ", s);
  return s.toDouble();
}
Operand scalar_operand(const c10::Scalar& s, c10::ScalarType compute) {
  // Any nonzero value is true, inf and nan included (toLong would reject them).
  if (compute == c10::kBool) return int_operand(s.toBool() ? 1 : 0);
  if (c10::isIntegralType(compute, /*includeBool=*/false)) return int_operand(s.toLong());
  return float_operand(real_scalar(s));
}

void decline_half_types(c10::ScalarType compute, const char* what) {
  TORCH_CHECK_NOT_IMPLEMENTED(compute != c10::kHalf && compute != c10::kBFloat16, "neuron: ", what,
                              " in ", compute, " runs PyTorch's CPU kernel");
}

namespace {

// The one way a program reaches a stream: compiled (or found in the cache), given its
// scratch memory, launched on `device`'s current stream. args has room for the scratch
// pointer after the n operands.
void launch_graph(const compiler::Graph& graph, onrt_arg* args, int n, c10::DeviceIndex device) {
  std::shared_ptr<const compiler::Program> program;
  try {
    program = compiler::ProgramCache::global().get_or_compile(graph);
  } catch (const compiler::CompileError& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron compiler: ", e.what());
  }
  if (device < 0) device = current_device();
  if (compiler::CaptureBuilder* capture = active_capture()) capture->record(graph, args, n);
  // Freed (stream-ordered) when this returns: the launch is queued before it.
  at::Tensor scratch;
  if (program->scratch_bytes > 0) {
    scratch = empty_device({static_cast<int64_t>(program->scratch_bytes)}, c10::kByte,
                           c10::Device(c10::DeviceType::PrivateUse1, device));
    args[n++].ptr = scratch.data_ptr();
  }
  ONRT_CHECK(onrt_program_launch(current_runtime_stream(device), program->handle, args, n));
}

}  // namespace

void launch(compiler::Op op, std::span<const Operand> inputs, std::span<const Operand> outputs,
            std::vector<int64_t> attrs) {
  constexpr size_t kMaxArgs = 32;  // a single op's operands, plus the scratch pointer
  TORCH_INTERNAL_ASSERT(inputs.size() + outputs.size() < kMaxArgs);
  std::vector<compiler::ValueType> types;
  types.reserve(inputs.size() + outputs.size());
  onrt_arg args[kMaxArgs];
  int n = 0;
  for (const auto* list : {&inputs, &outputs}) {
    for (const Operand& o : *list) {
      types.push_back(o.type);
      args[n++] = o.arg;
    }
  }
  const auto graph =
      compiler::Graph::single_op(op, types, static_cast<int>(inputs.size()), std::move(attrs));
  // The device is the one holding the first output (outputs are always device tensors).
  launch_graph(graph, args, n, outputs.front().device);
}

compiler::ValueId ProgramBuilder::input(Operand o) {
  const compiler::ValueId v = graph_.add_input(o.type);
  inputs_.push_back(std::move(o));
  return v;
}

compiler::ValueId ProgramBuilder::output(const at::Tensor& t) {
  Operand o = tensor_operand(t);
  const compiler::ValueId v = graph_.add_value(o.type);
  graph_.mark_output(v);
  outputs_.push_back(std::move(o));
  return v;
}

void ProgramBuilder::node(compiler::Op op, std::vector<compiler::ValueId> ins,
                          std::vector<compiler::ValueId> outs, std::vector<int64_t> attrs) {
  graph_.add_node(op, std::move(ins), std::move(outs), std::move(attrs));
}

void ProgramBuilder::run() {
  if (empty()) return;
  std::vector<onrt_arg> args;
  args.reserve(inputs_.size() + outputs_.size() + 1);
  for (const Operand& o : inputs_) args.push_back(o.arg);
  for (const Operand& o : outputs_) args.push_back(o.arg);
  const int n = static_cast<int>(args.size());
  args.emplace_back();  // room for the scratch pointer
  launch_graph(graph_, args.data(), n, outputs_.empty() ? -1 : outputs_.front().device);
}

std::pair<Operand, Operand> reserve_philox(c10::Device device,
                                           const std::optional<at::Generator>& gen, compiler::Op op,
                                           std::initializer_list<int64_t> dims) {
  // A CPU generator's stream of numbers is defined by the CPU kernels: the call declines
  // (before anything is written) and the CPU fallback draws from that generator, so a seeded
  // CPU generator gives the same values on neuron as on the CPU.
  TORCH_CHECK_NOT_IMPLEMENTED(!(gen.has_value() && gen->defined() && gen->device().is_cpu()),
                              "a CPU generator was given to a neuron op");
  int64_t increment = 0;
  try {
    increment = compiler::philox_offset_increment(op, dims);
  } catch (const compiler::CompileError& e) {
    TORCH_INTERNAL_ASSERT(false, e.what());
  }
  auto [seed, offset] = philox_reserve(gen, device.index(), static_cast<uint64_t>(increment));
  capture_random_draw(gen, device.index(), static_cast<uint64_t>(increment), seed, offset);
  return {int_operand(static_cast<int64_t>(seed)), int_operand(static_cast<int64_t>(offset))};
}

void fill_scalar_device(const at::Tensor& t, double value) {
  if (t.numel() == 0) return;
  launch(compiler::Op::Fill, {scalar_operand(value, t.scalar_type())}, {tensor_operand(t)});
}

c10::ScalarType narrow_dtype(c10::ScalarType t) {
  if (t != c10::kDouble && t != c10::kComplexDouble) return t;
  downcasts().add(t == c10::kDouble ? "float64" : "complex128");
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    TORCH_WARN(
        "neuron: float64 is not a device type; float64 data is stored and computed as float32 "
        "(complex128 as complex64) on neuron. This warning is shown once.");
  }
  return t == c10::kDouble ? c10::kFloat : c10::kComplexFloat;
}

at::Tensor empty_device(at::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device) {
  return empty_device_exact(sizes, narrow_dtype(dtype), device);
}

at::Tensor empty_device_exact(at::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device) {
  c10::DeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(sizes, c10::GetAllocator(c10::DeviceType::PrivateUse1), ks,
                                   dtype, std::nullopt);
}

at::Tensor empty_device_strided(at::IntArrayRef sizes, at::IntArrayRef strides,
                                c10::ScalarType dtype, c10::Device device) {
  dtype = narrow_dtype(dtype);
  c10::DeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(
      sizes, strides, c10::GetAllocator(c10::DeviceType::PrivateUse1), ks, dtype);
}

void copy_on_device(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  const at::Tensor from = src.expand(dst.sizes());
  try {
    launch(compiler::Op::Copy, {tensor_operand(from)}, {tensor_operand(dst)});
  } catch (const c10::NotImplementedError&) {
    host_copy(dst, from);  // a conversion the copy engine does not cover
  }
}

at::Tensor to_dtype_on_device(const at::Tensor& t, c10::ScalarType dtype) {
  dtype = narrow_dtype(dtype);
  if (t.scalar_type() == dtype) return t;
  at::Tensor out = empty_device(t.sizes(), dtype, t.device());
  copy_on_device(out, t);
  return out;
}

c10::Device common_device(const char* method, std::initializer_list<const at::Tensor*> tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || is_cpu_scalar(*t)) continue;
    c10::impl::check_and_update_common_device(device, *t, method, "argument");
  }
  TORCH_INTERNAL_ASSERT(device.has_value() && device->is_privateuseone());
  return *device;
}

void check_out_device(const at::Tensor& out, c10::Device device, const char* method) {
  std::optional<c10::Device> d = device;
  c10::impl::check_and_update_common_device(d, out, method, "out");
}

void check_cast(c10::ScalarType from, const at::Tensor& out) {
  TORCH_CHECK(c10::canCast(from, out.scalar_type()), "result type ", from,
              " can't be cast to the desired output type ", out.scalar_type());
}

}  // namespace openneuron::bridge
