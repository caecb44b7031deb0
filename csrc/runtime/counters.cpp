// The process-wide observability counters (counters.h) and onrt_get_counters.
#include "counters.h"

#include "openneuron/runtime.h"
#include "status.h"

namespace openneuron::runtime {

Counters& counters() {
  static Counters c;
  return c;
}

}  // namespace openneuron::runtime

extern "C" onrt_status onrt_get_counters(onrt_counters* out) {
  if (out == nullptr) {
    return openneuron::runtime::fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_get_counters: out is NULL");
  }
  auto& c = openneuron::runtime::counters();
  out->launches = c.launches.load(std::memory_order_relaxed);
  out->instructions_executed = c.instructions_executed.load(std::memory_order_relaxed);
  out->copies = c.copies.load(std::memory_order_relaxed);
  out->synchronizations = c.synchronizations.load(std::memory_order_relaxed);
  return ONRT_OK;
}
