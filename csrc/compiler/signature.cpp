// Graph::signature(): the program cache key. Computed on every eager op, so it
// is a compact binary encoding (LEB128 varints) appended into one reserved
// string, no streams.
#include "openneuron/compiler/graph.h"

namespace openneuron::compiler {
namespace {

inline void put_u(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
inline void put_i(std::string& s, int64_t v) {
  put_u(s, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));  // zigzag
}

}  // namespace

std::string Graph::signature() const {
  std::string s;
  s.reserve(16 + values_.size() * 40 + nodes_.size() * 12);
  s.push_back('\x01');  // format version
  put_u(s, values_.size());
  for (const ValueType& v : values_) {
    s.push_back(static_cast<char>(v.kind));
    if (v.kind != ValueKind::Tensor) continue;
    const TensorType& t = v.tensor;
    s.push_back(static_cast<char>(t.dtype));
    s.push_back(static_cast<char>(t.ndim));
    for (int d = 0; d < t.ndim && d < kMaxDims; ++d) {
      put_u(s, static_cast<uint64_t>(t.sizes[d]));
      put_i(s, t.strides[d]);
    }
  }
  put_u(s, inputs_.size());
  for (ValueId v : inputs_) put_u(s, static_cast<uint32_t>(v));
  put_u(s, outputs_.size());
  for (ValueId v : outputs_) put_u(s, static_cast<uint32_t>(v));
  put_u(s, nodes_.size());
  for (const Node& n : nodes_) {
    put_u(s, static_cast<uint16_t>(n.op));
    put_u(s, n.inputs.size());
    for (ValueId v : n.inputs) put_u(s, static_cast<uint32_t>(v));
    put_u(s, n.outputs.size());
    for (ValueId v : n.outputs) put_u(s, static_cast<uint32_t>(v));
    put_u(s, n.attrs.size());
    for (int64_t a : n.attrs) put_i(s, a);
  }
  // Views last: graphs without any (every eager op) pay one byte.
  put_u(s, views_.size());
  for (const ViewOf& v : views_) {
    put_i(s, v.base);
    if (v.base >= 0) put_u(s, static_cast<uint64_t>(v.offset));
  }
  return s;
}

}  // namespace openneuron::compiler
