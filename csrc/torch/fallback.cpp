// Ops without a native neuron lowering, and autocast.
//
// An op with no lowering of our own first tries the host library path
// (host_library.cpp: PyTorch's CPU kernel in place on device memory, counted as
// native (library)). Calls that cannot run there take the CPU fallback: inputs are
// copied out, the CPU kernel runs, results are copied back (in-place, out= and view
// semantics are kept by ATen's cpu_fallback). Each such op warns once and is
// counted (calls, time, bytes each way, the Python stack of the first call), so
// users see what did not run natively. OPENNEURON_FALLBACK=warn|silent|error.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/library.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "bridge.h"
#include "graph_capture.h"

namespace openneuron::bridge {
namespace {

enum class FallbackMode { Warn, Silent, Error };

FallbackMode fallback_mode() {
  // Read on every call so tests and users can switch it at run time.
  const char* v = std::getenv("OPENNEURON_FALLBACK");
  if (v == nullptr || *v == '\0' || std::string(v) == "warn") return FallbackMode::Warn;
  if (std::string(v) == "silent") return FallbackMode::Silent;
  if (std::string(v) == "error") return FallbackMode::Error;
  TORCH_CHECK_VALUE(false, "OPENNEURON_FALLBACK must be one of warn, silent, error; got '", v, "'");
}

int64_t device_bytes(const c10::IValue& v) {
  int64_t n = 0;
  auto add = [&](const at::Tensor& t) {
    if (t.defined() && t.device().is_privateuseone()) n += static_cast<int64_t>(t.nbytes());
  };
  if (v.isTensor()) add(v.toTensor());
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) add(t);
  }
  if (v.isOptionalTensorList()) {
    for (const c10::IValue& t : v.toListRef()) {
      if (t.isTensor()) add(t.toTensor());
    }
  }
  return n;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ATen's CPU fallback, with its time and the bytes it copies each way added to
// the op's record: every device input goes to the host; written arguments and
// new results come back.
void measured_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t first = stack->size() - args.size();
  int64_t to_host = 0, written = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const int64_t n = device_bytes((*stack)[first + i]);
    to_host += n;
    if (args[i].alias_info() != nullptr && args[i].alias_info()->isWrite()) written += n;
  }
  const int64_t start = now_ns();
  at::native::cpu_fallback(op, stack);
  const int64_t elapsed = now_ns() - start;
  int64_t to_device = written;
  const auto& returns = schema.returns();
  const size_t first_return = stack->size() - returns.size();
  for (size_t i = 0; i < returns.size(); ++i) {
    if (returns[i].alias_info() == nullptr) to_device += device_bytes((*stack)[first_return + i]);
  }
  fallback_calls().add_cost(op_name(op), elapsed, to_host, to_device);
}

void neuron_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (try_host_library_kernel(op, stack)) return;
  note_cpu_fallback(op);
  measured_cpu_fallback(op, stack);
}

bool on_neuron(const at::Tensor& t) { return t.defined() && t.device().is_privateuseone(); }

// A CPU copy of a neuron argument (any layout); anything else as it is.
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
  if (v.isList()) {  // Tensor?[] (index's indices): the same list type, elements moved
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toList()) out.push_back(to_cpu(e, device));
    return out;
  }
  if (v.isDevice() && v.toDevice().is_privateuseone()) {
    device = v.toDevice();
    return c10::Device(c10::kCPU);
  }
  return v;
}

}  // namespace

void note_cpu_fallback(const c10::OperatorHandle& op) {
  capture_unsupported("the CPU fallback");
  const std::string name = op_name(op);
  const FallbackMode mode = fallback_mode();
  TORCH_CHECK_NOT_IMPLEMENTED(mode != FallbackMode::Error, name,
                              " has no native neuron kernel and OPENNEURON_FALLBACK=error forbids "
                              "running it on the CPU");
  const bool first = fallback_calls().add(name);
  if (onrt_log_enabled(ONRT_LOG_DEBUG)) {
    onrt_log(ONRT_LOG_DEBUG, (name + " runs on the CPU (no native neuron kernel)").c_str());
  }
  if (first && mode == FallbackMode::Warn) {
    TORCH_WARN(name,
               " has no native neuron kernel; running it on the CPU (inputs copied to the "
               "host and results back). See openneuron.fallback_stats().");
  }
}

