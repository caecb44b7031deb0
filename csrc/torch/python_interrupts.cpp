// Ctrl-C while Python waits for the device: the runtime's waits call the check
// installed here every 100 ms; it runs Python's signal handlers, and when one
// raises (KeyboardInterrupt), the wait ends and that very exception is raised
// from the op or synchronize() that waited. The queued device work goes on.
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <string>

#include "bridge.h"

namespace py = pybind11;

namespace openneuron::bridge {
namespace {

constexpr int kCheckPeriodMs = 100;

// The exception a signal handler raised, for raise_interrupted on this thread.
thread_local std::unique_ptr<py::error_already_set> pending_interrupt;

bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Python runs signal handlers on its main thread only. Other threads (autograd's
// device threads, a data loader's) never take the GIL here: one of them may be
// what a Python thread holding the GIL is waiting for.
std::atomic<unsigned long> main_thread{0};

int check_python_signals(void*) {
  if (PyThread_get_thread_ident() != main_thread.load(std::memory_order_relaxed)) return 0;
  if (!Py_IsInitialized() || python_finalizing()) return 0;
  py::gil_scoped_acquire gil;  // the waiting thread may have released it
  if (PyErr_CheckSignals() == 0) return 0;
  pending_interrupt = std::make_unique<py::error_already_set>();
  return 1;
}

}  // namespace

[[noreturn]] void raise_interrupted(const std::string& message) {
  if (pending_interrupt) {
    std::unique_ptr<py::error_already_set> e = std::move(pending_interrupt);
    throw py::error_already_set(std::move(*e));
  }
  TORCH_CHECK(false, message);
}

void bind_wait_check(py::module_&) {
  main_thread.store(
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>(),
      std::memory_order_relaxed);
  onrt_set_wait_check(&check_python_signals, nullptr, kCheckPeriodMs);
}

}  // namespace openneuron::bridge
