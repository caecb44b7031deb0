// Helpers of the caching allocator tests: size units and a stream on device 0
// made through the public API (blocks are tagged with the runtime's Stream).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "../../../csrc/runtime/stream.h"
#include "openneuron/runtime.h"

namespace ontest {

inline constexpr size_t kKiB = 1 << 10;
inline constexpr size_t kMiB = 1 << 20;

inline openneuron::runtime::Stream* new_stream() {
  onrt_stream_t s;
  EXPECT_EQ(onrt_stream_create(0, 0, &s), ONRT_OK) << onrt_last_error();
  return openneuron::runtime::to_stream(s);
}

}  // namespace ontest
