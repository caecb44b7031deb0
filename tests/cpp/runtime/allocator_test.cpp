// The caching allocator, constructed directly with small capacities. Streams
// come from the public API (device 0) since blocks are tagged with them.
#include "../../../csrc/runtime/allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <unistd.h>
#include <string>
#include <thread>

#include "../../../csrc/runtime/stream.h"
#include "allocator_test_util.h"
#include "gate.h"
#include "openneuron/runtime.h"

namespace openneuron::runtime {
namespace {

using ontest::Gate;
using ontest::kKiB;
using ontest::kMiB;
using ontest::new_stream;

void* alloc(CachingAllocator& a, size_t bytes, Stream* s) {
  void* p = nullptr;
  EXPECT_EQ(a.malloc(bytes, s, &p), ONRT_OK) << onrt_last_error();
  EXPECT_NE(p, nullptr);
  return p;
}

TEST(AllocatorTest, RoundSize) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1000), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(kMiB - 1), kMiB);
  EXPECT_EQ(CachingAllocator::round_size(kMiB), kMiB);
  EXPECT_EQ(CachingAllocator::round_size(kMiB + 1), kMiB + 256 * kKiB);
  EXPECT_EQ(CachingAllocator::round_size(3 * kMiB + 1), 3 * kMiB + 512 * kKiB);
  EXPECT_EQ(CachingAllocator::round_size(15 * kMiB + 1), 16 * kMiB);
  EXPECT_EQ(CachingAllocator::round_size(16 * kMiB + 1), 16 * kMiB + 512);
}

TEST(AllocatorTest, SegmentSize) {
  EXPECT_EQ(CachingAllocator::segment_size(1000, 1024), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB - 1, kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(5 * kMiB, 5 * kMiB), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB, 10 * kMiB), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(12 * kMiB, 12 * kMiB), 12 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(17 * kMiB, 17 * kMiB), 18 * kMiB);
}

TEST(AllocatorTest, ZeroBytesGivesNull) {
  CachingAllocator a(0, 64 * kMiB);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(a.malloc(0, new_stream(), &p), ONRT_OK);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(a.free(nullptr), ONRT_OK);
  EXPECT_EQ(a.stats().allocation[ONRT_POOL_ALL].allocated, 0);
}

TEST(AllocatorTest, ExactStatsThroughALifecycle) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s = new_stream();
  void* p = alloc(a, 1000, s);
  onrt_memory_stats st = a.stats();
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].current, 1);
  EXPECT_EQ(st.allocation[ONRT_POOL_SMALL].current, 1);
  EXPECT_EQ(st.allocation[ONRT_POOL_LARGE].current, 0);
  EXPECT_EQ(st.allocated_bytes[ONRT_POOL_ALL].current, 1024);
  EXPECT_EQ(st.requested_bytes[ONRT_POOL_ALL].current, 1000);
  EXPECT_EQ(st.active[ONRT_POOL_SMALL].current, 1);
  EXPECT_EQ(st.active_bytes[ONRT_POOL_SMALL].current, 1024);
  EXPECT_EQ(st.segment[ONRT_POOL_SMALL].current, 1);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_ALL].current, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(st.inactive_split[ONRT_POOL_SMALL].current, 1);
  EXPECT_EQ(st.inactive_split_bytes[ONRT_POOL_SMALL].current,
            static_cast<int64_t>(2 * kMiB - 1024));
  EXPECT_EQ(st.num_device_alloc, 1);
  EXPECT_EQ(st.max_split_size, -1);

  ASSERT_EQ(a.free(p), ONRT_OK);
  st = a.stats();
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].peak, 1);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].allocated, 1);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].freed, 1);
  EXPECT_EQ(st.allocated_bytes[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.allocated_bytes[ONRT_POOL_ALL].peak, 1024);
  EXPECT_EQ(st.requested_bytes[ONRT_POOL_ALL].freed, 1000);
  EXPECT_EQ(st.active[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.inactive_split[ONRT_POOL_ALL].current, 0);  // merged back: segment whole
  EXPECT_EQ(st.inactive_split_bytes[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_ALL].current, static_cast<int64_t>(2 * kMiB));

  a.empty_cache();
  st = a.stats();
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_ALL].peak, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(st.segment[ONRT_POOL_ALL].freed, 1);
  EXPECT_EQ(st.num_device_free, 1);

  a.reset_peak();
  st = a.stats();
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_ALL].peak, 0);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].peak, 0);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].allocated, 1);

  a.reset_accumulated();
  st = a.stats();
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].allocated, 0);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].freed, 0);
  EXPECT_EQ(st.num_device_alloc, 0);
  EXPECT_EQ(st.num_device_free, 0);
}

