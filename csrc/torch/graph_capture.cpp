// Whole-graph programs for torch.compile(backend="neuron"): the first run of a
// compiled graph executes op by op as in eager mode while every launch is
// recorded (compiler::CaptureBuilder); the recording compiles to one program,
// and later calls with inputs of the same layout launch that program once.
#include "graph_capture.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "bridge.h"
#include "engine.h"
#include "openneuron/compiler/affine_fit.h"
#include "openneuron/compiler/capture.h"
#include "openneuron/compiler/graph_io.h"
#include "openneuron/compiler/compiler.h"

namespace py = pybind11;

namespace openneuron::bridge {
namespace {

// What a replay checks of each input: the layout the program was recorded for.
struct InputGuard {
  int storage = -1;  // -1: an empty storage (nothing to pass)
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  uint64_t nbytes = 0;
};

struct OutputSpec {
  compiler::CaptureBuilder::Location where;
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, strides;
};

// A random op's reservation, made again at every replay.
struct RandomDraw {
  std::optional<at::Generator> gen;
  c10::DeviceIndex device;
  uint64_t increment;
};

struct Capture {
  compiler::CaptureBuilder builder;
  c10::DeviceIndex device = -1;
  std::vector<InputGuard> guards;
  std::vector<RandomDraw> draws;
};

thread_local Capture* tls_capture = nullptr;

class CapturedGraph {
 public:
  std::shared_ptr<const compiler::Program> program;
  std::vector<compiler::CaptureBuilder::InputSlot> slots;
  std::vector<uint64_t> output_bytes;
  std::vector<InputGuard> guards;
  std::vector<int> storage_input;  // an input holding each storage
  std::vector<int> written_inputs;  // inputs whose storage the program writes
  std::vector<OutputSpec> outputs;
  std::vector<RandomDraw> draws;
  c10::DeviceIndex device = -1;
  int64_t captured_launches = 0;
  size_t nodes = 0;
  compiler::Graph graph;  // as recorded, before the compiler's passes (debug dumps)

  // The outputs, or nothing when an input's layout differs from the recording.
  std::optional<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) const {
    if (inputs.size() != guards.size()) return std::nullopt;
    std::vector<const void*> storage_ptr(storage_input.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& t = inputs[i];
      const InputGuard& g = guards[i];
      if (!t.defined() || !t.device().is_privateuseone() || t.device().index() != device ||
          t.scalar_type() != g.dtype || t.sizes() != at::IntArrayRef(g.sizes) ||
          t.strides() != at::IntArrayRef(g.strides) || t.storage_offset() != g.storage_offset) {
        return std::nullopt;
      }
      if (g.storage < 0) continue;
      const void* base = t.storage().data();
      if (t.storage().nbytes() < g.nbytes) return std::nullopt;
      if (storage_ptr[g.storage] == nullptr) {
        // Storages recorded apart must be apart: the program's order and fusion rely on it.
        for (const void* other : storage_ptr)
          if (other == base) return std::nullopt;
        storage_ptr[g.storage] = base;
      }
      if (storage_ptr[g.storage] != base) return std::nullopt;  // recorded as one storage
    }
    capture_unsupported("a whole-graph program launched while recording another");
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    const c10::Device dev(c10::DeviceType::PrivateUse1, device);
    // Fresh numbers for every random op, reserved in the order the recording did.
    std::vector<std::pair<uint64_t, uint64_t>> drawn;
    drawn.reserve(draws.size());
    for (const RandomDraw& d : draws) drawn.push_back(philox_reserve(d.gen, d.device, d.increment));
    std::vector<onrt_arg> args;
    args.reserve(slots.size() + output_bytes.size() + 1);
    for (const auto& s : slots) {
      onrt_arg a = s.constant;
      if (s.storage >= 0) a.ptr = const_cast<void*>(storage_ptr[s.storage]);
      if (s.draw >= 0) {
        const auto& [seed, offset] = drawn[s.draw];
        a.i = static_cast<int64_t>(s.draw_offset ? offset : seed);
      }
      args.push_back(a);
    }
    std::vector<at::Tensor> buffers;
    buffers.reserve(output_bytes.size());
    for (uint64_t n : output_bytes) {
      buffers.push_back(empty_device({static_cast<int64_t>(n)}, c10::kByte, dev));
      onrt_arg a{};
      a.ptr = buffers.back().data_ptr();
      args.push_back(a);
    }
    // Freed (stream-ordered) when this returns: the launch is queued before it.
    at::Tensor scratch;
    if (program->scratch_bytes > 0) {
      scratch = empty_device({static_cast<int64_t>(program->scratch_bytes)}, c10::kByte, dev);
      onrt_arg a{};
      a.ptr = scratch.data_ptr();
      args.push_back(a);
    }
    ONRT_CHECK(onrt_program_launch(current_runtime_stream(device), program->handle, args.data(),
                                   static_cast<int32_t>(args.size())));
    // As the in-place ops of the op-by-op run would: autograd sees the inputs changed.
    for (int i : written_inputs) inputs[i].unsafeGetTensorImpl()->bump_version();
    std::vector<at::Tensor> out;
    out.reserve(outputs.size());
    for (const OutputSpec& o : outputs) {
      const auto opts = at::TensorOptions().dtype(o.dtype).device(dev);
      if (o.where.kind == compiler::CaptureBuilder::Location::Empty) {
        out.push_back(empty_device_strided(o.sizes, o.strides, o.dtype, dev));
        continue;
      }
      const c10::Storage& storage = o.where.kind == compiler::CaptureBuilder::Location::Input
                                        ? inputs[storage_input[o.where.index]].storage()
                                        : buffers[o.where.index].storage();
      const int64_t itemsize = static_cast<int64_t>(c10::elementSize(o.dtype));
      out.push_back(
          at::empty({0}, opts).set_(storage, o.where.offset / itemsize, o.sizes, o.strides));
    }
    return out;
  }

