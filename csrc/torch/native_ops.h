// Registration of native neuron kernels with a way out: a kernel whose lowering
// declines a call (c10::NotImplementedError: a dtype without a device
// representation, parameters the engine does not cover) does not fail the
// user's program; the call runs as a host library kernel instead (PyTorch's CPU
// kernel in place on device memory, host_library.cpp), or through the CPU
// fallback when it cannot run in place. Such calls are counted under the op's
// name in openneuron.library_stats() / fallback_stats(), so a lowering that
// declines often is visible.
//
// Use inside TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib): `NativeOps m(lib);` and
// register as usual with m.impl("op.overload", kernel). A kernel must decline
// before it mutates its arguments.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <string>

#include "bridge.h"

namespace openneuron::bridge {

// The aten operator registered under `name` ("add.Tensor"), looked up on the
// first declined call.
const c10::OperatorHandle& aten_operator(const std::string& name);

class NativeOps {
 public:
  explicit NativeOps(torch::Library& lib) : lib_(lib) {}

  template <class R, class... A>
  NativeOps& impl(const char* name, R (*kernel)(A...)) {
    lib_.impl(name, torch::CppFunction([kernel, op = std::string(name)](A... args) -> R {
      try {
        return kernel(args...);  // lvalues: the arguments stay usable if it declines
      } catch (const c10::NotImplementedError&) {
        return c10::impl::BoxedKernelWrapper<R(A...)>::call(
            c10::BoxedKernel::makeFromFunction<&boxed_cpu_fallback>(), aten_operator(op),
            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), args...);
      }
    }));
    return *this;
  }

  NativeOps& impl(const char* name, torch::CppFunction&& f) {
    lib_.impl(name, std::move(f));
    return *this;
  }

 private:
  torch::Library& lib_;
};

}  // namespace openneuron::bridge
