// Graph -> program: validate the graph's wiring, place values, run the
// per-op emitters, and hand the instruction list to the runtime.
#include <algorithm>

#include "lowering.h"

namespace openneuron::compiler {

Program::~Program() {
  if (handle) onrt_program_release(handle);
}

bool run_on_host(const Program& program, const onrt_arg* args, int32_t nargs,
                 std::string* error) {
  std::vector<onrt_arg> local;
  char err[512];
  for (const Instruction& ins : program.instructions) {
    local.clear();
    for (int32_t s : ins.arg_slots) {
      if (s < 0 || s >= nargs) {
        if (error) *error = program.name + ": " + ins.name + ": argument slot out of range";
        return false;
      }
      local.push_back(args[s]);
    }
    err[0] = '\0';
    if (ins.fn(ins.params.data(), local.data(), err, sizeof err) != 0) {
      if (error) *error = program.name + ": " + ins.name + ": " + err;
      return false;
    }
  }
  return true;
}

namespace {

std::string program_name(const Graph& g) {
  if (g.nodes().size() == 1) return op_name(g.nodes()[0].op);
  std::string n = "graph[";
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (i == 4) {
      n += ",...";
      break;
    }
    if (i) n += ',';
    n += op_name(g.nodes()[i].op);
  }
  return n + "]";
}

// The graph the passes make, or nullopt when they change nothing.
std::optional<Graph> run_passes(const Graph& graph, const CompileOptions& options,
                                int* fused_groups) {
  *fused_groups = 0;
  if (!options.fuse || graph.nodes().size() <= 1) return std::nullopt;
  return detail::fuse_elementwise(graph, fused_groups);
}

}  // namespace

Graph after_passes(const Graph& graph, const CompileOptions& options) {
  int groups = 0;
  std::optional<Graph> changed = run_passes(graph, options, &groups);
  return changed ? std::move(*changed) : graph;
}

