// Graph construction, op names and the op table's fingerprint.
#include "openneuron/compiler/graph.h"

#include <stdexcept>
#include <string>

namespace openneuron::compiler {

const char* op_name(Op op) {
  switch (op) {
#define OPENNEURON_OP_NAME(name) \
  case Op::name:                 \
    return #name;
    OPENNEURON_FOR_EACH_OP(OPENNEURON_OP_NAME)
#undef OPENNEURON_OP_NAME
  }
  return "?";
}

uint64_t op_table_fingerprint() {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  auto mix = [&h](const char* s) {
    for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
    h = (h ^ ',') * 1099511628211ull;
  };
#define OPENNEURON_OP_HASH(name) mix(#name);
  OPENNEURON_FOR_EACH_OP(OPENNEURON_OP_HASH)
#undef OPENNEURON_OP_HASH
  return h;
}

ValueId Graph::add_input(const ValueType& type) {
  const ValueId id = add_value(type);
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_value(const ValueType& type) {
  values_.push_back(type);
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_view(ValueId base, const TensorType& type, int64_t byte_offset) {
  if (base < 0 || static_cast<size_t>(base) >= values_.size() || is_view(base) ||
      values_[base].kind != ValueKind::Tensor) {
    throw std::invalid_argument("Graph::add_view: base " + std::to_string(base) +
                                " is not a tensor value that is not itself a view");
  }
  if (byte_offset < 0) throw std::invalid_argument("Graph::add_view: negative offset");
  const ValueId id = add_value(ValueType::of(type));
  views_.resize(values_.size());
  views_[id] = ViewOf{base, byte_offset};
  return id;
}

void Graph::add_node(Op op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                     std::vector<int64_t> attrs) {
  nodes_.push_back(Node{op, std::move(inputs), std::move(outputs), std::move(attrs)});
}

void Graph::mark_output(ValueId v) { outputs_.push_back(v); }

Graph Graph::with_nodes(std::vector<Node> nodes) const {
  Graph g;
  g.values_ = values_;
  g.inputs_ = inputs_;
  g.outputs_ = outputs_;
  g.views_ = views_;
  g.nodes_ = std::move(nodes);
  return g;
}

Graph Graph::assemble(std::vector<ValueType> values, std::vector<ValueId> inputs,
                      std::vector<ValueId> outputs, std::vector<ViewOf> views,
                      std::vector<Node> nodes) {
  const auto n = static_cast<ValueId>(values.size());
  auto check = [&](ValueId v) {
    if (v < 0 || v >= n) throw std::invalid_argument("Graph::assemble: value id out of range");
  };
  if (views.size() > values.size()) throw std::invalid_argument("Graph::assemble: too many views");
  for (size_t v = 0; v < views.size(); ++v) {
    const ViewOf& view = views[v];
    if (view.base < 0) continue;
    check(view.base);
    const bool base_ok = values[view.base].kind == ValueKind::Tensor &&
                         !(static_cast<size_t>(view.base) < views.size() && views[view.base].base >= 0);
    if (!base_ok || values[v].kind != ValueKind::Tensor || view.offset < 0)
      throw std::invalid_argument("Graph::assemble: view " + std::to_string(v) + " is malformed");
  }
  for (ValueId v : inputs) check(v);
  for (ValueId v : outputs) check(v);
  for (const Node& node : nodes) {
    for (ValueId v : node.inputs) check(v);
    for (ValueId v : node.outputs) check(v);
  }
  Graph g;
  g.values_ = std::move(values);
  g.inputs_ = std::move(inputs);
  g.outputs_ = std::move(outputs);
  g.views_ = std::move(views);
  g.nodes_ = std::move(nodes);
  return g;
}

Graph Graph::single_op(Op op, const std::vector<ValueType>& operands, int num_inputs,
                       std::vector<int64_t> attrs) {
  Graph g;
  g.values_ = operands;
  const int n = static_cast<int>(operands.size());
  std::vector<ValueId> ins, outs;
  ins.reserve(num_inputs);
  outs.reserve(n - num_inputs);
  for (int i = 0; i < n; ++i) (i < num_inputs ? ins : outs).push_back(i);
  g.inputs_ = ins;
  g.outputs_ = outs;
  g.nodes_.push_back(Node{op, std::move(ins), std::move(outs), std::move(attrs)});
  return g;
}

}  // namespace openneuron::compiler
