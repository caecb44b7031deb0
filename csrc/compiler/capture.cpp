// CaptureBuilder: launches of an eager run -> one graph over views of buffers.
#include "openneuron/compiler/capture.h"

#include <cstring>

#include "lowering.h"

namespace openneuron::compiler {
namespace {

TensorType byte_buffer(uint64_t nbytes) {
  const int64_t n = static_cast<int64_t>(nbytes);
  return detail::contiguous_type(DType::UInt8, 1, &n);
}

}  // namespace

int CaptureBuilder::add_input_storage(const void* base, uint64_t nbytes) {
  const auto key = reinterpret_cast<uintptr_t>(base);
  if (auto it = live_.find(key); it != live_.end()) {
    Buffer& b = buffers_[it->second];
    if (b.storage >= 0 && b.nbytes == nbytes) return b.storage;
    fail("two inputs share memory with different extents");
    return -1;
  }
  const int storage = num_storages_++;
  InputSlot slot;
  slot.storage = storage;
  slots_.push_back(slot);
  buffers_.push_back(
      Buffer{graph_.add_input(ValueType::of(byte_buffer(nbytes))), nbytes, storage, -1});
  live_[key] = static_cast<int>(buffers_.size() - 1);
  return storage;
}

void CaptureBuilder::on_alloc(const void* ptr, uint64_t nbytes) {
  if (failed() || ptr == nullptr) return;
  buffers_.push_back(Buffer{graph_.add_value(ValueType::of(byte_buffer(nbytes))), nbytes, -1, -1});
  live_[reinterpret_cast<uintptr_t>(ptr)] = static_cast<int>(buffers_.size() - 1);
}

void CaptureBuilder::on_free(const void* ptr) {
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it != live_.end() && buffers_[it->second].storage < 0) live_.erase(it);
}

int CaptureBuilder::find(const void* ptr, uint64_t extent, int64_t* offset) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) return -1;
  --it;
  const Buffer& b = buffers_[it->second];
  if (p + extent > it->first + b.nbytes) return -1;
  *offset = static_cast<int64_t>(p - it->first);
  return it->second;
}

ValueId CaptureBuilder::scalar_input(ValueKind kind, onrt_arg value) {
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const ValueId v = graph_.inputs()[i];
    if (graph_.values()[v].kind == kind && slots_[i].storage < 0 && slots_[i].draw < 0 &&
        std::memcmp(&slots_[i].constant, &value, sizeof value) == 0) {
      return v;
    }
  }
  const ValueId v = graph_.add_input(ValueType{kind, {}});
  InputSlot slot;
  slot.constant = value;
  slots_.push_back(slot);
  return v;
}

ValueId CaptureBuilder::empty_view(const TensorType& type) {
  // Kernels never touch an empty tensor's memory; its views share one small buffer.
  if (empty_ < 0) {
    empty_ = graph_.add_value(ValueType::of(byte_buffer(detail::kAlign)));
    buffers_.push_back(Buffer{empty_, detail::kAlign, -1, -1});
  }
  return graph_.add_view(empty_, type, 0);
}

void CaptureBuilder::expect_draw(int draw, int64_t seed, int64_t offset) {
  pending_draws_.push_back(Draw{draw, seed, offset});
}

