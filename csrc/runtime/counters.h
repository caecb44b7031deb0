// Process-wide observability counters; relaxed atomics keep them off the
// launch path's critical cost.
#pragma once

#include <atomic>
#include <cstdint>

namespace openneuron::runtime {

struct Counters {
  std::atomic<int64_t> launches{0};
  std::atomic<int64_t> instructions_executed{0};
  std::atomic<int64_t> copies{0};
  std::atomic<int64_t> synchronizations{0};
};

Counters& counters();

inline void bump(std::atomic<int64_t>& c, int64_t by = 1) {
  c.fetch_add(by, std::memory_order_relaxed);
}

}  // namespace openneuron::runtime