std::shared_ptr<const Program> compile(const Graph& source, const CompileOptions& options) {
  using namespace detail;
  const std::string pname = program_name(source);
  // Tensor types first, before any pass computes extents: a graph read from bytes may
  // hold any integers, and neither an extent nor an element count may overflow.
  for (const ValueType& t : source.values()) {
    if (t.kind != ValueKind::Tensor) continue;
    const TensorType& tt = t.tensor;
    if (tt.ndim < 0 || tt.ndim > kMaxDims)
      throw CompileError(pname + ": tensor with " + std::to_string(tt.ndim) + " dims");
    int64_t span = 1, numel = 1;
    bool overflow = false;
    for (int d = 0; d < tt.ndim; ++d) {
      overflow = overflow || __builtin_mul_overflow(numel, tt.sizes[d], &numel);
      if (tt.sizes[d] < 0 || tt.strides[d] < 0)
        throw CompileError(pname + ": negative size or stride in " + describe(tt));
      int64_t step = 0;
      if (tt.sizes[d] > 0)
        overflow = overflow || __builtin_mul_overflow(tt.sizes[d] - 1, tt.strides[d], &step) ||
                   __builtin_add_overflow(span, step, &span);
    }
    overflow = overflow || __builtin_mul_overflow(span, static_cast<int64_t>(dtype_size(tt.dtype)), &span);
    if (overflow) throw CompileError(pname + ": tensor too large: " + describe(tt));
  }
  int fused_groups = 0;
  const std::optional<Graph> fused = run_passes(source, options, &fused_groups);
  const Graph& graph = fused ? *fused : source;
  const auto& values = graph.values();
  const int nv = static_cast<int>(values.size());
  auto graph_error = [&](const std::string& msg) { throw CompileError(pname + ": " + msg); };
  auto check_id = [&](ValueId v, const char* what) {
    if (v < 0 || v >= nv) graph_error(std::string(what) + " refers to unknown value " + std::to_string(v));
  };

  // Launch slots: inputs, then outputs.
  std::vector<Ref> refs(nv);
  std::vector<char> is_launch(nv, 0), defined(nv, 0);
  int32_t slot = 0;
  // Bases of views are written and read through their views, in node order:
  // the once-only definition checks below apply to the other values.
  std::vector<char> buffer(nv, 0);
  for (int v = 0; v < nv; ++v) {
    if (graph.is_view(v)) buffer[v] = buffer[graph.views()[v].base] = 1;
  }
  for (ValueId v : graph.inputs()) {
    check_id(v, "input");
    if (graph.is_view(v)) graph_error("input value " + std::to_string(v) + " is a view");
    if (is_launch[v]) graph_error("value " + std::to_string(v) + " is listed twice as an input");
    is_launch[v] = 1;
    defined[v] = 1;
    Ref& r = refs[v];
    r.kind = values[v].kind;
    r.slot = slot++;
    if (r.is_tensor()) r.type = values[v].tensor;
    if (r.is_scalar()) {
      r.scalar.slot = r.slot;
      r.scalar.is_float = r.kind == ValueKind::ScalarFloat;
    }
  }
  for (ValueId v : graph.outputs()) {
    check_id(v, "output");
    if (values[v].kind != ValueKind::Tensor) graph_error("output value " + std::to_string(v) + " must be a tensor");
    if (graph.is_view(v)) graph_error("output value " + std::to_string(v) + " is a view");
    if (is_launch[v]) {
      ++slot;  // the caller still passes it; reads and writes use the first slot
      continue;
    }
    is_launch[v] = 1;
    refs[v].kind = ValueKind::Tensor;
    refs[v].slot = slot++;
    refs[v].type = values[v].tensor;
  }
  const int32_t scratch_slot = slot;

  // Wiring: every node input defined earlier, every value defined once.
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& n = graph.nodes()[i];
    for (ValueId v : n.inputs) {
      check_id(v, op_name(n.op));
      if (!defined[v] && !buffer[v])
        graph_error(std::string(op_name(n.op)) + " (node " + std::to_string(i) + ") reads value " +
                    std::to_string(v) + " before it is defined");
    }
    for (ValueId v : n.outputs) {
      check_id(v, op_name(n.op));
      if (defined[v] && !buffer[v])
        graph_error(std::string(op_name(n.op)) + " (node " + std::to_string(i) +
                    ") writes value " + std::to_string(v) + " which is already defined");
      if (values[v].kind != ValueKind::Tensor)
        graph_error(std::string(op_name(n.op)) + " writes non-tensor value " + std::to_string(v));
      defined[v] = 1;
    }
  }
  for (ValueId v : graph.outputs())
    if (!defined[v] && !buffer[v]) graph_error("output " + std::to_string(v) + " is never written");

  for (const ValueType& t : values) {
    if (t.kind != ValueKind::Tensor) continue;
    const TensorType& tt = t.tensor;
    if (tt.ndim < 0 || tt.ndim > kMaxDims) graph_error("tensor with " + std::to_string(tt.ndim) + " dims");
    for (int d = 0; d < tt.ndim; ++d)
      if (tt.sizes[d] < 0 || tt.strides[d] < 0) graph_error("negative size or stride in " + describe(tt));
  }

  // Intermediates go to scratch.
  const MemoryPlan plan = plan_memory(graph, is_launch);
  for (int v = 0; v < nv; ++v) {
    if (plan.offset[v] < 0) continue;
    Ref& r = refs[v];
    r.kind = ValueKind::Tensor;
    r.slot = scratch_slot;
    r.offset = plan.offset[v];
    r.type = values[v].tensor;
  }
  std::vector<char> used(nv, 0);
  for (const Node& n : graph.nodes())
    for (const auto* list : {&n.inputs, &n.outputs})
      for (ValueId v : *list) used[v] = 1;
  for (int v = 0; v < nv; ++v) {
    if (!graph.is_view(v) || !used[v]) continue;  // a pass may drop every use of a buffer
    const ViewOf& view = graph.views()[v];
    Ref& r = refs[v];
    r = refs[view.base];
    if (!r.is_tensor()) graph_error("view " + std::to_string(v) + " of value " + std::to_string(view.base) +
                                    ", which is neither an argument nor read or written by a node");
    if (view.offset < 0 ||
        static_cast<uint64_t>(view.offset) + storage_bytes(values[v].tensor) > storage_bytes(values[view.base].tensor))
      graph_error("view " + std::to_string(v) + " (" + describe(values[v].tensor) + " at byte " +
                  std::to_string(view.offset) + ") reaches past its base " + describe(values[view.base].tensor));
    r.offset += view.offset;
    r.type = values[v].tensor;
  }

  LowerCtx ctx(graph, std::move(refs), scratch_slot, plan.bytes);
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    ctx.begin_node(static_cast<int>(i));
    Emitter e = find_emitter(graph.nodes()[i].op);
    if (!e) ctx.fail("no lowering for this op");
    e(ctx);
  }

  auto prog = std::make_shared<Program>();
  prog->name = pname;
  prog->fused_groups = fused_groups;
  prog->scratch_bytes = std::max<uint64_t>(plan.bytes, ctx.scratch_end());
  if (prog->scratch_bytes > 0) prog->scratch_bytes = align_up(prog->scratch_bytes);
  prog->num_args = scratch_slot + (prog->scratch_bytes > 0 ? 1 : 0);
  prog->instructions = std::move(ctx.instructions());

  onrt_program_t h = nullptr;
  if (onrt_program_create(prog->name.c_str(), &h) != ONRT_OK)
    throw CompileError(prog->name + ": onrt_program_create failed: " + onrt_last_error());
  prog->handle = h;
  for (const Instruction& ins : prog->instructions) {
    if (onrt_program_add_instruction(h, ins.name.c_str(), ins.fn, ins.params.data(),
                                     ins.params_size, ins.arg_slots.data(),
                                     static_cast<int32_t>(ins.arg_slots.size())) != ONRT_OK)
      throw CompileError(prog->name + ": onrt_program_add_instruction failed: " +
                         onrt_last_error());
  }
  return prog;
}

}  // namespace openneuron::compiler
