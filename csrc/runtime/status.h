// Error reporting shared by every runtime entry point.
#pragma once

#include <cstdint>
#include <string>

#include "openneuron/runtime.h"

namespace openneuron::runtime {

// Stores `message` as this thread's last error and returns `status`, so entry
// points can `return fail(...)`.
onrt_status fail(onrt_status status, std::string message);
onrt_status failf(onrt_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

const char* last_error_cstr();

// "512 bytes", "1.50 KiB", "25.00 GiB": what users read in OOM messages.
std::string format_size(uint64_t bytes);

// printf into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace openneuron::runtime

#define ONRT_RETURN_IF_ERROR(expr)                    \
  do {                                                \
    onrt_status onrt_status_ = (expr);                \
    if (onrt_status_ != ONRT_OK) return onrt_status_; \
  } while (0)
