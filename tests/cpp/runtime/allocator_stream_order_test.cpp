// Returning cached segments to the host must respect stream order: a block
// freed while work queued before the free still uses it goes back to the
// cache at once (same-stream reuse is safe), but unmapping it then would let
// that work touch unmapped memory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "../../../csrc/runtime/allocator.h"
#include "../../../csrc/runtime/stream.h"
#include "allocator_test_util.h"
#include "openneuron/runtime.h"

namespace openneuron::runtime {
namespace {

using ontest::kKiB;
using ontest::kMiB;
using ontest::new_stream;

// Queued work that writes the block only once the gate opens.
struct GatedWriter {
  char* p;
  size_t bytes;
  std::atomic<bool> open{false};
  std::atomic<bool> done{false};
  static int run(void* self, char*, size_t) {
    auto* w = static_cast<GatedWriter*>(self);
    while (!w->open.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::memset(w->p, 1, w->bytes);
    w->done.store(true);
    return 0;
  }
};

// Opens the gate from another thread while the test thread is blocked in the
// allocator; the delay only gives a broken allocator the chance to return
// early, a correct one waits however long it takes.
std::thread open_later(GatedWriter& w) {
  return std::thread([&w] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.open.store(true);
  });
}

TEST(AllocatorStreamOrderTest, EmptyCacheWaitsForWorkQueuedBeforeTheFree) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s = new_stream();
  void* p = nullptr;
  ASSERT_EQ(a.malloc(4 * kKiB, s, &p), ONRT_OK);
  GatedWriter w{static_cast<char*>(p), 4 * kKiB};
  ASSERT_EQ(onrt_launch_host_fn(to_handle(s), "writer", GatedWriter::run, &w), ONRT_OK);
  ASSERT_EQ(a.free(p), ONRT_OK);
  std::thread opener = open_later(w);
  a.empty_cache();
  EXPECT_TRUE(w.done.load()) << "empty_cache released a segment queued work still uses";
  EXPECT_EQ(a.stats().reserved_bytes[ONRT_POOL_ALL].current, 0);
  opener.join();
  EXPECT_EQ(onrt_stream_synchronize(to_handle(s)), ONRT_OK);
  EXPECT_EQ(onrt_stream_destroy(to_handle(s)), ONRT_OK);
}

TEST(AllocatorStreamOrderTest, AllocationAtCapacityWaitsBeforeReleasingABusySegment) {
  CachingAllocator a(0, 2 * kMiB);  // room for exactly one small segment
  Stream* s1 = new_stream();
  Stream* s2 = new_stream();
  void* p = nullptr;
  ASSERT_EQ(a.malloc(4 * kKiB, s1, &p), ONRT_OK);
  GatedWriter w{static_cast<char*>(p), 4 * kKiB};
  ASSERT_EQ(onrt_launch_host_fn(to_handle(s1), "writer", GatedWriter::run, &w), ONRT_OK);
  ASSERT_EQ(a.free(p), ONRT_OK);
  std::thread opener = open_later(w);
  // s2 cannot reuse s1's block; making room means releasing s1's segment.
  void* q = nullptr;
  ASSERT_EQ(a.malloc(4 * kKiB, s2, &q), ONRT_OK) << onrt_last_error();
  EXPECT_TRUE(w.done.load()) << "malloc released a segment queued work still uses";
  opener.join();
  EXPECT_EQ(a.free(q), ONRT_OK);
  for (Stream* s : {s1, s2}) {
    EXPECT_EQ(onrt_stream_synchronize(to_handle(s)), ONRT_OK);
    EXPECT_EQ(onrt_stream_destroy(to_handle(s)), ONRT_OK);
  }
}

}  // namespace
}  // namespace openneuron::runtime