  // Symbolic sizes: the integers of the recording that may follow a host int, in a
  // fixed order, and everything else. Recordings at two values of the int with equal
  // structure() give each integer as slope * n + intercept (compiler::AffineFit).
  std::vector<int64_t> int_fields() const {
    std::vector<int64_t> f = graph.int_fields();
    for (const InputGuard& g : guards) {
      f.insert(f.end(), g.sizes.begin(), g.sizes.end());
      f.insert(f.end(), g.strides.begin(), g.strides.end());
      f.push_back(g.storage_offset);
      f.push_back(static_cast<int64_t>(g.nbytes));
    }
    for (const OutputSpec& o : outputs) {
      f.push_back(o.where.offset);
      f.insert(f.end(), o.sizes.begin(), o.sizes.end());
      f.insert(f.end(), o.strides.begin(), o.strides.end());
    }
    for (uint64_t n : output_bytes) f.push_back(static_cast<int64_t>(n));
    for (size_t i = 0; i < slots.size(); ++i) {
      if (int_constant(i)) f.push_back(slots[i].constant.i);
      if (integral_float_constant(i)) f.push_back(static_cast<int64_t>(slots[i].constant.f));
    }
    for (const RandomDraw& d : draws) f.push_back(static_cast<int64_t>(d.increment));
    return f;
  }

