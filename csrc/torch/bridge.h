// Shared declarations of the torch bridge (csrc/torch). The only C++ that sees
// torch headers lives in this folder; everything below it is torch-free.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "openneuron/runtime.h"

namespace c10 {
class OperatorHandle;
}  // namespace c10
namespace torch {
struct CapturedTraceback;
}  // namespace torch

namespace openneuron::bridge {

// Raises the PyTorch exception matching a runtime status (OutOfMemoryError for
// ONRT_ERROR_OUT_OF_MEMORY, IndexError-like for bad devices, RuntimeError
// otherwise), with the runtime's message and `what` as context.
[[noreturn]] void raise_status(onrt_status status, const char* what);
// For ONRT_ERROR_INTERRUPTED: re-raises the Python exception (KeyboardInterrupt)
// that ended the wait on this thread, else a RuntimeError with `message`
// (python_interrupts.cpp).
[[noreturn]] void raise_interrupted(const std::string& message);

#define ONRT_CHECK(expr)                                          \
  do {                                                            \
    onrt_status onrt_check_status_ = (expr);                      \
    if (onrt_check_status_ != ONRT_OK) {                          \
      ::openneuron::bridge::raise_status(onrt_check_status_, #expr); \
    }                                                             \
  } while (0)

// Initialises the runtime on first use (lazy, like CUDA); raises on bad config
// or in a forked child.
void ensure_initialized();

int device_count() noexcept;
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);  // validates, raising with the core list
void check_device_index(c10::DeviceIndex index);
// The core an allocation on `device` goes to: the current core when it names no
// index. Checks the index and initialises the runtime.
c10::Device checked_device(std::optional<c10::Device> device);

// Streams: c10::Stream ids are the runtime's stream ids.
onrt_stream_t runtime_stream(const c10::Stream& stream);
c10::Stream current_stream(c10::DeviceIndex index);
void set_current_stream(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex index);
c10::Stream new_stream(c10::DeviceIndex index, int priority);
onrt_stream_t current_runtime_stream(c10::DeviceIndex index);

// Generator of a device (PyTorch's default generator for it).
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator make_generator(c10::DeviceIndex index);
// Reserves `increment` Philox counters; returns {seed, offset}.
std::pair<uint64_t, uint64_t> philox_reserve(const std::optional<at::Generator>& gen,
                                             c10::DeviceIndex index, uint64_t increment);

// Grows or shrinks a device storage, keeping its bytes (stream-ordered copy).
void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes);

// What the calls of one ATen op ("aten::add.Tensor") cost, for
// openneuron.fallback_stats(), library_stats() and `openneuron report`.
struct OpCallRecord {
  int64_t calls = 0;
  int64_t ns = 0;               // wall time inside the op, where its path measures it
  int64_t bytes_to_host = 0;    // CPU fallback: device inputs copied to the host
  int64_t bytes_to_device = 0;  // CPU fallback: results and written arguments copied back
  int64_t first_time_ns = 0;    // realtime clock of the first call
  std::shared_ptr<torch::CapturedTraceback> first_stack;  // Python stack of the first call
};

// Thread-safe per-op records.
class OpCallCounts {
 public:
  // Counts a call; true on the op's first, whose Python stack is kept.
  bool add(const std::string& op);
  // Adds the measured cost of a call already counted by add().
  void add_cost(const std::string& op, int64_t ns, int64_t to_host, int64_t to_device);
  std::vector<std::pair<std::string, int64_t>> snapshot() const;
  std::vector<std::pair<std::string, OpCallRecord>> records() const;
  void reset();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, OpCallRecord> records_;
};
OpCallCounts& fallback_calls();  // ran through the CPU fallback (fallback.cpp)
OpCallCounts& library_calls();   // ran as host library kernels (host_library.cpp)
OpCallCounts& downcasts();       // float64/complex128 narrowed on the device, by dtype

// "aten::name.overload", or "aten::name" for the default overload.
std::string op_name(const c10::OperatorHandle& op);

// Host library kernels (host_library.cpp): runs a boxed op with PyTorch's CPU
// kernel in place on device memory; false (stack untouched) when the call cannot
// run that way. Counted per op in library_calls().
bool try_host_library_kernel(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
// A CPU tensor over a device tensor's bytes (the device memory must be host mapped).
at::Tensor host_alias(const at::Tensor& t);
// dst = src on one device by PyTorch's CPU copy over host aliases, in stream
// order: for dtype conversions the copy engine does not cover (complex, FP8).
void host_copy(const at::Tensor& dst, const at::Tensor& src);

// Runs an op without a native engine for this case: through the host library
// kernel when it can, else on the CPU exactly as the boxed CPU fallback does (honours
// OPENNEURON_FALLBACK, warns once, counts in fallback_stats()): for native
// registrations that route an unsupported case to the CPU. Defined in
// fallback.cpp (boxed_cpu_fallback) and fallback_call.cpp (cpu_fallback_call).
// Unboxed use: at::native::call_fallback_fn<&boxed_cpu_fallback, ATEN_OP2(op, overload)>
// ::call(args...), or cpu_fallback_call("aten::op", "overload", stack).
void boxed_cpu_fallback(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
// The policy of every path to the CPU (OPENNEURON_FALLBACK, the warning, the count), for
// fallbacks other than the dense one.
void note_cpu_fallback(const c10::OperatorHandle& op);
// The CPU fallback for tensors that are not plain strided ones (sparse, quantized,
// nested): arguments move with their layout's own copies, under the same policy.
void layout_cpu_fallback(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
void cpu_fallback_call(const char* name, const char* overload, std::vector<c10::IValue>* stack);

// While memory history is recorded (memory_history.cpp), the Python stack of
// the allocation or free this thread is about to make, gathered before the
// allocator takes its lock.
class MemoryContextScope {
 public:
  MemoryContextScope();
  ~MemoryContextScope();
  MemoryContextScope(const MemoryContextScope&) = delete;
  MemoryContextScope& operator=(const MemoryContextScope&) = delete;

 private:
  bool active_ = false;
};

// Fills a device tensor with a constant (engine Fill).
void fill_scalar_device(const at::Tensor& t, double value);

// One-time warning when float64/complex128 data is narrowed on the device.
c10::ScalarType narrow_dtype(c10::ScalarType t);

}  // namespace openneuron::bridge
