// Writes the graph_io seed corpus (tests/fuzz/corpus/graph_io/) with the compiler's own
// serialiser: small graphs of the shapes recordings have (views into byte buffers,
// scalars, fusable chains, a GEMM, a reduction), each a graph the compiler compiles
// (the gcc replays of tests/fuzz compile every seed). The first byte of a seed is the fuzz target's
// options byte (bit 0: fuse). Usage: make_seeds <directory>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "../cpp/compiler/tensor_types.h"
#include "openneuron/compiler/graph_io.h"

namespace {

using namespace openneuron::compiler;
using openneuron::DType;
using openneuron::TensorType;
using ontest::make_type;

// A recording's shape: byte buffers as inputs and outputs, typed views into them.
Graph recorded() {
  Graph g;
  const auto bytes = make_type(DType::UInt8, {64});
  const ValueId in = g.add_input(ValueType::of(bytes));
  const ValueId scale = g.add_input(ValueType::scalar_float());
  const ValueId out = g.add_value(ValueType::of(bytes));
  g.mark_output(out);
  const auto f = make_type(DType::Float32, {2, 4}, {1, 2});
  const ValueId a = g.add_view(in, f, 0), b = g.add_view(in, f, 32), c = g.add_view(out, f, 16);
  g.add_node(Op::Mul, {a, scale}, {c});
  g.add_node(Op::Softmax, {c}, {b}, {1});
  return g;
}

Graph add() {
  const auto t = ValueType::of(make_type(DType::Float32, {2, 3}));
  return Graph::single_op(Op::Add, {t, t, ValueType::scalar_float(), t}, 3);
}

Graph mm() {
  return Graph::single_op(
      Op::Mm,
      {ValueType::of(make_type(DType::Float32, {2, 3})), ValueType::of(make_type(DType::Float32, {3, 4})),
       ValueType::of(make_type(DType::Float32, {2, 4}))},
      2);
}

Graph sum() {
  return Graph::single_op(
      Op::Sum,
      {ValueType::of(make_type(DType::BFloat16, {4, 3})), ValueType::of(make_type(DType::Float32, {1, 3}))},
      1, {1});
}

// exp(x) * y + x, a run the fusion pass fuses; the intermediate goes to scratch.
Graph chain() {
  Graph g;
  const auto t = ValueType::of(make_type(DType::Float16, {3, 5}));
  const ValueId x = g.add_input(t), y = g.add_input(t),
                one = g.add_input(ValueType::scalar_float());
  const ValueId e = g.add_value(t), m = g.add_value(t), out = g.add_value(t);
  g.add_node(Op::Exp, {x}, {e});
  g.add_node(Op::Mul, {e, y}, {m});
  g.add_node(Op::Add, {m, x, one}, {out});
  g.mark_output(out);
  return g;
}

Graph copy_broadcast() {
  return Graph::single_op(Op::Copy,
                          {ValueType::of(make_type(DType::Int32, {4, 3}, {0, 1})),
                           ValueType::of(make_type(DType::Float32, {4, 3}))},
                          1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <directory>\n");
    return 2;
  }
  const std::vector<std::pair<const char*, Graph>> graphs = {
      {"recorded", recorded()}, {"add", add()},     {"mm", mm()},
      {"sum", sum()},           {"chain", chain()}, {"copy_broadcast", copy_broadcast()},
  };
  for (const auto& [name, g] : graphs) {
    ByteWriter w;
    write_graph(w, g);
    const std::string bytes = w.take();
    for (const char options : {'\0', '\1'}) {
      const std::string path =
          std::string(argv[1]) + "/" + name + (options ? "_fused" : "_unfused") + ".bin";
      std::ofstream(path, std::ios::binary) << options << bytes;
    }
  }
  return 0;
}
