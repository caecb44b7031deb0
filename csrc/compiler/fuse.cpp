// The elementwise fusion pass: runs of consecutive elementwise nodes over one
// iteration space become one FusedElementwise node (kernels/fused_elementwise.cpp).
//
// Node order is the only order a recorded graph guarantees, so a group is a run
// of consecutive nodes and the fused node takes its place. Within the run the
// kernel loads every input of a tile, computes every step, then stores; that is
// the unfused order for each element as long as no two distinct views in the
// group overlap in memory (an identical view, as an in-place op uses, is the same
// element at the same place). Such an overlap ends the group. A result is kept
// out of memory when its buffer is an intermediate that no node outside the
// group touches; its buffer then drops out of the memory plan, and a group none
// of whose results is ever read is dropped (dead code).
//
// The node: inputs = the loaded tensors, then the scalars; outputs = the stored
// results; attrs = [nin, nscalars, nsteps, nout, then per step (FusedOp, result
// DType, source a, source b, coefficient scalar or -1), then per output the
// register it stores]. Registers as kernels::FusedStep describes them.
#include <algorithm>
#include <optional>

#include "lowering.h"

namespace openneuron::compiler::detail {

using kernels::FusedOp;

namespace {

bool half_or_float(DType d) {
  return d == DType::Float32 || d == DType::BFloat16 || d == DType::Float16;
}

// The kernel op of a fusable node and its operand shape, or false.
struct Form {
  FusedOp op;
  int tensors;      // leading tensor (or, for binary ops, scalar) inputs
  int scalar_coef;  // input index of a scalar coefficient, or -1
  bool binary;
  bool coef_required = false;
};

bool fusable_op(const Node& n, Form* f) {
  auto unary = [&](FusedOp op) {
    *f = {op, 1, -1, false};
    return true;
  };
  auto binary = [&](FusedOp op) {
    *f = {op, 2, -1, true};
    return true;
  };
  switch (n.op) {
    case Op::Copy:
      return unary(FusedOp::Copy);
    case Op::Neg:
      return unary(FusedOp::Neg);
    case Op::Abs:
      return unary(FusedOp::Abs);
    case Op::Exp:
      return unary(FusedOp::Exp);
    case Op::Sqrt:
      return unary(FusedOp::Sqrt);
    case Op::Rsqrt:
      return unary(FusedOp::Rsqrt);
    case Op::Reciprocal:
      return unary(FusedOp::Reciprocal);
    case Op::Tanh:
      return unary(FusedOp::Tanh);
    case Op::Sigmoid:
      return unary(FusedOp::Sigmoid);
    case Op::Relu:
      return unary(FusedOp::Relu);
    case Op::Silu:
      return unary(FusedOp::Silu);
    case Op::Erf:
      return unary(FusedOp::Erf);
    case Op::Gelu:
      if (n.attrs.size() > 1 || (!n.attrs.empty() && n.attrs[0] != 0 && n.attrs[0] != 1))
        return false;
      return unary(!n.attrs.empty() && n.attrs[0] ? FusedOp::GeluTanh : FusedOp::GeluErf);
    case Op::Add:
      *f = {FusedOp::Add, 2, 2, true};
      return true;
    case Op::Sub:
      *f = {FusedOp::Sub, 2, 2, true};
      return true;
    case Op::Mul:
      return binary(FusedOp::Mul);
    case Op::Div:
      return binary(FusedOp::Div);
    case Op::Maximum:
      return binary(FusedOp::Maximum);
    case Op::Minimum:
      return binary(FusedOp::Minimum);
    case Op::ThresholdBackward:
      *f = {FusedOp::ThresholdBackward, 2, 2, true, true};
      return true;
    case Op::GeluBackward:
      if (n.attrs.size() > 1 || (!n.attrs.empty() && n.attrs[0] != 0 && n.attrs[0] != 1))
        return false;
      return binary(!n.attrs.empty() && n.attrs[0] ? FusedOp::GeluTanhBackward
                                                   : FusedOp::GeluErfBackward);
    case Op::SigmoidBackward:
      return binary(FusedOp::SigmoidBackward);
    case Op::TanhBackward:
      return binary(FusedOp::TanhBackward);
    case Op::SiluBackward:
      return binary(FusedOp::SiluBackward);
    default:
      return false;
  }
}

// Where a tensor value's elements lie: its storage, byte range and layout.
struct Place {
  ValueId base = -1;
  int64_t begin = 0, end = 0;
  TensorType type;

