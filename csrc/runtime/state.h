// Process-wide runtime state: the devices built from the configuration at
// initialisation, and the checks every entry point starts with.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "config.h"
#include "openneuron/runtime.h"

namespace openneuron::runtime {

class CachingAllocator;
class Stream;

struct Device {
  int index = 0;
  onrt_device_properties props{};
  std::unique_ptr<CachingAllocator> allocator;
  Stream* default_stream = nullptr;

  std::mutex streams_mu;
  // Indexed by stream id. Destroyed streams stay (stopped) so ids are never
  // reused and stale handles fail cleanly instead of touching freed memory.
  std::vector<std::unique_ptr<Stream>> streams;
};

struct Runtime {
  Config config;
  std::vector<std::unique_ptr<Device>> devices;
};

enum class InitState : int { kUninitialized, kReady, kForked };
extern std::atomic<InitState> g_init_state;

onrt_status ensure_runtime_slow();

// Initialises on first use; ONRT_ERROR_FORKED in a child forked after init.
inline onrt_status ensure_runtime() {
  if (g_init_state.load(std::memory_order_acquire) == InitState::kReady) [[likely]] {
    return ONRT_OK;
  }
  return ensure_runtime_slow();
}

// Only valid after ensure_runtime() succeeded.
Runtime& runtime();

// ensure_runtime() plus the device-index check with the user-facing message.
onrt_status get_device(int index, Device** out);

// ensure_runtime() plus handle validation (NULL, garbage, destroyed).
onrt_status get_stream(onrt_stream_t handle, const char* what, Stream** out);

// Whether launches and copies complete before returning (LAUNCH_BLOCKING);
// settable so tests can exercise both modes in one process.
bool launch_blocking();
void set_launch_blocking(bool on);

// Registers the pthread_atfork handler that flags forked children.
void install_fork_handler();

}  // namespace openneuron::runtime
