// How a caller's wait for device work may end early: the embedding's wait
// check (onrt_set_wait_check, e.g. Ctrl-C) and the watchdog
// (OPENNEURON_WATCHDOG_SECONDS). Read by Stream::wait_until once per wait
// that goes to sleep.
#pragma once

#include <cstdint>

#include "openneuron/runtime.h"

namespace openneuron::runtime {

struct WaitPolicy {
  onrt_wait_check check = nullptr;
  void* user = nullptr;
  int64_t period_ns = 0;    // how often check runs while sleeping
  int64_t watchdog_ns = 0;  // 0: no watchdog
};

WaitPolicy wait_policy();
void set_watchdog_seconds(double seconds);  // from the configuration, at init

}  // namespace openneuron::runtime