void CaptureBuilder::record(const Graph& g, const onrt_arg* args, int n) {
  if (failed()) return;
  ++launches_;
  std::vector<Draw> draws;
  draws.swap(pending_draws_);
  // Per pending draw: 0 nothing claimed yet, 1 its seed claimed, 2 both.
  std::vector<int> claimed(draws.size(), 0);
  auto claim_draw = [&](const onrt_arg& a) -> ValueId {
    for (size_t d = 0; d < draws.size(); ++d) {
      const int64_t want = claimed[d] == 0 ? draws[d].seed : draws[d].offset;
      if (claimed[d] == 2 || a.i != want) continue;
      const ValueId v = graph_.add_input(ValueType::scalar_int());
      InputSlot s;
      s.draw = draws[d].draw;
      s.draw_offset = claimed[d] == 1;
      slots_.push_back(s);
      ++claimed[d];
      return v;
    }
    return -1;
  };
  if (!g.views().empty()) return fail("a launch of a graph with views");
  const auto& values = g.values();
  std::vector<ValueId> map(values.size(), -1);
  int slot = 0;
  auto bind = [&](ValueId v) -> bool {
    if (slot >= n) {
      fail("a launch with fewer arguments than its graph");
      return false;
    }
    const onrt_arg& a = args[slot++];
    if (map[v] >= 0) return true;  // an output that is also an input: its first slot
    const ValueType& t = values[v];
    switch (t.kind) {
      case ValueKind::Tensor: {
        const uint64_t extent = detail::storage_bytes(t.tensor);
        if (extent == 0 || a.ptr == nullptr) {
          map[v] = empty_view(t.tensor);
          return true;
        }
        int64_t offset = 0;
        const int b = find(a.ptr, extent, &offset);
        if (b < 0) {
          fail("an operand outside the graph's inputs and the memory allocated while it ran");
          return false;
        }
        map[v] = graph_.add_view(buffers_[b].value, t.tensor, offset);
        return true;
      }
      case ValueKind::ScalarInt:
        map[v] = claim_draw(a);
        if (map[v] < 0) map[v] = scalar_input(t.kind, a);
        return true;
      case ValueKind::ScalarFloat:
        map[v] = scalar_input(t.kind, a);
        return true;
      case ValueKind::None:
        if (none_ < 0) {
          none_ = graph_.add_input(ValueType::none());
          slots_.push_back(InputSlot{});
        }
        map[v] = none_;
        return true;
    }
    return false;
  };
  for (ValueId v : g.inputs())
    if (!bind(v)) return;
  for (ValueId v : g.outputs())
    if (!bind(v)) return;
  for (int c : claimed) {
    if (c != 2) return fail("a random op whose seed and offset were not among its operands");
  }
  // The launch's own intermediates stay intermediates of the captured graph.
  for (size_t v = 0; v < values.size(); ++v) {
    if (map[v] < 0) map[v] = graph_.add_value(values[v]);
  }
  for (const Node& node : g.nodes()) {
    std::vector<ValueId> ins, outs;
    ins.reserve(node.inputs.size());
    outs.reserve(node.outputs.size());
    for (ValueId v : node.inputs) ins.push_back(map[v]);
    for (ValueId v : node.outputs) outs.push_back(map[v]);
    graph_.add_node(node.op, std::move(ins), std::move(outs), node.attrs);
  }
}

std::vector<int> CaptureBuilder::written_storages() const {
  std::vector<int> storage_of_value(graph_.values().size(), -1);
  for (const Buffer& b : buffers_)
    if (b.storage >= 0) storage_of_value[b.value] = b.storage;
  std::vector<char> written(num_storages_, 0);
  for (const Node& node : graph_.nodes())
    for (ValueId v : node.outputs)
      if (const int s = storage_of_value[graph_.storage_of(v)]; s >= 0) written[s] = 1;
  std::vector<int> out;
  for (int s = 0; s < num_storages_; ++s)
    if (written[s]) out.push_back(s);
  return out;
}

void CaptureBuilder::fail(const std::string& reason) {
  if (failure_.empty()) failure_ = reason.empty() ? "unknown" : reason;
}

uint64_t CaptureBuilder::extent_bytes(const TensorType& t) { return detail::storage_bytes(t); }

CaptureBuilder::Location CaptureBuilder::locate_output(const void* ptr, uint64_t extent) {
  if (extent == 0 || ptr == nullptr) return {};
  int64_t offset = 0;
  const int b = find(ptr, extent, &offset);
  if (b < 0) {
    fail("an output outside the graph's inputs and the memory allocated while it ran");
    return {};
  }
  Buffer& buf = buffers_[b];
  if (buf.storage >= 0) return {Location::Input, buf.storage, offset};
  if (buf.output < 0) {
    buf.output = static_cast<int>(output_bytes_.size());
    output_bytes_.push_back(buf.nbytes);
    graph_.mark_output(buf.value);
  }
  return {Location::Output, buf.output, offset};
}

}  // namespace openneuron::compiler
