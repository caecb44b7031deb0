// Worker threads do not survive fork(), and the runtime's mutexes may have been
// held by them at that moment: a child forked after initialisation must not
// touch the runtime at all, only report why.
#include <pthread.h>

#include <mutex>

#include "state.h"

namespace openneuron::runtime {
namespace {

void on_fork_child() {
  if (g_init_state.load(std::memory_order_relaxed) == InitState::kReady) {
    g_init_state.store(InitState::kForked, std::memory_order_relaxed);
  }
}

}  // namespace

void install_fork_handler() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });
}

}  // namespace openneuron::runtime

extern "C" int onrt_in_bad_fork(void) {
  using namespace openneuron::runtime;
  return g_init_state.load(std::memory_order_acquire) == InitState::kForked ? 1 : 0;
}
