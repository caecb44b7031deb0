// Graph <-> bytes for the on-disk cache: a round trip keeps every field, and bytes
// that are not a graph (every truncation, random corruption) raise FormatError or
// read as some other valid graph, never crash.
#include <random>

#include "openneuron/compiler/graph_io.h"
#include "test_util.h"

namespace {

using namespace ontest;

Graph recorded_style_graph() {
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

std::string bytes_of(const Graph& g) {
  ByteWriter w;
  write_graph(w, g);
  return w.take();
}

TEST(GraphIo, RoundTripKeepsEveryField) {
  const Graph g = recorded_style_graph();
  const std::string bytes = bytes_of(g);
  ByteReader r(bytes);
  const Graph back = read_graph(r);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(back.signature(), g.signature());
  EXPECT_EQ(to_text(back), to_text(g));
}

TEST(GraphIo, TruncatedOrCorruptBytesNeverCrash) {
  const std::string bytes = bytes_of(recorded_style_graph());
  for (size_t n = 0; n < bytes.size(); ++n) {
    ByteReader r(std::string_view(bytes).substr(0, n));
    EXPECT_THROW(read_graph(r), FormatError) << "prefix of " << n << " bytes";
  }
  std::mt19937 rng(5);
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b = bytes;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    ByteReader r(b);
    try {
      const Graph g = read_graph(r);
      ++parsed;
      try {
        compile(g);  // whatever it is, compiling it is an error or a program
      } catch (const CompileError&) {
      }
    } catch (const FormatError&) {
    }
  }
  EXPECT_LT(parsed, 3000);  // most corruptions are caught by the reader itself
}

}  // namespace
