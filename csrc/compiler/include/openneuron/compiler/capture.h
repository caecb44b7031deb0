// Capture: one graph built from the programs an eager run launches, so that a
// compiled graph runs as one program (torch.compile(backend="neuron")).
//
// The eager path stays the single translation from ATen ops to graph nodes:
// while a compiled graph's FX code runs op by op for the first time, every
// launch is recorded here with its arguments. Memory is the link between
// launches: each tensor operand becomes a view of the buffer its pointer lies
// in (a storage of the graph's inputs, or memory allocated during the run),
// so in-place ops, slices written by one op and read by another, and buffers
// freed and reused all replay exactly. What a launch cannot express (host
// reads of device data, CPU kernels) fails the capture with a reason; the
// graph then keeps running op by op. Random ops draw new numbers at every run:
// their seed and offset operands become launch arguments the caller reserves.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "openneuron/compiler/graph.h"
#include "openneuron/runtime.h"

namespace openneuron::compiler {

class CaptureBuilder {
 public:
  // Where an output tensor of the captured run lives.
  struct Location {
    enum Kind : uint8_t { Input, Output, Empty } kind = Empty;
    int index = -1;      // input storage or output buffer number
    int64_t offset = 0;  // bytes into it
  };
  // A launch argument of the captured program, in Graph::inputs() order.
  struct InputSlot {
    int storage = -1;  // >= 0: that input storage's pointer
    int draw = -1;     // >= 0: that random draw's seed (or offset, if draw_offset)
    bool draw_offset = false;
    onrt_arg constant{};  // otherwise
  };

  // A storage the caller passes at every run (an input tensor's); returns its
  // number. Storages of several inputs that share memory are added once.
  int add_input_storage(const void* base, uint64_t nbytes);
  void on_alloc(const void* ptr, uint64_t nbytes);
  void on_free(const void* ptr);
  // The next launch is a random op whose ints `seed` and `offset` (the first
  // such operands) were reserved from a generator: draw number `draw`.
  void expect_draw(int draw, int64_t seed, int64_t offset);
  // One launch of `g` (as compiled by the eager path) with its n arguments.
  void record(const Graph& g, const onrt_arg* args, int n);
  // Stops recording: the run did something a program cannot replay.
  void fail(const std::string& reason);
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  int64_t launches() const { return launches_; }

  // The buffer holding [ptr, ptr + extent); an intermediate becomes an output
  // buffer of the graph. Fails the capture (and returns Empty) when no buffer
  // holds it. extent 0 (an empty tensor) is always Empty.
  Location locate_output(const void* ptr, uint64_t extent);
  // Bytes from a tensor's first element to one past its last (0 if empty).
  static uint64_t extent_bytes(const TensorType& t);

  const Graph& graph() const { return graph_; }
  // The input storages some launch wrote (in-place updates of the graph's inputs).
  std::vector<int> written_storages() const;
  const std::vector<InputSlot>& input_slots() const { return slots_; }
  // Bytes of each output buffer, in Graph::outputs() order.
  const std::vector<uint64_t>& output_bytes() const { return output_bytes_; }

 private:
  struct Buffer {
    ValueId value = -1;
    uint64_t nbytes = 0;
    int storage = -1;  // input storage number
    int output = -1;   // output buffer number
  };
  // The buffer holding [ptr, ptr + extent) and ptr's offset in it, or -1.
  int find(const void* ptr, uint64_t extent, int64_t* offset) const;
  ValueId scalar_input(ValueKind kind, onrt_arg value);
  ValueId empty_view(const TensorType& type);

  Graph graph_;
  std::vector<Buffer> buffers_;
  std::map<uintptr_t, int> live_;  // start address -> buffer (live allocations, input storages)
  std::vector<InputSlot> slots_;
  std::vector<uint64_t> output_bytes_;
  struct Draw {
    int draw = -1;
    int64_t seed = 0, offset = 0;
  };
  std::vector<Draw> pending_draws_;
  ValueId none_ = -1, empty_ = -1;
  int num_storages_ = 0;
  std::string failure_;
  int64_t launches_ = 0;
};

}  // namespace openneuron::compiler