// The boxed fallback itself, for native kernels that route a case to the CPU
// (fallback_call.cpp): same policy (OPENNEURON_FALLBACK), warning and count.
void boxed_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  neuron_cpu_fallback(op, stack);
}

// Moves each neuron argument to the CPU with .cpu() (its layout's own _to_copy),
// runs the CPU's kernel, copies the CPU's values into the arguments the op writes
// and moves new results back with .to(). Timed for `openneuron report`; bytes are
// not counted (a sparse or nested tensor's parts are not one buffer).
void layout_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_cpu_fallback(op);
  const int64_t start = now_ns();
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  std::vector<c10::IValue> originals(stack->end() - num_args, stack->end());
  std::optional<c10::Device> device;
  for (size_t i = 0; i < num_args; ++i) {
    (*stack)[stack->size() - num_args + i] = to_cpu(originals[i], device);
  }
  std::vector<c10::IValue> cpu_args(stack->end() - num_args, stack->end());
  op.callBoxed(stack);
  // Arguments the op writes (in-place self, out=) take the CPU's result.
  for (size_t i = 0; i < num_args; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || !originals[i].isTensor()) continue;
    const at::Tensor& orig = originals[i].toTensor();
    if (on_neuron(orig)) const_cast<at::Tensor&>(orig).copy_(cpu_args[i].toTensor());
  }
  const size_t num_returns = schema.returns().size();
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& v = (*stack)[stack->size() - num_returns + r];
    if (!device.has_value()) continue;
    if (v.isTensorList()) {
      c10::List<at::Tensor> moved;
      for (const at::Tensor& t : v.toTensorList()) {
        moved.push_back(t.defined() && t.device().is_cpu() ? t.to(*device) : t);
      }
      v = moved;
      continue;
    }
    if (!v.isTensor() || !v.toTensor().defined()) continue;
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
  fallback_calls().add_cost(op_name(op), now_ns() - start, 0, 0);
}

bool OpCallCounts::add(const std::string& op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (records_[op].calls++ > 0) return false;
  }
  // Outside the lock: gathering Python frames may wait for the GIL, whose
  // holder may be counting a call of its own.
  auto stack = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
  const int64_t when = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  std::lock_guard<std::mutex> lock(mutex_);
  OpCallRecord& r = records_[op];
  r.first_stack = std::move(stack);
  r.first_time_ns = when;
  return true;
}

void OpCallCounts::add_cost(const std::string& op, int64_t ns, int64_t to_host, int64_t to_device) {
  std::lock_guard<std::mutex> lock(mutex_);
  OpCallRecord& r = records_[op];
  r.ns += ns;
  r.bytes_to_host += to_host;
  r.bytes_to_device += to_device;
}

std::vector<std::pair<std::string, int64_t>> OpCallCounts::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [op, r] : records_) out.emplace_back(op, r.calls);
  return out;
}

std::vector<std::pair<std::string, OpCallRecord>> OpCallCounts::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {records_.begin(), records_.end()};
}

void OpCallCounts::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.clear();
}

OpCallCounts& fallback_calls() {
  static OpCallCounts counts;
  return counts;
}

OpCallCounts& library_calls() {
  static OpCallCounts counts;
  return counts;
}

OpCallCounts& downcasts() {
  static OpCallCounts counts;
  return counts;
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}

// Composite ops whose ATen implementation rejects other device types before it dispatches
// ("mode only supports CPU, CUDA and XPU device type"): routed to the fallback, where the
// host library runs the CPU's kernel on the device memory.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* op : {"mode", "mode.values"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
  }
}

}  // namespace openneuron::bridge

// Autocast for device_type="neuron": the same op lists as CUDA's.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

// Inside at::autocast: PyTorch's op-list macros name its types unqualified.
namespace at::autocast {
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION_FP)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(NEURON_FP32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
}
}  // namespace at::autocast