  bool same(const Place& o) const {
    if (base != o.base || begin != o.begin || type.dtype != o.type.dtype ||
        type.ndim != o.type.ndim)
      return false;
    for (int d = 0; d < type.ndim; ++d)
      if (type.sizes[d] != o.type.sizes[d] ||
          (type.sizes[d] > 1 && type.strides[d] != o.type.strides[d]))
        return false;
    return true;
  }
  bool overlaps(const Place& o) const { return base == o.base && begin < o.end && o.begin < end; }
};

Place place_of(const Graph& g, ValueId v) {
  Place p;
  p.base = g.storage_of(v);
  p.begin = g.is_view(v) ? g.views()[v].offset : 0;
  p.type = g.values()[v].tensor;
  // Saturating: compile() rejects a view past its base later, the pass must not overflow.
  if (__builtin_add_overflow(p.begin, static_cast<int64_t>(storage_bytes(p.type)), &p.end))
    p.end = INT64_MAX;
  return p;
}

// A source of a step while the group grows: an input tensor, a step result or a scalar.
struct Src {
  enum Kind : uint8_t { Input, Step, Scalar } kind;
  int index;
};

struct Group {
  int first = -1, last = -1;
  TensorType space;             // the iteration sizes (the first node's output)
  std::vector<ValueId> inputs;  // loaded tensors
  std::vector<Place> input_places;
  std::vector<ValueId> scalars;
  struct Step {
    FusedOp op;
    DType dtype;
    Src a, b;
    int coef;  // scalar index or -1
  };
  std::vector<Step> steps;
  struct Written {
    Place place;
    ValueId value;
    int step;
  };
  std::vector<Written> written;  // the latest result per place
};

class Fuser {
 public:
  explicit Fuser(const Graph& g) : g_(g) {
    const int nv = static_cast<int>(g.values().size());
    first_touch_.assign(nv, -1);
    last_touch_.assign(nv, -1);
    launch_.assign(nv, 0);
    auto known = [&](ValueId v) { return v >= 0 && v < nv; };
    for (const auto* list : {&g.inputs(), &g.outputs()})
      for (ValueId v : *list) valid_ = valid_ && known(v);
    for (const Node& n : g.nodes())
      for (const auto* list : {&n.inputs, &n.outputs})
        for (ValueId v : *list) valid_ = valid_ && known(v);
    if (!valid_) return;  // compile() reports the bad id
    for (ValueId v : g.inputs()) launch_[v] = 1;
    for (ValueId v : g.outputs()) launch_[v] = 1;
    for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
      for (const auto* list : {&g.nodes()[i].inputs, &g.nodes()[i].outputs}) {
        for (ValueId v : *list) {
          if (v < 0 || v >= nv) continue;
          const ValueId b = g.storage_of(v);
          if (first_touch_[b] < 0) first_touch_[b] = i;
          last_touch_[b] = i;
        }
      }
    }
  }

  // The fused graph, or nullopt when nothing changed.
  std::optional<Graph> run(int* groups) {
    *groups = 0;
    if (!valid_) return std::nullopt;
    std::vector<Node> out;
    const auto& nodes = g_.nodes();
    bool changed = false;
    size_t i = 0;
    while (i < nodes.size()) {
      Group grp;
      size_t j = i;
      while (j < nodes.size() && add(grp, static_cast<int>(j))) ++j;
      if (j - i >= 2) {
        *groups += emit(grp, out);
        changed = true;
        i = j;
      } else {
        out.push_back(nodes[i]);
        ++i;
      }
    }
    if (!changed) return std::nullopt;
    return g_.with_nodes(std::move(out));
  }

