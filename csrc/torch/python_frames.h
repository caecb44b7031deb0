// Python stacks gathered by torch::CapturedTraceback, turned into the lists of
// {"filename", "line", "name"} dicts (innermost frame first) that
// torch.cuda.memory._snapshot() uses. Symbolized in one batch, so frames
// shared between stacks become one Python object.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace torch {
struct CapturedTraceback;
}  // namespace torch

namespace openneuron::bridge {

// Hidden like the pybind11 objects it holds: used only inside _C.
class __attribute__((visibility("hidden"))) PythonFrames {
 public:
  // Index to get() after symbolize(); a null stack gets an empty list.
  size_t add(const std::shared_ptr<torch::CapturedTraceback>& stack);
  void symbolize();  // needs the GIL
  pybind11::object get(size_t index) const;

 private:
  std::vector<torch::CapturedTraceback*> pending_;
  std::vector<std::shared_ptr<torch::CapturedTraceback>> keep_;
  std::vector<pybind11::object> symbolized_;
};

}  // namespace openneuron::bridge
