// Device discovery and properties.
#include "config.h"
#include "state.h"
#include "status.h"

using namespace openneuron::runtime;

extern "C" {

onrt_status onrt_device_count(int* count) {
  if (count == nullptr)
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_device_count: count is NULL");
  // Also answers in a forked child: it only reads what the parent built.
  if (g_init_state.load(std::memory_order_acquire) != InitState::kUninitialized) {
    *count = static_cast<int>(runtime().devices.size());
    return ONRT_OK;
  }
  // Frameworks probe the count at import time: never start threads here, and
  // report a bad configuration as "no devices" (the reason stays available in
  // onrt_last_error; onrt_init reports it as an error).
  Config cfg;
  std::string error;
  if (load_config(&cfg, &error) != ONRT_OK) {
    *count = 0;
    fail(ONRT_ERROR_INVALID_CONFIG, std::move(error));
    return ONRT_OK;
  }
  *count = static_cast<int>(cfg.visible_cores.size());
  return ONRT_OK;
}

onrt_status onrt_device_get_properties(int device, onrt_device_properties* out) {
  if (out == nullptr) {
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_device_get_properties: out is NULL");
  }
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  *out = dev->props;
  return ONRT_OK;
}

const char* onrt_platform_names(void) { return "trn2,trn3"; }

}  // extern "C"