  std::string structure() const {
    std::string s = graph.structure();
    auto put = [&](int64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(device);
    for (const InputGuard& g : guards) {
      put(g.storage);
      put(static_cast<int64_t>(g.dtype));
      put(static_cast<int64_t>(g.sizes.size()));
    }
    for (const OutputSpec& o : outputs) {
      put(o.where.kind);
      put(o.where.index);
      put(static_cast<int64_t>(o.dtype));
      put(static_cast<int64_t>(o.sizes.size()));
    }
    put(static_cast<int64_t>(output_bytes.size()));
    for (size_t i = 0; i < slots.size(); ++i) {
      put(slots[i].storage);
      put(slots[i].draw);
      put(slots[i].draw_offset);
      put(integral_float_constant(i));
      if (!int_constant(i) && !integral_float_constant(i) && slots[i].storage < 0 &&
          slots[i].draw < 0)
        put(slots[i].constant.i);  // a float's bits
    }
    for (const RandomDraw& d : draws) {
      put(d.device);
      put(reinterpret_cast<intptr_t>(d.gen ? d.gen->unsafeGetGeneratorImpl() : nullptr));
    }
    for (int i : storage_input) put(i);
    for (int i : written_inputs) put(i);
    return s;
  }

  // This recording with other integers (int_fields() order), compiled; nullptr when
  // they make no valid recording (a negative size, a graph that does not compile).
  std::shared_ptr<CapturedGraph> with_int_fields(const std::vector<int64_t>& f) const {
    auto g = std::make_shared<CapturedGraph>(*this);
    const size_t ngraph = graph.int_fields().size();
    size_t i = ngraph;
    bool ok = true;
    auto next = [&](bool nonnegative) {
      const int64_t v = f.at(i++);
      ok = ok && (!nonnegative || v >= 0);
      return v;
    };
    for (InputGuard& gd : g->guards) {
      for (int64_t& v : gd.sizes) v = next(true);
      for (int64_t& v : gd.strides) v = next(true);
      gd.storage_offset = next(true);
      gd.nbytes = static_cast<uint64_t>(next(true));
    }
    for (OutputSpec& o : g->outputs) {
      o.where.offset = next(true);
      for (int64_t& v : o.sizes) v = next(true);
      for (int64_t& v : o.strides) v = next(true);
    }
    for (uint64_t& n : g->output_bytes) n = static_cast<uint64_t>(next(true));
    for (size_t k = 0; k < g->slots.size(); ++k) {
      if (int_constant(k)) g->slots[k].constant.i = next(false);
      if (integral_float_constant(k)) g->slots[k].constant.f = static_cast<double>(next(false));
    }
    for (RandomDraw& d : g->draws) d.increment = static_cast<uint64_t>(next(true));
    if (!ok || i != f.size()) return nullptr;
    try {
      g->graph = graph.with_int_fields(std::vector<int64_t>(f.begin(), f.begin() + ngraph));
      g->program = compiler::compile(g->graph, compiler::process_compile_options());
    } catch (const std::exception&) {
      return nullptr;
    }
    return g;
  }

  // The recording as bytes for the on-disk cache (compiler/graph_io.h), or nothing when
  // it cannot be replayed by another process (a random op on a caller's generator).
  std::optional<std::string> serialize() const {
    for (const RandomDraw& d : draws)
      if (d.gen) return std::nullopt;
    compiler::ByteWriter w;
    compiler::write_graph(w, graph);
    w.i64(device);
    w.i64(captured_launches);
    w.i64(static_cast<int64_t>(slots.size()));
    for (const auto& sl : slots) {
      w.i64(sl.storage);
      w.i64(sl.draw);
      w.i64(sl.draw_offset);
      w.i64(sl.constant.i);  // the union's bits, whichever member was set
    }
    w.ints({output_bytes.begin(), output_bytes.end()});
    w.i64(static_cast<int64_t>(guards.size()));
    for (const InputGuard& g : guards) {
      w.i64(g.storage);
      w.i64(static_cast<int64_t>(g.dtype));
      w.ints(g.sizes);
      w.ints(g.strides);
      w.i64(g.storage_offset);
      w.i64(static_cast<int64_t>(g.nbytes));
    }
    w.ints({storage_input.begin(), storage_input.end()});
    w.ints({written_inputs.begin(), written_inputs.end()});
    w.i64(static_cast<int64_t>(outputs.size()));
    for (const OutputSpec& o : outputs) {
      w.i64(o.where.kind);
      w.i64(o.where.index);
      w.i64(o.where.offset);
      w.i64(static_cast<int64_t>(o.dtype));
      w.ints(o.sizes);
      w.ints(o.strides);
    }
    w.i64(static_cast<int64_t>(draws.size()));
    for (const RandomDraw& d : draws) {
      w.i64(d.device);
      w.i64(static_cast<int64_t>(d.increment));
    }
    return w.take();
  }

  // The inverse of serialize(), compiled. Throws compiler::FormatError for bytes that
  // are not such a recording (checked field by field; the graph must compile).
  static std::shared_ptr<CapturedGraph> deserialize(const std::string& bytes) {
    using compiler::FormatError;
    compiler::ByteReader r(bytes);
    auto g = std::make_shared<CapturedGraph>();
    g->graph = compiler::read_graph(r);
    g->device = static_cast<c10::DeviceIndex>(r.in_range(0, 1023, "device"));
    g->captured_launches = r.in_range(0, INT64_MAX, "launch count");
    g->nodes = g->graph.nodes().size();
    const int64_t nslots = r.count(32, "slot count");
    if (nslots != static_cast<int64_t>(g->graph.inputs().size())) throw FormatError("slot count");
    for (int64_t i = 0; i < nslots; ++i) {
      compiler::CaptureBuilder::InputSlot sl;
      sl.storage = static_cast<int>(r.in_range(-1, 1 << 24, "slot storage"));
      sl.draw = static_cast<int>(r.in_range(-1, 1 << 24, "slot draw"));
      sl.draw_offset = r.in_range(0, 1, "slot draw offset") != 0;
      sl.constant.i = r.i64();
      g->slots.push_back(sl);
    }
    for (int64_t n : r.ints(1 << 24)) {
      if (n < 0) throw FormatError("output buffer size");
      g->output_bytes.push_back(static_cast<uint64_t>(n));
    }
    if (g->output_bytes.size() != g->graph.outputs().size()) throw FormatError("output count");
    auto scalar_type = [&]() {
      return static_cast<c10::ScalarType>(
          r.in_range(0, static_cast<int64_t>(c10::ScalarType::NumOptions) - 1, "dtype"));
    };
    const int64_t nguards = r.count(40, "input count");
    for (int64_t i = 0; i < nguards; ++i) {
      InputGuard gd;
      gd.storage = static_cast<int>(r.in_range(-1, 1 << 24, "input storage"));
      gd.dtype = scalar_type();
      gd.sizes = r.ints(64);
      gd.strides = r.ints(64);
      gd.storage_offset = r.in_range(0, INT64_MAX, "storage offset");
      gd.nbytes = static_cast<uint64_t>(r.in_range(0, INT64_MAX, "storage bytes"));
      if (gd.sizes.size() != gd.strides.size()) throw FormatError("input layout");
      g->guards.push_back(std::move(gd));
    }
    const int64_t ninputs = static_cast<int64_t>(g->guards.size());
    for (int64_t i : r.ints(1 << 24)) {
      if (i < -1 || i >= ninputs) throw FormatError("storage input");
      g->storage_input.push_back(static_cast<int>(i));
    }
    for (int64_t i : r.ints(1 << 24)) {
      if (i < 0 || i >= ninputs) throw FormatError("written input");
      g->written_inputs.push_back(static_cast<int>(i));
    }
    const int64_t nstorages = static_cast<int64_t>(g->storage_input.size());
    for (const InputGuard& gd : g->guards)
      if (gd.storage >= nstorages) throw FormatError("input storage");
    // Every storage a launch uses is held by an input of that storage.
    auto held = [&](int storage) {
      return storage >= 0 && storage < nstorages && g->storage_input[storage] >= 0 &&
             g->guards[g->storage_input[storage]].storage == storage;
    };
    const int64_t nouts = r.count(48, "output count");
    for (int64_t i = 0; i < nouts; ++i) {
      OutputSpec o;
      o.where.kind = static_cast<compiler::CaptureBuilder::Location::Kind>(
          r.in_range(0, compiler::CaptureBuilder::Location::Empty, "output kind"));
      o.where.index = static_cast<int>(r.i64());
      o.where.offset = r.in_range(0, INT64_MAX, "output offset");
      o.dtype = scalar_type();
      o.sizes = r.ints(64);
      o.strides = r.ints(64);
      const int64_t bound = o.where.kind == compiler::CaptureBuilder::Location::Input
                                ? nstorages
                                : static_cast<int64_t>(g->output_bytes.size());
      if (o.sizes.size() != o.strides.size() ||
          (o.where.kind != compiler::CaptureBuilder::Location::Empty &&
           (o.where.index < 0 || o.where.index >= bound)) ||
          (o.where.kind == compiler::CaptureBuilder::Location::Input && !held(o.where.index)))
        throw FormatError("output");
      g->outputs.push_back(std::move(o));
    }
    const int64_t ndraws = r.count(16, "draw count");
    for (int64_t i = 0; i < ndraws; ++i) {
      RandomDraw d;
      d.device = static_cast<c10::DeviceIndex>(r.in_range(0, 1023, "draw device"));
      d.increment = static_cast<uint64_t>(r.in_range(0, INT64_MAX, "draw increment"));
      g->draws.push_back(d);
    }
    for (const auto& sl : g->slots)
      if ((sl.storage >= 0 && !held(sl.storage)) || sl.draw >= ndraws) throw FormatError("slot");
    if (!r.done()) throw FormatError("trailing bytes");
    try {
      g->program = compiler::compile(g->graph, compiler::process_compile_options());
    } catch (const compiler::CompileError& e) {
      throw FormatError(std::string("the graph does not compile: ") + e.what());
    }
    const int64_t args = nslots + static_cast<int64_t>(g->output_bytes.size()) +
                         (g->program->scratch_bytes > 0 ? 1 : 0);
    if (args != g->program->num_args) throw FormatError("argument count");
    return g;
  }

 private:
  bool int_constant(size_t i) const {
    return slots[i].storage < 0 && slots[i].draw < 0 &&
           graph.values()[graph.inputs()[i]].kind == compiler::ValueKind::ScalarInt;
  }
  // A float operand holding a whole number (a size added to a float tensor): it may
  // follow the sizes like an int.
  bool integral_float_constant(size_t i) const {
    if (slots[i].storage >= 0 || slots[i].draw >= 0 ||
        graph.values()[graph.inputs()[i]].kind != compiler::ValueKind::ScalarFloat)
      return false;
    const double v = slots[i].constant.f;
    return v == std::trunc(v) && std::fabs(v) < 9007199254740992.0 &&  // 2^53: exact
           !(v == 0 && std::signbit(v));  // -0.0 would come back as +0.0
  }
};

// A recording whose integers follow one host int n: instantiated for a new n without
// running the graph. Built from two recordings; trusted by the caller only after it
// predicted a third.
struct SymbolicGraph {
  std::shared_ptr<const CapturedGraph> base;
  std::string structure;
  compiler::AffineFit fit;

