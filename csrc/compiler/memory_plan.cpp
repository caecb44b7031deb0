// Scratch placement of graph intermediates: each lives from the node that
// writes it to its last reader (for a base of views: from the first node that
// touches it through any view to the last); first-fit reuse of freed ranges,
// 64-byte aligned offsets.
#include <algorithm>

#include "lowering.h"

namespace openneuron::compiler::detail {

MemoryPlan plan_memory(const Graph& g, const std::vector<char>& is_launch) {
  const auto& values = g.values();
  const int nv = static_cast<int>(values.size());
  MemoryPlan plan;
  plan.offset.assign(nv, -1);
  std::vector<int> def(nv, -1), last(nv, -1);
  const auto& nodes = g.nodes();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    for (ValueId v : nodes[i].inputs) {
      const ValueId b = g.storage_of(v);
      if (def[b] < 0 && b != v) def[b] = i;  // a buffer first touched by a read
      last[b] = i;
    }
    for (ValueId v : nodes[i].outputs) {
      const ValueId b = g.storage_of(v);
      if (def[b] < 0) def[b] = i;
      if (last[b] < i) last[b] = i;  // written but never read: still needs space
    }
  }
  struct Block {
    uint64_t offset, size;
    int last;
  };
  std::vector<Block> live;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    // Ranges whose last reader ran before node i are free again; node i's own
    // inputs stay live while it writes its outputs.
    live.erase(std::remove_if(live.begin(), live.end(), [&](const Block& b) { return b.last < i; }),
               live.end());
    std::vector<ValueId> starting;
    for (const auto* list : {&nodes[i].inputs, &nodes[i].outputs}) {
      for (ValueId v : *list) {
        const ValueId b = g.storage_of(v);
        if (def[b] == i && plan.offset[b] < 0 &&
            std::find(starting.begin(), starting.end(), b) == starting.end()) {
          starting.push_back(b);
        }
      }
    }
    for (ValueId v : starting) {
      if (is_launch[v] || values[v].kind != ValueKind::Tensor) continue;
      const uint64_t size = align_up(std::max<uint64_t>(storage_bytes(values[v].tensor), 1));
      std::sort(live.begin(), live.end(),
                [](const Block& a, const Block& b) { return a.offset < b.offset; });
      uint64_t at = 0;
      for (const Block& b : live) {
        if (b.offset >= at + size) break;
        at = std::max(at, b.offset + b.size);
      }
      live.push_back({at, size, last[v]});
      plan.offset[v] = static_cast<int64_t>(at);
      plan.bytes = std::max(plan.bytes, at + size);
    }
  }
  return plan;
}

}  // namespace openneuron::compiler::detail
