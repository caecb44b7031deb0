// Leveled messages for the embedding's logger (onrt_log_* in
// openneuron/runtime.h): a level check is one relaxed load, so a disabled
// message costs nothing but its branch.
#pragma once

#include <atomic>

#include "openneuron/runtime.h"

namespace openneuron::runtime {

namespace log_detail {
extern std::atomic<int> min_level;
}

inline bool log_enabled(int level) {
  return level >= log_detail::min_level.load(std::memory_order_relaxed);
}

// printf-style; formats only when the level is enabled.
void logf(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace openneuron::runtime