  static std::shared_ptr<SymbolicGraph> generalize(const CapturedGraph& a, int64_t na,
                                                   const CapturedGraph& b, int64_t nb) {
    // Random ops reserve ceil(elements / 4) Philox blocks: not affine in the sizes.
    if (!a.draws.empty()) return nullptr;
    std::string sa = a.structure();
    if (sa != b.structure()) return nullptr;
    auto f = compiler::AffineFit::fit(a.int_fields(), na, b.int_fields(), nb);
    if (!f) return nullptr;
    auto s = std::make_shared<SymbolicGraph>();
    s->base = std::make_shared<CapturedGraph>(a);
    s->structure = std::move(sa);
    s->fit = std::move(*f);
    return s;
  }

  bool predicts(const CapturedGraph& rec, int64_t n) const {
    const auto f = fit.at(n);
    return f && rec.structure() == structure && rec.int_fields() == *f;
  }

  std::shared_ptr<CapturedGraph> at(int64_t n) const {
    const auto f = fit.at(n);
    return f ? base->with_int_fields(*f) : nullptr;
  }
};

std::vector<int64_t> to_vec(at::IntArrayRef a) { return {a.begin(), a.end()}; }

void capture_begin(const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK(tls_capture == nullptr,
              "neuron: a graph capture is already recording on this thread");
  auto cap = std::make_unique<Capture>();
  cap->device = inputs.empty() ? current_device() : inputs.front().device().index();
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.defined() && t.device().is_privateuseone() && t.device().index() == cap->device,
                "neuron: graph capture takes tensors of one neuron device");
    InputGuard g{-1,
                 t.scalar_type(),
                 to_vec(t.sizes()),
                 to_vec(t.strides()),
                 t.storage_offset(),
                 t.storage().nbytes()};
    if (t.storage().data() != nullptr && g.nbytes > 0) {
      g.storage = cap->builder.add_input_storage(t.storage().data(), g.nbytes);
    }
    cap->guards.push_back(std::move(g));
  }
  tls_capture = cap.release();
}

