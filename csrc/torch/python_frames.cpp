// PythonFrames (python_frames.h).
#include "python_frames.h"

#include <torch/csrc/profiler/combined_traceback.h>

#include <cstdint>

namespace py = pybind11;

namespace openneuron::bridge {

size_t PythonFrames::add(const std::shared_ptr<torch::CapturedTraceback>& stack) {
  if (!stack) return SIZE_MAX;
  pending_.push_back(stack.get());
  keep_.push_back(stack);
  return pending_.size() - 1;
}

void PythonFrames::symbolize() {
  const torch::SymbolizedTracebacks s = torch::symbolize(pending_);
  std::vector<py::dict> all;
  all.reserve(s.all_frames.size());
  for (const auto& f : s.all_frames) {
    py::dict d;
    d["filename"] = f.filename;
    d["line"] = f.lineno;
    d["name"] = f.funcname;
    all.push_back(std::move(d));
  }
  symbolized_.clear();
  for (const auto& tb : s.tracebacks) {
    py::list frames;
    for (uint64_t i : tb) frames.append(all.at(i));
    symbolized_.push_back(std::move(frames));
  }
}

py::object PythonFrames::get(size_t index) const {
  return index == SIZE_MAX ? py::list() : symbolized_.at(index);
}

}  // namespace openneuron::bridge
