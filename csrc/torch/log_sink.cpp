// openneuron._C._set_log_sink: the runtime's messages (onrt_log_*, from the
// runtime, the compiler and the bridge) handed to a Python callable, the
// `openneuron.runtime` logger. A message logged on a thread that holds the GIL
// is delivered at once. One from another thread (a stream worker, autograd's
// device thread) waits in a bounded queue for the next delivery or
// _flush_log(): taking the GIL there could deadlock against a Python thread
// that is waiting for that very worker.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "openneuron/runtime.h"

namespace py = pybind11;

namespace openneuron::bridge {
namespace {

constexpr size_t kMaxPending = 1000;

struct PySink {
  std::mutex mu;
  std::deque<std::pair<int, std::string>> pending;
  uint64_t dropped = 0;
  py::object fn;  // read and written with the GIL only
};

PySink& py_sink() {
  static PySink* s = new PySink;  // never destroyed: workers may log during exit
  return *s;
}

void call(const py::object& fn, int level, const std::string& message) {
  try {
    fn(level, message);
  } catch (py::error_already_set& e) {  // a broken handler must not break the op that logged
    e.discard_as_unraisable("openneuron runtime log sink");
  }
}

// With the GIL.
void flush() {
  PySink& s = py_sink();
  std::deque<std::pair<int, std::string>> pending;
  uint64_t dropped;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    pending.swap(s.pending);
    dropped = std::exchange(s.dropped, 0);
  }
  if (!s.fn) return;
  for (const auto& [level, message] : pending) call(s.fn, level, message);
  if (dropped > 0) {
    call(s.fn, ONRT_LOG_WARNING,
         std::to_string(dropped) + " runtime messages from non-Python threads were dropped");
  }
}

void on_message(int level, const char* message, void*) {
  if (!Py_IsInitialized() || !PyGILState_Check()) {
    PySink& s = py_sink();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.pending.size() < kMaxPending) {
      s.pending.emplace_back(level, message);
    } else {
      ++s.dropped;
    }
    return;
  }
  flush();
  if (py_sink().fn) call(py_sink().fn, level, message);
}

}  // namespace

void bind_log_sink(py::module_& m) {
  m.def(
      "_set_log_sink",
      [](py::object fn, int level) {
        if (fn.is_none()) {
          onrt_log_set_callback(nullptr, nullptr, 0);
          flush();
          py_sink().fn = py::object();
          return;
        }
        py_sink().fn = std::move(fn);
        onrt_log_set_callback(&on_message, nullptr, level);
      },
      py::arg("fn"), py::arg("level") = static_cast<int>(ONRT_LOG_DEBUG),
      "Sends the runtime's messages at `level` and above to fn(level, message); None "
      "restores the default (warnings and errors on stderr).");
  m.def("_flush_log", &flush,
        "Delivers the messages other threads logged since the last delivery.");
}

}  // namespace openneuron::bridge