void capture_abort() {
  delete tls_capture;
  tls_capture = nullptr;
}

// The compiled program, or the reason there is none.
py::object capture_end(const std::vector<at::Tensor>& outputs) {
  std::unique_ptr<Capture> cap(tls_capture);
  tls_capture = nullptr;
  TORCH_CHECK(cap != nullptr, "neuron: no graph capture is recording on this thread");
  compiler::CaptureBuilder& b = cap->builder;
  auto graph = std::make_shared<CapturedGraph>();
  for (const at::Tensor& t : outputs) {
    if (!t.defined() || !t.device().is_privateuseone() || t.device().index() != cap->device) {
      return py::str("an output that is not a tensor of the graph's device");
    }
    const TensorType type = tensor_type(t);
    const uint64_t extent = t.numel() == 0 ? 0 : compiler::CaptureBuilder::extent_bytes(type);
    OutputSpec o{b.locate_output(t.const_data_ptr(), extent), t.scalar_type(), to_vec(t.sizes()),
                 to_vec(t.strides())};
    if (o.where.offset % static_cast<int64_t>(t.element_size()) != 0) {
      return py::str("an output at an offset that is not a whole number of elements");
    }
    graph->outputs.push_back(std::move(o));
  }
  if (b.failed()) return py::str(b.failure());
  try {
    graph->program = compiler::compile(b.graph(), compiler::process_compile_options());
  } catch (const compiler::CompileError& e) {
    return py::str(std::string("the recorded graph did not compile: ") + e.what());
  }
  graph->slots = b.input_slots();
  graph->output_bytes = b.output_bytes();
  graph->device = cap->device;
  graph->captured_launches = b.launches();
  graph->nodes = b.graph().nodes().size();
  graph->graph = b.graph();
  graph->guards = std::move(cap->guards);
  graph->draws = std::move(cap->draws);
  for (size_t i = 0; i < graph->guards.size(); ++i) {
    const int s = graph->guards[i].storage;
    if (s < 0) continue;
    if (static_cast<size_t>(s) >= graph->storage_input.size())
      graph->storage_input.resize(s + 1, -1);
    if (graph->storage_input[s] < 0) graph->storage_input[s] = static_cast<int>(i);
  }
  const std::vector<int> written = b.written_storages();
  for (size_t i = 0; i < graph->guards.size(); ++i) {
    const int s = graph->guards[i].storage;
    if (s >= 0 && std::find(written.begin(), written.end(), s) != written.end())
      graph->written_inputs.push_back(static_cast<int>(i));
  }
  return py::cast(graph);
}

}  // namespace