 private:
  bool is_tensor(ValueId v) const {
    return v >= 0 && v < static_cast<ValueId>(g_.values().size()) &&
           g_.values()[v].kind == ValueKind::Tensor;
  }
  bool is_scalar(ValueId v) const {
    if (v < 0 || v >= static_cast<ValueId>(g_.values().size())) return false;
    const ValueKind k = g_.values()[v].kind;
    return k == ValueKind::ScalarInt || k == ValueKind::ScalarFloat;
  }

  // Adds node `index` to the group, or returns false (the group ends before it).
  bool add(Group& grp, int index) {
    const Node& n = g_.nodes()[index];
    Form form;
    if (!fusable_op(n, &form) || n.outputs.size() != 1 || !is_tensor(n.outputs[0])) return false;
    const size_t min_in = form.coef_required ? 3 : static_cast<size_t>(form.tensors);
    const size_t max_in = form.scalar_coef >= 0 ? 3 : static_cast<size_t>(form.tensors);
    if (n.inputs.size() < min_in || n.inputs.size() > max_in) return false;
    const TensorType& ot = g_.values()[n.outputs[0]].tensor;
    if (!half_or_float(ot.dtype) || ot.numel() == 0) return false;
    for (int d = 0; d < ot.ndim; ++d)
      if (ot.sizes[d] > 1 && ot.strides[d] == 0) return false;  // the op's own lowering reports it
    if (grp.first >= 0 && !same_sizes(ot, grp.space)) return false;

    // Sources, checked before anything changes.
    Src src[2];
    std::vector<Place> new_places;
    for (int k = 0; k < form.tensors; ++k) {
      const ValueId v = n.inputs[k];
      if (is_scalar(v) && form.binary) {
        src[k] = {Src::Scalar, -1};
        continue;
      }
      if (!is_tensor(v)) return false;
      const TensorType& t = g_.values()[v].tensor;
      if (!same_sizes(t, ot) || !half_or_float(t.dtype)) return false;
      if (n.op != Op::Copy && t.dtype != ot.dtype) return false;
      // A same-dtype copy moves bits; through float a half NaN's payload would change.
      if (n.op == Op::Copy && t.dtype == ot.dtype && t.dtype != DType::Float32) return false;
      const Place p = place_of(g_, v);
      if (const Group::Written* w = find_written(grp, p)) {
        src[k] = {Src::Step, w->step};
        continue;
      }
      for (const Group::Written& w : grp.written)
        if (w.place.overlaps(p)) return false;  // part of a result: not in a register
      src[k] = {Src::Input, -1};
      new_places.push_back(p);
    }
    int coef = -1;
    if (form.scalar_coef >= 0 && static_cast<int>(n.inputs.size()) > form.scalar_coef) {
      if (!is_scalar(n.inputs[form.scalar_coef])) return false;
      coef = 0;
    }
    const Place op = place_of(g_, n.outputs[0]);
    for (const Place& p : grp.input_places)
      if (p.overlaps(op) && !p.same(op)) return false;
    for (const Place& p : new_places)
      if (p.overlaps(op) && !p.same(op)) return false;
    for (const Group::Written& w : grp.written)
      if (w.place.overlaps(op) && !w.place.same(op)) return false;

    // Limits: every tensor may be loaded or stored; scalars and steps are counted.
    size_t new_inputs = 0;
    for (size_t k = 0; k < new_places.size(); ++k) {
      bool seen = find_input(grp, new_places[k]) >= 0;
      for (size_t q = 0; q < k && !seen; ++q) seen = new_places[q].same(new_places[k]);
      new_inputs += !seen;
    }
    size_t new_written = find_written(grp, op) ? 0 : 1;
    if (grp.inputs.size() + new_inputs + grp.written.size() + new_written >
            static_cast<size_t>(kernels::kMaxFusedOperands) ||
        grp.steps.size() + 1 > static_cast<size_t>(kernels::kMaxFusedSteps) ||
        grp.scalars.size() + 3 > static_cast<size_t>(kernels::kMaxFusedScalars))
      return false;

    // Commit.
    if (grp.first < 0) {
      grp.first = index;
      grp.space = ot;
    }
    grp.last = index;
    for (int k = 0; k < form.tensors; ++k) {
      const ValueId v = n.inputs[k];
      if (src[k].kind == Src::Scalar) src[k].index = scalar_index(grp, v);
      if (src[k].kind != Src::Input) continue;
      const Place p = place_of(g_, v);
      int at = find_input(grp, p);
      if (at < 0) {
        at = static_cast<int>(grp.inputs.size());
        grp.inputs.push_back(v);
        grp.input_places.push_back(p);
      }
      src[k].index = at;
    }
    if (coef >= 0) coef = scalar_index(grp, n.inputs[form.scalar_coef]);
    Group::Step s{form.op, ot.dtype, src[0], form.tensors > 1 ? src[1] : src[0], coef};
    grp.steps.push_back(s);
    const int step = static_cast<int>(grp.steps.size()) - 1;
    if (Group::Written* w = find_written(grp, op)) {
      w->value = n.outputs[0];
      w->step = step;
    } else {
      grp.written.push_back({op, n.outputs[0], step});
    }
    return true;
  }

