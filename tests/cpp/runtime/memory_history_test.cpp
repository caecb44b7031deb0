// Memory observer and snapshot: every allocation, free and segment change is
// seen once, in order, with the device totals after it; a snapshot's segments
// are tiled exactly by their blocks and show live blocks as allocated.
#include <gtest/gtest.h>

#include <vector>

#include "openneuron/runtime.h"

namespace {

void record(const onrt_memory_event* e, void* user) {
  static_cast<std::vector<onrt_memory_event>*>(user)->push_back(*e);
}

struct Segment {
  onrt_segment_info info;
  std::vector<onrt_block_info> blocks;
};

void keep(const onrt_segment_info* s, void* user) {
  static_cast<std::vector<Segment>*>(user)->push_back(
      Segment{*s, std::vector<onrt_block_info>(s->blocks, s->blocks + s->num_blocks)});
}

TEST(MemoryHistoryTest, ObserverSeesEveryEventInOrder) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  ASSERT_EQ(onrt_empty_cache(0), ONRT_OK);
  std::vector<onrt_memory_event> events;
  onrt_memory_set_observer(record, &events);
  void* p = nullptr;
  ASSERT_EQ(onrt_malloc(0, 3000, nullptr, &p), ONRT_OK);
  ASSERT_EQ(onrt_free(p), ONRT_OK);
  ASSERT_EQ(onrt_empty_cache(0), ONRT_OK);
  onrt_memory_set_observer(nullptr, nullptr);
  void* q = nullptr;
  ASSERT_EQ(onrt_malloc(0, 100, nullptr, &q), ONRT_OK);  // not observed
  ASSERT_EQ(onrt_free(q), ONRT_OK);

  ASSERT_EQ(events.size(), 5u);
  const onrt_memory_action want[] = {ONRT_MEMORY_SEGMENT_ALLOC, ONRT_MEMORY_ALLOC,
                                     ONRT_MEMORY_FREE_REQUESTED, ONRT_MEMORY_FREE_COMPLETED,
                                     ONRT_MEMORY_SEGMENT_FREE};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].action, want[i]) << i;
    EXPECT_EQ(events[i].device, 0);
  }
  EXPECT_EQ(events[1].address, reinterpret_cast<uintptr_t>(p));
  EXPECT_EQ(events[1].requested, 3000u);
  EXPECT_GE(events[1].size, 3000u);
  EXPECT_EQ(events[1].allocated_bytes, static_cast<int64_t>(events[1].size));
  EXPECT_EQ(events[2].allocated_bytes, 0);
  EXPECT_EQ(events[0].address, events[4].address);
  EXPECT_EQ(events[4].reserved_bytes, 0);
}

TEST(MemoryHistoryTest, SnapshotBlocksTileTheirSegments) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  ASSERT_EQ(onrt_empty_cache(1), ONRT_OK);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(onrt_malloc(1, 1000, nullptr, &a), ONRT_OK);
  ASSERT_EQ(onrt_malloc(1, 5000, nullptr, &b), ONRT_OK);
  std::vector<Segment> segments;
  ASSERT_EQ(onrt_memory_snapshot(1, keep, &segments), ONRT_OK);
  ASSERT_EQ(segments.size(), 1u);  // both in one small-pool segment
  const Segment& s = segments[0];
  uintptr_t at = s.info.address;
  int allocated = 0;
  for (const onrt_block_info& blk : s.blocks) {
    EXPECT_EQ(blk.address, at);
    at += blk.size;
    if (blk.state == ONRT_BLOCK_ALLOCATED) {
      ++allocated;
      EXPECT_TRUE(blk.address == reinterpret_cast<uintptr_t>(a) ||
                  blk.address == reinterpret_cast<uintptr_t>(b));
      EXPECT_EQ(blk.requested, blk.address == reinterpret_cast<uintptr_t>(a) ? 1000u : 5000u);
    }
  }
  EXPECT_EQ(at, s.info.address + s.info.size);
  EXPECT_EQ(allocated, 2);
  EXPECT_EQ(s.info.pool, ONRT_POOL_SMALL);
  EXPECT_EQ(onrt_memory_snapshot(99, keep, &segments), ONRT_ERROR_INVALID_DEVICE);
  ASSERT_EQ(onrt_free(a), ONRT_OK);
  ASSERT_EQ(onrt_free(b), ONRT_OK);
}

}  // namespace
