// Routing a case of a native op to the CPU: the helpers of bridge.h around
// the boxed fallback, so such calls warn, honour OPENNEURON_FALLBACK and are
// counted in openneuron.fallback_stats() like any other fallback.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include "bridge.h"

namespace openneuron::bridge {

void cpu_fallback_call(const char* name, const char* overload, std::vector<c10::IValue>* stack) {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  TORCH_INTERNAL_ASSERT(op.has_value(), "cpu_fallback_call: no operator ", name, ".", overload);
  boxed_cpu_fallback(*op, stack);
}

}  // namespace openneuron::bridge
