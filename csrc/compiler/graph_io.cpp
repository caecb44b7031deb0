// Graph <-> bytes (graph_io.h). Every count is checked against the bytes left and
// every id against the values read, before anything is built.
#include "openneuron/compiler/graph_io.h"

namespace openneuron::compiler {

void ByteWriter::ints(const std::vector<int64_t>& v) {
  i64(static_cast<int64_t>(v.size()));
  for (int64_t x : v) i64(x);
}

int64_t ByteReader::i64() {
  if (in_.size() - at_ < sizeof(int64_t)) throw FormatError("truncated");
  int64_t v;
  in_.copy(reinterpret_cast<char*>(&v), sizeof v, at_);
  at_ += sizeof v;
  return v;
}

int64_t ByteReader::in_range(int64_t lo, int64_t hi, const char* what) {
  const int64_t v = i64();
  if (v < lo || v > hi) throw FormatError(std::string(what) + " out of range");
  return v;
}

int64_t ByteReader::count(size_t min_bytes, const char* what) {
  return in_range(0, static_cast<int64_t>((in_.size() - at_) / min_bytes), what);
}

std::vector<int64_t> ByteReader::ints(size_t max) {
  const size_t left = (in_.size() - at_) / sizeof(int64_t);
  const int64_t n = in_range(0, static_cast<int64_t>(std::min(max, left)), "list length");
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) x = i64();
  return v;
}

void write_graph(ByteWriter& w, const Graph& g) {
  w.i64(static_cast<int64_t>(g.values().size()));
  for (const ValueType& v : g.values()) {
    w.i64(static_cast<int64_t>(v.kind));
    if (v.kind != ValueKind::Tensor) continue;
    w.i64(static_cast<int64_t>(v.tensor.dtype));
    w.i64(v.tensor.ndim);
    for (int d = 0; d < v.tensor.ndim; ++d) {
      w.i64(v.tensor.sizes[d]);
      w.i64(v.tensor.strides[d]);
    }
  }
  auto ids = [&](const std::vector<ValueId>& v) {
    w.ints(std::vector<int64_t>(v.begin(), v.end()));
  };
  ids(g.inputs());
  ids(g.outputs());
  w.i64(static_cast<int64_t>(g.views().size()));
  for (const ViewOf& v : g.views()) {
    w.i64(v.base);
    w.i64(v.offset);
  }
  w.i64(static_cast<int64_t>(g.nodes().size()));
  for (const Node& n : g.nodes()) {
    w.i64(static_cast<int64_t>(n.op));
    ids(n.inputs);
    ids(n.outputs);
    w.ints(n.attrs);
  }
}

Graph read_graph(ByteReader& r) {
  constexpr int64_t kMaxItems = int64_t{1} << 24;
  constexpr int64_t kNumOps = 0
#define OPENNEURON_COUNT_OP(name) +1
      OPENNEURON_FOR_EACH_OP(OPENNEURON_COUNT_OP)
#undef OPENNEURON_COUNT_OP
      ;
  const int64_t nv = r.count(sizeof(int64_t), "value count");
  std::vector<ValueType> values(static_cast<size_t>(nv));
  for (ValueType& v : values) {
    v.kind =
        static_cast<ValueKind>(r.in_range(0, static_cast<int64_t>(ValueKind::None), "value kind"));
    if (v.kind != ValueKind::Tensor) continue;
    v.tensor.dtype =
        static_cast<DType>(r.in_range(0, static_cast<int64_t>(DType::Float8E5M2), "dtype"));
    v.tensor.ndim = static_cast<int32_t>(r.in_range(0, kMaxDims, "ndim"));
    for (int d = 0; d < v.tensor.ndim; ++d) {
      v.tensor.sizes[d] = r.i64();
      v.tensor.strides[d] = r.i64();
    }
  }
  auto ids = [&]() {
    std::vector<ValueId> out;
    for (int64_t v : r.ints(static_cast<size_t>(kMaxItems))) {
      if (v < 0 || v >= nv) throw FormatError("value id out of range");
      out.push_back(static_cast<ValueId>(v));
    }
    return out;
  };
  std::vector<ValueId> inputs = ids(), outputs = ids();
  const int64_t nviews = r.count(2 * sizeof(int64_t), "view count");
  if (nviews > nv) throw FormatError("more views than values");
  std::vector<ViewOf> views(static_cast<size_t>(nviews));
  for (ViewOf& v : views) {
    v.base = static_cast<ValueId>(r.in_range(-1, nv - 1, "view base"));
    v.offset = r.in_range(0, INT64_MAX, "view offset");
  }
  const int64_t nn = r.count(4 * sizeof(int64_t), "node count");
  std::vector<Node> nodes(static_cast<size_t>(nn));
  for (Node& n : nodes) {
    n.op = static_cast<Op>(r.in_range(0, kNumOps - 1, "op"));
    n.inputs = ids();
    n.outputs = ids();
    n.attrs = r.ints(static_cast<size_t>(kMaxItems));
  }
  try {
    return Graph::assemble(std::move(values), std::move(inputs), std::move(outputs),
                           std::move(views), std::move(nodes));
  } catch (const std::invalid_argument& e) {
    throw FormatError(e.what());
  }
}

}  // namespace openneuron::compiler
