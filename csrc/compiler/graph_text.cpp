// Readable listings of a graph and of a program, for debug dumps
// (OPENNEURON_DEBUG_DIR) and error reports.
#include <sstream>

#include "lowering.h"

namespace openneuron::compiler {

std::string to_text(const Graph& g) {
  std::ostringstream s;
  const auto& values = g.values();
  s << "graph: " << g.inputs().size() << " inputs, " << g.outputs().size() << " outputs, "
    << values.size() << " values, " << g.nodes().size() << " nodes\n";
  std::vector<int> role(values.size(), 0);  // 1 input, 2 output
  for (ValueId v : g.inputs()) role[v] = 1;
  for (ValueId v : g.outputs()) role[v] = 2;
  for (size_t v = 0; v < values.size(); ++v) {
    const ValueType& t = values[v];
    s << "  %" << v << " = ";
    if (g.is_view(static_cast<ValueId>(v))) {
      s << "view of %" << g.views()[v].base << " at byte " << g.views()[v].offset << ": ";
    } else {
      s << (role[v] == 1 ? "input " : role[v] == 2 ? "output " : "");
    }
    switch (t.kind) {
      case ValueKind::Tensor: s << detail::describe(t.tensor); break;
      case ValueKind::ScalarInt: s << "int"; break;
      case ValueKind::ScalarFloat: s << "float"; break;
      case ValueKind::None: s << "none"; break;
    }
    s << '\n';
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    s << "  n" << i << ": " << op_name(n.op) << '(';
    for (size_t k = 0; k < n.inputs.size(); ++k) s << (k ? ", %" : "%") << n.inputs[k];
    s << ") -> ";
    for (size_t k = 0; k < n.outputs.size(); ++k) s << (k ? ", %" : "%") << n.outputs[k];
    if (!n.attrs.empty()) {
      s << "  attrs";
      for (int64_t a : n.attrs) s << ' ' << a;
    }
    s << '\n';
  }
  return s.str();
}

std::string to_text(const Program& p) {
  std::ostringstream s;
  s << "program " << p.name << ": " << p.num_args << " arguments, " << p.scratch_bytes
    << " scratch bytes, " << p.instructions.size() << " instructions\n";
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction& ins = p.instructions[i];
    s << "  i" << i << ": " << ins.name << " args";
    for (int32_t a : ins.arg_slots) s << ' ' << a;
    s << '\n';
  }
  return s.str();
}

}  // namespace openneuron::compiler
