#include "wait_policy.h"

#include <mutex>

namespace openneuron::runtime {
namespace {

std::mutex mu;
WaitPolicy policy;  // under mu: check and user change together

}  // namespace

WaitPolicy wait_policy() {
  std::lock_guard<std::mutex> lock(mu);
  return policy;
}

void set_watchdog_seconds(double seconds) {
  std::lock_guard<std::mutex> lock(mu);
  policy.watchdog_ns = static_cast<int64_t>(seconds * 1e9);
}

}  // namespace openneuron::runtime

extern "C" void onrt_set_wait_check(onrt_wait_check check, void* user, int period_ms) {
  using namespace openneuron::runtime;
  std::lock_guard<std::mutex> lock(mu);
  policy.check = check;
  policy.user = user;
  policy.period_ns =
      check != nullptr ? static_cast<int64_t>(period_ms > 0 ? period_ms : 100) * 1000000 : 0;
}
