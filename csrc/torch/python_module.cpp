// openneuron._C: the small native surface the Python package needs. Plain
// pybind11 over builtin types, so this file stays cheap to compile.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <mutex>

#include "bridge.h"
#include "openneuron/compiler/compiler.h"
#include "python_frames.h"

namespace py = pybind11;
using namespace openneuron;
using namespace openneuron::bridge;

namespace openneuron::bridge {
void bind_distributed(py::module_& m);   // process_group.cpp
void bind_graph_capture(py::module_& m);  // graph_capture.cpp
void bind_memory_history(py::module_& m);  // memory_history.cpp
void bind_log_sink(py::module_& m);        // log_sink.cpp
void bind_wait_check(py::module_& m);      // python_interrupts.cpp
}  // namespace openneuron::bridge

namespace {

py::dict device_properties(int index) {
  check_device_index(static_cast<c10::DeviceIndex>(index));
  onrt_device_properties p{};
  ONRT_CHECK(onrt_device_get_properties(index, &p));
  py::dict d;
  d["name"] = std::string(p.name);
  d["platform"] = std::string(p.platform);
  d["total_memory"] = p.total_memory;
  d["physical_index"] = p.physical_index;
  d["supports_fp8"] = static_cast<bool>(p.supports_fp8);
  d["supports_bf16"] = static_cast<bool>(p.supports_bf16);
  d["supports_fp16"] = static_cast<bool>(p.supports_fp16);
  d["host_mapped"] = static_cast<bool>(p.host_mapped);
  return d;
}

py::dict compile_cache_stats() {
  const auto s = compiler::ProgramCache::global().stats();
  py::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["entries"] = s.entries;
  d["capacity"] = s.capacity;
  d["evictions"] = s.evictions;
  d["compile_seconds"] = s.compile_seconds;
  return d;
}

// Every op that ran through the CPU fallback or a host library kernel, and
// every dtype narrowed on the device, with what it cost and where it was first
// called: the data of `openneuron report`.
py::list observed_ops() {
  struct Row {
    const char* kind;
    std::string op;
    OpCallRecord record;
    size_t frames;
  };
  std::vector<Row> rows;
  PythonFrames frames;
  for (const auto& [kind, counts] :
       {std::pair<const char*, OpCallCounts*>{"fallback", &fallback_calls()},
        {"library", &library_calls()},
        {"downcast", &downcasts()}}) {
    for (auto& [op, r] : counts->records())
      rows.push_back(Row{kind, op, r, frames.add(r.first_stack)});
  }
  frames.symbolize();
  py::list out;
  for (const Row& row : rows) {
    py::dict d;
    d["kind"] = row.kind;
    d["op"] = row.op;
    d["calls"] = row.record.calls;
    d["seconds"] = static_cast<double>(row.record.ns) * 1e-9;
    d["bytes_to_host"] = row.record.bytes_to_host;
    d["bytes_to_device"] = row.record.bytes_to_device;
    d["first_time_ns"] = row.record.first_time_ns;
    d["frames"] = frames.get(row.frames);
    out.append(d);
  }
  return out;
}

py::dict runtime_counters() {
  onrt_counters c{};
  ONRT_CHECK(onrt_get_counters(&c));
  py::dict d;
  d["launches"] = c.launches;
  d["instructions_executed"] = c.instructions_executed;
  d["copies"] = c.copies;
  d["synchronizations"] = c.synchronizations;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "OpenNeuron native bindings (runtime, compiler cache, fallback stats)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  m.def("init", [] { ensure_initialized(); });
  bind_distributed(m);
  bind_graph_capture(m);
  bind_memory_history(m);
  bind_log_sink(m);
  bind_wait_check(m);
  m.def("is_initialized", [] { return static_cast<bool>(onrt_is_initialized()); });
  m.def("in_bad_fork", [] { return static_cast<bool>(onrt_in_bad_fork()); });
  m.def("device_count", [] { return device_count(); });
  m.def("config_error", [] {
    // device_count() reports 0 on a bad configuration; this says why.
    int n = 0;
    return onrt_device_count(&n) == ONRT_OK ? std::string() : std::string(onrt_last_error());
  });
  m.def("platform_names", [] { return std::string(onrt_platform_names()); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int i) { set_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("check_device", [](int i) { check_device_index(static_cast<c10::DeviceIndex>(i)); });
  m.def("get_device_properties", &device_properties);
  m.def("synchronize", [](int i) {
    check_device_index(static_cast<c10::DeviceIndex>(i));
    if (!onrt_is_initialized()) return;
    py::gil_scoped_release release;
    ONRT_CHECK(onrt_device_synchronize(i));
  });
  // RNG of each device's default generator. States travel as bytes so this
  // module needs no torch Python bindings.
  m.def("manual_seed", [](int i, uint64_t seed) {
    at::Generator g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(seed);
  });
  m.def("seed", [](int i) {
    at::Generator g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.seed();
  });
  m.def("initial_seed", [](int i) {
    return default_generator(static_cast<c10::DeviceIndex>(i)).current_seed();
  });
  m.def("get_rng_state", [](int i) {
    at::Generator g = default_generator(static_cast<c10::DeviceIndex>(i));
    std::lock_guard<std::mutex> lock(g.mutex());
    at::Tensor state = g.get_state();
    return py::bytes(static_cast<const char*>(state.const_data_ptr()), state.nbytes());
  });
  m.def("set_rng_state", [](int i, const std::string& bytes) {
    at::Generator g = default_generator(static_cast<c10::DeviceIndex>(i));
    at::Tensor state = at::detail::empty_cpu({static_cast<int64_t>(bytes.size())}, c10::kByte,
                                             std::nullopt, std::nullopt, std::nullopt,
                                             std::nullopt);
    std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  });
  m.def("fallback_stats", [] {
    py::dict d;
    for (const auto& [name, n] : fallback_calls().snapshot()) d[py::str(name)] = n;
    return d;
  });
  m.def("reset_fallback_stats", [] { fallback_calls().reset(); });
  m.def("library_stats", [] {
    py::dict d;
    for (const auto& [name, n] : library_calls().snapshot()) d[py::str(name)] = n;
    return d;
  });
  m.def("reset_library_stats", [] { library_calls().reset(); });
  m.def("observed_ops", &observed_ops);
  m.def("reset_observed_ops", [] {
    fallback_calls().reset();
    library_calls().reset();
    downcasts().reset();
  });
  m.def("compile_cache_stats", &compile_cache_stats);
  m.def("op_table_fingerprint", [] { return compiler::op_table_fingerprint(); });
  m.def("runtime_counters", &runtime_counters);
  // Per-program device time for `openneuron report`: totals only, no records,
  // so a long run costs a map update per launch. Reference counted in the
  // runtime, so the report and a profiler can be active together.
  m.def("_device_trace_start", [] { ONRT_CHECK(onrt_trace_enable(ONRT_TRACE_TOTALS, 1, 0)); });
  m.def("_device_trace_stop", [] { ONRT_CHECK(onrt_trace_enable(ONRT_TRACE_TOTALS, 0, 0)); });
  m.def("_device_trace_totals", [] {
    py::dict d;
    onrt_trace_totals(
        [](const char* name, int64_t count, int64_t ns, void* user) {
          (*static_cast<py::dict*>(user))[py::str(name)] = py::make_tuple(count, ns);
        },
        &d);
    return d;
  });
}
