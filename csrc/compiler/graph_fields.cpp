// Graph::int_fields / structure / with_int_fields: a graph as integers that may
// follow its host ints (symbolic sizes) on a fixed skeleton.
#include <stdexcept>

#include "openneuron/compiler/graph.h"

namespace openneuron::compiler {
namespace {

void put(std::string& s, int64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }

}  // namespace

std::vector<int64_t> Graph::int_fields() const {
  std::vector<int64_t> f;
  for (const ValueType& v : values_) {
    if (v.kind != ValueKind::Tensor) continue;
    for (int d = 0; d < v.tensor.ndim; ++d) {
      f.push_back(v.tensor.sizes[d]);
      f.push_back(v.tensor.strides[d]);
    }
  }
  for (const ViewOf& v : views_)
    if (v.base >= 0) f.push_back(v.offset);
  for (const Node& n : nodes_) f.insert(f.end(), n.attrs.begin(), n.attrs.end());
  return f;
}

std::string Graph::structure() const {
  std::string s;
  put(s, static_cast<int64_t>(values_.size()));
  for (const ValueType& v : values_) {
    put(s, static_cast<int64_t>(v.kind));
    if (v.kind == ValueKind::Tensor) {
      put(s, static_cast<int64_t>(v.tensor.dtype));
      put(s, v.tensor.ndim);
    }
  }
  put(s, static_cast<int64_t>(inputs_.size()));
  for (ValueId v : inputs_) put(s, v);
  put(s, static_cast<int64_t>(outputs_.size()));
  for (ValueId v : outputs_) put(s, v);
  put(s, static_cast<int64_t>(views_.size()));
  for (const ViewOf& v : views_) put(s, v.base);
  put(s, static_cast<int64_t>(nodes_.size()));
  for (const Node& n : nodes_) {
    put(s, static_cast<int64_t>(n.op));
    put(s, static_cast<int64_t>(n.inputs.size()));
    for (ValueId v : n.inputs) put(s, v);
    put(s, static_cast<int64_t>(n.outputs.size()));
    for (ValueId v : n.outputs) put(s, v);
    put(s, static_cast<int64_t>(n.attrs.size()));
  }
  return s;
}

Graph Graph::with_int_fields(const std::vector<int64_t>& fields) const {
  Graph g = *this;
  size_t i = 0;
  auto next = [&]() {
    if (i >= fields.size()) throw std::invalid_argument("Graph::with_int_fields: too few fields");
    return fields[i++];
  };
  for (ValueType& v : g.values_) {
    if (v.kind != ValueKind::Tensor) continue;
    for (int d = 0; d < v.tensor.ndim; ++d) {
      v.tensor.sizes[d] = next();
      v.tensor.strides[d] = next();
    }
  }
  for (ViewOf& v : g.views_)
    if (v.base >= 0) v.offset = next();
  for (Node& n : g.nodes_)
    for (int64_t& a : n.attrs) a = next();
  if (i != fields.size()) throw std::invalid_argument("Graph::with_int_fields: too many fields");
  return g;
}

}  // namespace openneuron::compiler