TEST(AllocatorTest, PoolsBySize) {
  CachingAllocator a(0, 256 * kMiB);
  Stream* s = new_stream();
  void* small = alloc(a, kMiB - 1, s);
  void* large = alloc(a, kMiB, s);
  onrt_memory_stats st = a.stats();
  EXPECT_EQ(st.allocation[ONRT_POOL_SMALL].current, 1);
  EXPECT_EQ(st.allocation[ONRT_POOL_LARGE].current, 1);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_SMALL].current, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_LARGE].current, static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(st.allocated_bytes[ONRT_POOL_LARGE].current, static_cast<int64_t>(kMiB));
  void* big = alloc(a, 30 * kMiB, s);
  st = a.stats();
  EXPECT_EQ(st.segment[ONRT_POOL_LARGE].current, 2);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_LARGE].current, static_cast<int64_t>(50 * kMiB));
  for (void* p : {small, large, big}) EXPECT_EQ(a.free(p), ONRT_OK);
}

TEST(AllocatorTest, ReusesFreedBlockOnSameStream) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s = new_stream();
  void* p = alloc(a, 4000, s);
  ASSERT_EQ(a.free(p), ONRT_OK);
  void* q = alloc(a, 3900, s);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  EXPECT_EQ(a.free(q), ONRT_OK);
}

TEST(AllocatorTest, NoReuseAcrossStreams) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s1 = new_stream();
  Stream* s2 = new_stream();
  void* p = alloc(a, 4000, s1);
  ASSERT_EQ(a.free(p), ONRT_OK);
  void* q = alloc(a, 4000, s2);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().segment[ONRT_POOL_SMALL].current, 2);
  // The freed block of s1 is still cached for s1.
  void* r = alloc(a, 4000, s1);
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.free(q), ONRT_OK);
  EXPECT_EQ(a.free(r), ONRT_OK);
}

TEST(AllocatorTest, SplitsAndCoalescesWithinASegment) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s = new_stream();
  char* x = static_cast<char*>(alloc(a, 512 * kKiB, s));
  char* y = static_cast<char*>(alloc(a, 512 * kKiB, s));
  char* z = static_cast<char*>(alloc(a, 512 * kKiB, s));
  EXPECT_EQ(y, x + 512 * kKiB);
  EXPECT_EQ(z, y + 512 * kKiB);
  EXPECT_EQ(a.stats().inactive_split[ONRT_POOL_ALL].current, 1);  // the last 512 KiB

  ASSERT_EQ(a.free(x), ONRT_OK);
  ASSERT_EQ(a.free(z), ONRT_OK);  // merges with the tail
  onrt_memory_stats st = a.stats();
  EXPECT_EQ(st.inactive_split[ONRT_POOL_ALL].current, 2);
  EXPECT_EQ(st.inactive_split_bytes[ONRT_POOL_ALL].current, static_cast<int64_t>(1536 * kKiB));

  ASSERT_EQ(a.free(y), ONRT_OK);  // merges with both neighbours: segment whole again
  st = a.stats();
  EXPECT_EQ(st.inactive_split[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.inactive_split_bytes[ONRT_POOL_ALL].current, 0);
  // The whole segment is one block again: the biggest small request fits at its start.
  void* w = alloc(a, kMiB - 1, s);
  EXPECT_EQ(w, x);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  EXPECT_EQ(a.free(w), ONRT_OK);
}

TEST(AllocatorTest, MidSizeRequestsShareA20MiBSegment) {
  CachingAllocator a(0, 256 * kMiB);
  Stream* s = new_stream();
  char* p = static_cast<char*>(alloc(a, 5 * kMiB, s));
  char* q = static_cast<char*>(alloc(a, 5 * kMiB, s));
  EXPECT_EQ(q, p + 5 * kMiB);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  EXPECT_EQ(a.free(p), ONRT_OK);
  EXPECT_EQ(a.free(q), ONRT_OK);
}

TEST(AllocatorTest, RecordStreamDefersReuseUntilTheStreamCatchesUp) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s1 = new_stream();
  Stream* s2 = new_stream();
  Gate gate;
  ASSERT_EQ(onrt_launch_host_fn(to_handle(s2), "gate", &Gate::wait, &gate), ONRT_OK);

  void* p = alloc(a, 1000, s1);
  ASSERT_EQ(a.record_stream(p, s2), ONRT_OK);
  ASSERT_EQ(a.free(p), ONRT_OK);
  onrt_memory_stats st = a.stats();
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.active[ONRT_POOL_ALL].current, 1);  // pending free
  EXPECT_EQ(st.active_bytes[ONRT_POOL_ALL].current, 1024);

  void* q = alloc(a, 1000, s1);
  EXPECT_NE(q, p) << "block reused while s2 may still use it";

  gate.open = true;
  ASSERT_EQ(onrt_stream_synchronize(to_handle(s2)), ONRT_OK);
  void* r = alloc(a, 1000, s1);  // processes the deferred free first
  EXPECT_EQ(r, p);
  st = a.stats();
  EXPECT_EQ(st.active[ONRT_POOL_ALL].current, 2);
  EXPECT_EQ(a.free(q), ONRT_OK);
  EXPECT_EQ(a.free(r), ONRT_OK);
}

