// The process-wide runtime state declared in state.h: initialisation
// (onrt_init, ensure_runtime: configuration, devices, fork handler), the
// device and stream lookups every entry point starts with, and the
// LAUNCH_BLOCKING switch.
#include "state.h"

#include <cstdio>
#include <mutex>

#include "allocator.h"
#include "contention.h"
#include "log.h"
#include "protect.h"
#include "status.h"
#include "stream.h"
#include "wait_policy.h"

namespace openneuron::runtime {

std::atomic<InitState> g_init_state{InitState::kUninitialized};

namespace {

// Never destroyed: worker threads may still be parked on its streams while the
// process exits, and a forked child must not run destructors for threads it
// does not have.
Runtime* g_runtime = nullptr;
std::mutex g_init_mu;
std::atomic<bool> g_launch_blocking{false};

constexpr const char* kForkedMessage =
    "the neuron runtime was initialised in the parent process and cannot be used in a forked "
    "child; use the 'spawn' start method (multiprocessing.set_start_method('spawn'))";

std::unique_ptr<Device> make_device(const Config& cfg, int index) {
  auto dev = std::make_unique<Device>();
  dev->index = index;
  onrt_device_properties& p = dev->props;
  snprintf(p.name, sizeof p.name, "OpenNeuron virtual NeuronCore (%s)", cfg.platform->name);
  snprintf(p.platform, sizeof p.platform, "%s", cfg.platform->name);
  p.total_memory = cfg.hbm_bytes_per_core;
  p.physical_index = cfg.visible_cores[index];
  p.supports_fp8 = cfg.platform->supports_fp8 ? 1 : 0;
  p.supports_bf16 = 1;
  p.supports_fp16 = 1;
  // A virtual core's memory is host memory, unless protected: then host code
  // (the host library kernels among it) must go through the runtime.
  p.host_mapped = cfg.protect_memory ? 0 : 1;
  dev->allocator = std::make_unique<CachingAllocator>(index, cfg.hbm_bytes_per_core);
  // Without the arena (no memfd, no address space) memory stays private and
  // the collectives stage copies instead: not a reason to fail initialisation.
  if (cfg.sharing == SharingMode::kFromStart) dev->allocator->enable_ipc();
  dev->streams.push_back(std::make_unique<Stream>(index, 0, 0));
  dev->default_stream = dev->streams[0].get();
  return dev;
}

}  // namespace

onrt_status ensure_runtime_slow() {
  if (g_init_state.load(std::memory_order_acquire) == InitState::kForked) {
    return fail(ONRT_ERROR_FORKED, kForkedMessage);
  }
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_init_state.load(std::memory_order_acquire) == InitState::kReady) return ONRT_OK;
  // A failed initialisation leaves nothing behind, so fixing the environment
  // and calling again works.
  auto rt = std::make_unique<Runtime>();
  std::string error;
  if (load_config(&rt->config, &error) != ONRT_OK) {
    return fail(ONRT_ERROR_INVALID_CONFIG, std::move(error));
  }
  if (rt->config.protect_memory && !enable_memory_protection(&error)) {
    return fail(ONRT_ERROR_INVALID_CONFIG, std::move(error));
  }
  for (size_t i = 0; i < rt->config.visible_cores.size(); ++i) {
    rt->devices.push_back(make_device(rt->config, static_cast<int>(i)));
  }
  g_launch_blocking.store(rt->config.launch_blocking, std::memory_order_relaxed);
  set_watchdog_seconds(rt->config.watchdog_seconds);
  set_contention_mode(rt->config.contention);
  install_fork_handler();
  g_runtime = rt.release();
  g_init_state.store(InitState::kReady, std::memory_order_release);
  const Config& c = g_runtime->config;
  logf(ONRT_LOG_INFO, "runtime ready: %zu virtual NeuronCores of platform %s, %.1f GiB each",
       c.visible_cores.size(), c.platform ? c.platform->name : "?",
       static_cast<double>(c.hbm_bytes_per_core) / (1ull << 30));
  return ONRT_OK;
}

Runtime& runtime() { return *g_runtime; }

onrt_status get_device(int index, Device** out) {
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  const int n = static_cast<int>(g_runtime->devices.size());
  if (index < 0 || index >= n) {
    if (n == 0) {
      return failf(ONRT_ERROR_INVALID_DEVICE,
                   "neuron device index %d is out of range: no cores are available", index);
    }
    if (n == 1) {
      return failf(ONRT_ERROR_INVALID_DEVICE,
                   "neuron device index %d is out of range: 1 core is available (neuron:0)", index);
    }
    return failf(ONRT_ERROR_INVALID_DEVICE,
                 "neuron device index %d is out of range: %d cores are available "
                 "(neuron:0..neuron:%d)",
                 index, n, n - 1);
  }
  *out = g_runtime->devices[index].get();
  return ONRT_OK;
}

onrt_status get_stream(onrt_stream_t handle, const char* what, Stream** out) {
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  Stream* s = to_stream(handle);
  if (s == nullptr || !s->valid()) {
    return failf(ONRT_ERROR_INVALID_HANDLE, "%s: invalid or destroyed stream handle", what);
  }
  *out = s;
  return ONRT_OK;
}

bool launch_blocking() { return g_launch_blocking.load(std::memory_order_relaxed); }
void set_launch_blocking(bool on) { g_launch_blocking.store(on, std::memory_order_relaxed); }

}  // namespace openneuron::runtime

extern "C" {

onrt_status onrt_init(void) { return openneuron::runtime::ensure_runtime(); }

int onrt_is_initialized(void) {
  using namespace openneuron::runtime;
  return g_init_state.load(std::memory_order_acquire) == InitState::kReady ? 1 : 0;
}

}  // extern "C"