  static Group::Written* find_written(Group& grp, const Place& p) {
    for (Group::Written& w : grp.written)
      if (w.place.same(p)) return &w;
    return nullptr;
  }
  static int find_input(const Group& grp, const Place& p) {
    for (size_t i = 0; i < grp.input_places.size(); ++i)
      if (grp.input_places[i].same(p)) return static_cast<int>(i);
    return -1;
  }
  static int scalar_index(Group& grp, ValueId v) {
    auto it = std::find(grp.scalars.begin(), grp.scalars.end(), v);
    if (it != grp.scalars.end()) return static_cast<int>(it - grp.scalars.begin());
    grp.scalars.push_back(v);
    return static_cast<int>(grp.scalars.size()) - 1;
  }

  // A result stays in registers when its buffer is an intermediate only the group touches.
  bool must_store(const Group& grp, const Group::Written& w) const {
    const ValueId b = w.place.base;
    return launch_[b] || first_touch_[b] < grp.first || last_touch_[b] > grp.last;
  }

  // Appends the group's node; false when the group is dead code (nothing appended).
  bool emit(const Group& grp, std::vector<Node>& out) const {
    const int nin = static_cast<int>(grp.inputs.size());
    auto reg = [&](const Src& s) -> int64_t {
      switch (s.kind) {
        case Src::Input:
          return s.index;
        case Src::Step:
          return nin + s.index;
        case Src::Scalar:
          return -1 - s.index;
      }
      return 0;
    };
    std::vector<ValueId> outputs;
    std::vector<int64_t> out_regs;
    for (const Group::Written& w : grp.written) {
      if (!must_store(grp, w)) continue;
      outputs.push_back(w.value);
      out_regs.push_back(nin + w.step);
    }
    if (outputs.empty()) return false;  // no result is ever read: dead code
    std::vector<int64_t> attrs = {nin, static_cast<int64_t>(grp.scalars.size()),
                                  static_cast<int64_t>(grp.steps.size()),
                                  static_cast<int64_t>(outputs.size())};
    for (const Group::Step& s : grp.steps) {
      attrs.insert(attrs.end(), {static_cast<int64_t>(s.op), static_cast<int64_t>(s.dtype),
                                 reg(s.a), reg(s.b), s.coef});
    }
    attrs.insert(attrs.end(), out_regs.begin(), out_regs.end());
    std::vector<ValueId> inputs = grp.inputs;
    inputs.insert(inputs.end(), grp.scalars.begin(), grp.scalars.end());
    out.push_back(
        Node{Op::FusedElementwise, std::move(inputs), std::move(outputs), std::move(attrs)});
    return true;
  }

  const Graph& g_;
  std::vector<int> first_touch_, last_touch_;
  std::vector<char> launch_;
  bool valid_ = true;  // every id in range
};

}  // namespace

std::optional<Graph> fuse_elementwise(const Graph& graph, int* groups) {
  return Fuser(graph).run(groups);
}

}  // namespace openneuron::compiler::detail
