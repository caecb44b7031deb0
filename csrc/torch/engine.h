// Eager execution: ATen tensors -> a compiler graph (one node per op through launch(),
// several through ProgramBuilder) -> cached program -> launch on the device's current
// stream. Every native op of the bridge goes through here, so eager and compiled mode
// share lowerings.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>
#include <span>
#include <vector>

#include "openneuron/compiler/graph.h"
#include "openneuron/runtime.h"

namespace openneuron::bridge {

DType to_dtype(c10::ScalarType t);
TensorType tensor_type(const at::Tensor& t);

// One launch argument with its type.
struct Operand {
  compiler::ValueType type;
  onrt_arg arg{};
  c10::DeviceIndex device = -1;  // tensors only
  // Keeps a temporary (e.g. a dtype-converted copy) alive until the launch is
  // queued; freeing it earlier would let the next temporary reuse its memory.
  at::Tensor keep;
};
Operand tensor_operand(const at::Tensor& t);  // t must be on the device
Operand float_operand(double v);
Operand int_operand(int64_t v);
Operand none_operand();
// A real Scalar's value. A complex one declines the call (c10::NotImplementedError: the
// engines take real scalars), so the op runs through the host library or the fallback.
double real_scalar(const c10::Scalar& s);
// A Scalar in the kind matching `compute` (integral types take int operands).
Operand scalar_operand(const c10::Scalar& s, c10::ScalarType compute);
// Declines the call (c10::NotImplementedError) when `compute` is float16 or bfloat16, so
// it runs as a host library kernel (PyTorch's CPU kernel in place on device memory) and
// gives the CPU's results bit for bit. For half-type cases whose CPU results depend on
// the CPU loop's structure (rsqrt: see ops_elementwise.cpp); `what` names the case.
void decline_half_types(c10::ScalarType compute, const char* what);

// Runs `op` on the device of the first output tensor, on its current stream.
void launch(compiler::Op op, std::span<const Operand> inputs, std::span<const Operand> outputs,
            std::vector<int64_t> attrs = {});
inline void launch(compiler::Op op, std::initializer_list<Operand> inputs,
                   std::initializer_list<Operand> outputs, std::vector<int64_t> attrs = {}) {
  launch(op, std::span(inputs.begin(), inputs.size()), std::span(outputs.begin(), outputs.size()),
         std::move(attrs));
}

// A program of several nodes over launch arguments (a list op's one instruction per
// tensor, a fused optimizer step), built per call and compiled once per signature.
class ProgramBuilder {
 public:
  compiler::ValueId input(Operand o);
  compiler::ValueId input(const at::Tensor& t) { return input(tensor_operand(t)); }
  compiler::ValueId none() { return input(none_operand()); }
  compiler::ValueId output(const at::Tensor& t);
  void node(compiler::Op op, std::vector<compiler::ValueId> ins,
            std::vector<compiler::ValueId> outs, std::vector<int64_t> attrs = {});
  bool empty() const { return graph_.nodes().empty(); }
  // Launches the program on the device of the first output (nothing if no node was added).
  void run();

 private:
  compiler::Graph graph_;
  std::vector<Operand> inputs_, outputs_;  // Operand::keep holds temporaries until run()
};

// Philox counters for one launch of a random op, reserved on `gen` (or the device's
// default generator) as seed and offset operands. `dims` as compiler::philox_offset_increment.
std::pair<Operand, Operand> reserve_philox(c10::Device device,
                                           const std::optional<at::Generator>& gen, compiler::Op op,
                                           std::initializer_list<int64_t> dims);

// Engine-side helpers used by several op families.
at::Tensor empty_device(at::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device);
// As empty_device, but float64 is kept: for a temporary that holds an existing tensor's
// values bit for bit (a float64 tensor on neuron is a dtype view of other data).
at::Tensor empty_device_exact(at::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device);
at::Tensor empty_device_strided(at::IntArrayRef sizes, at::IntArrayRef strides,
                                c10::ScalarType dtype, c10::Device device);
// A tensor of `dtype` holding t's values (t itself when it already has it).
at::Tensor to_dtype_on_device(const at::Tensor& t, c10::ScalarType dtype);
void copy_on_device(const at::Tensor& dst, const at::Tensor& src);  // same device, any dtypes

}  // namespace openneuron::bridge