TEST(AllocatorTest, RecordStreamOnIdleStreamFreesImmediately) {
  CachingAllocator a(0, 64 * kMiB);
  Stream* s1 = new_stream();
  Stream* s2 = new_stream();
  void* p = alloc(a, 1000, s1);
  ASSERT_EQ(a.record_stream(static_cast<char*>(p) + 10, s2), ONRT_OK);  // interior pointer
  ASSERT_EQ(a.free(p), ONRT_OK);
  EXPECT_EQ(a.stats().active[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(alloc(a, 1000, s1), p);
  EXPECT_EQ(a.free(p), ONRT_OK);
}

TEST(AllocatorTest, OutOfMemoryReportsAndRecovers) {
  CachingAllocator a(0, 8 * kMiB);
  Stream* s = new_stream();
  // A 20 MiB segment does not fit, an exact 6 MiB one does (and is not split:
  // the 1 MiB rest is too small for the large pool).
  void* p = alloc(a, 5 * kMiB, s);
  EXPECT_EQ(a.reserved(), 6 * kMiB);
  void* q = nullptr;
  EXPECT_EQ(a.malloc(4 * kMiB, s, &q), ONRT_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(q, nullptr);
  const std::string msg = onrt_last_error();
  EXPECT_EQ(msg,
            "neuron:0 out of memory: tried to allocate 4.00 MiB; 6.00 MiB allocated, 6.00 MiB "
            "reserved, capacity 8.00 MiB (2.00 MiB free)");
  EXPECT_EQ(a.stats().num_ooms, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 0);  // nothing cached to release

  ASSERT_EQ(a.free(p), ONRT_OK);
  q = alloc(a, 4 * kMiB, s);  // fits in the cached segment
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.free(q), ONRT_OK);
}

TEST(AllocatorTest, ReleasesCachedSegmentsBeforeGivingUp) {
  CachingAllocator a(0, 8 * kMiB);
  Stream* s1 = new_stream();
  Stream* s2 = new_stream();
  void* p = alloc(a, 5 * kMiB, s1);
  ASSERT_EQ(a.free(p), ONRT_OK);  // cached for s1 only
  void* q = alloc(a, 5 * kMiB, s2);
  onrt_memory_stats st = a.stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_device_free, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_ALL].current, static_cast<int64_t>(6 * kMiB));
  EXPECT_EQ(a.free(q), ONRT_OK);
}

// Resident set size of this process, from /proc/self/statm.
static int64_t resident_bytes() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return static_cast<int64_t>(pages_resident) * sysconf(_SC_PAGESIZE);
}

TEST(AllocatorTest, HugeLazyAllocationIsCheap) {
  CachingAllocator a(0, 64ull << 30);
  Stream* s = new_stream();
  // Lazy means untouched pages cost no host memory: resident size barely moves.
  const int64_t rss_before = resident_bytes();
  void* p = alloc(a, 16ull << 30, s);
  EXPECT_LT(resident_bytes() - rss_before, int64_t{64} << 20);
  EXPECT_EQ(a.free(p), ONRT_OK);
  a.empty_cache();
  void* q = nullptr;
  EXPECT_EQ(a.malloc(65ull << 30, s, &q), ONRT_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(onrt_last_error()).find("tried to allocate 65.00 GiB"), std::string::npos);
  EXPECT_EQ(a.malloc(~size_t{0}, s, &q), ONRT_ERROR_OUT_OF_MEMORY);
}

TEST(AllocatorTest, LookupsFindInteriorPointersOfLiveBlocksOnly) {
  CachingAllocator a(3, 64 * kMiB);
  Stream* s = new_stream();
  char* p = static_cast<char*>(alloc(a, 1000, s));
  EXPECT_EQ(CachingAllocator::owner_of(p + 500), &a);
  EXPECT_TRUE(a.contains(p, 1024));
  EXPECT_TRUE(a.contains(p + 1000, 24));
  EXPECT_FALSE(a.contains(p + 1000, 25));
  EXPECT_FALSE(a.contains(p + 4096, 1));  // inside the segment, not in a live block
  int device = -1;
  ASSERT_EQ(onrt_pointer_get_device(p + 17, &device), ONRT_OK);
  EXPECT_EQ(device, 3);

  EXPECT_EQ(a.free(p + 8), ONRT_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(a.free(p), ONRT_OK);
  EXPECT_EQ(a.free(p), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("not the start of a live allocation"),
            std::string::npos);
  EXPECT_FALSE(a.contains(p, 1));
  EXPECT_EQ(onrt_pointer_get_device(p, &device), ONRT_ERROR_INVALID_ARGUMENT);
  a.empty_cache();
  EXPECT_EQ(CachingAllocator::owner_of(p), nullptr);
}

TEST(AllocatorTest, ConcurrentMallocFree) {
  CachingAllocator a(0, 256 * kMiB);
  Stream* s = new_stream();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        void* p = nullptr;
        ASSERT_EQ(a.malloc(512 * ((i + t) % 7 + 1), s, &p), ONRT_OK);
        ASSERT_EQ(a.free(p), ONRT_OK);
      }
    });
  }
  for (auto& th : threads) th.join();
  onrt_memory_stats st = a.stats();
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.allocation[ONRT_POOL_ALL].allocated, 8000);
  EXPECT_EQ(st.active_bytes[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(st.inactive_split[ONRT_POOL_ALL].current, 0);
}

}  // namespace
}  // namespace openneuron::runtime