compiler::CaptureBuilder* active_capture() { return tls_capture ? &tls_capture->builder : nullptr; }

void capture_unsupported(const char* what) {
  if (tls_capture != nullptr) tls_capture->builder.fail(what);
}

void capture_random_draw(const std::optional<at::Generator>& gen, c10::DeviceIndex device,
                         uint64_t increment, uint64_t seed, uint64_t offset) {
  if (tls_capture == nullptr) return;
  tls_capture->builder.expect_draw(static_cast<int>(tls_capture->draws.size()),
                                   static_cast<int64_t>(seed), static_cast<int64_t>(offset));
  tls_capture->draws.push_back(RandomDraw{gen, device, increment});
}

void bind_graph_capture(py::module_& m) {
  py::class_<CapturedGraph, std::shared_ptr<CapturedGraph>>(m, "CapturedGraph")
      .def("run", &CapturedGraph::run, py::arg("inputs"))
      .def_readonly("captured_launches", &CapturedGraph::captured_launches)
      .def_readonly("nodes", &CapturedGraph::nodes)
      .def_property_readonly("instructions",
                             [](const CapturedGraph& g) { return g.program->instructions.size(); })
      .def_property_readonly("scratch_bytes",
                             [](const CapturedGraph& g) { return g.program->scratch_bytes; })
      .def_property_readonly("fused_groups",
                             [](const CapturedGraph& g) { return g.program->fused_groups; })
      .def("serialize",
           [](const CapturedGraph& g) -> py::object {
             auto bytes = g.serialize();
             if (!bytes) return py::none();
             return py::bytes(*bytes);
           })
      .def("dump", [](const CapturedGraph& g) {
        const auto& options = compiler::process_compile_options();
        return compiler::to_text(g.graph) + "\n# after the compiler's passes (fusion " +
               (options.fuse ? "on" : "off") + ")\n" +
               compiler::to_text(compiler::after_passes(g.graph, options)) + "\n# program\n" +
               compiler::to_text(*g.program);
      });
  py::class_<SymbolicGraph, std::shared_ptr<SymbolicGraph>>(m, "SymbolicGraph")
      .def("predicts", &SymbolicGraph::predicts, py::arg("recording"), py::arg("n"))
      .def("at", &SymbolicGraph::at, py::arg("n"), py::call_guard<py::gil_scoped_release>());
  m.def("_generalize", &SymbolicGraph::generalize, py::arg("a"), py::arg("na"), py::arg("b"),
        py::arg("nb"));
  m.def(
      "_load_recording",
      [](const py::bytes& data) {
        try {
          return CapturedGraph::deserialize(std::string(data));
        } catch (const compiler::FormatError& e) {
          throw py::value_error(std::string("not a valid recording: ") + e.what());
        }
      },
      py::arg("data"));
  m.def("_capture_begin", &capture_begin, py::arg("inputs"));
  m.def("_capture_end", &capture_end, py::arg("outputs"));
  m.def("_capture_abort", &capture_abort);
}

}  // namespace openneuron::bridge
