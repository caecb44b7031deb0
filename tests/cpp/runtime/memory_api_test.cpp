// Public memory API: routing to per-core allocators, stats, OOM.
#include <gtest/gtest.h>

#include <string>

#include "openneuron/runtime.h"

namespace {

TEST(MemoryApiTest, MallocFreeAndPointerLookup) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  onrt_memory_stats before, during, after;
  ASSERT_EQ(onrt_memory_get_stats(1, &before), ONRT_OK);
  void* p = nullptr;
  ASSERT_EQ(onrt_malloc(1, 3000, nullptr, &p), ONRT_OK) << onrt_last_error();
  ASSERT_NE(p, nullptr);
  int device = -1;
  ASSERT_EQ(onrt_pointer_get_device(static_cast<char*>(p) + 2999, &device), ONRT_OK);
  EXPECT_EQ(device, 1);
  ASSERT_EQ(onrt_memory_get_stats(1, &during), ONRT_OK);
  EXPECT_EQ(during.allocation[ONRT_POOL_ALL].current - before.allocation[ONRT_POOL_ALL].current, 1);
  EXPECT_EQ(during.allocated_bytes[ONRT_POOL_SMALL].current -
                before.allocated_bytes[ONRT_POOL_SMALL].current,
            3072);
  EXPECT_EQ(during.requested_bytes[ONRT_POOL_SMALL].current -
                before.requested_bytes[ONRT_POOL_SMALL].current,
            3000);
  ASSERT_EQ(onrt_free(p), ONRT_OK);
  ASSERT_EQ(onrt_memory_get_stats(1, &after), ONRT_OK);
  EXPECT_EQ(after.allocation[ONRT_POOL_ALL].current, before.allocation[ONRT_POOL_ALL].current);
  EXPECT_EQ(onrt_pointer_get_device(p, &device), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_free(p), ONRT_ERROR_INVALID_ARGUMENT);
  int local = 0;
  EXPECT_EQ(onrt_free(&local), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("not allocated by the neuron runtime"),
            std::string::npos);
  EXPECT_EQ(onrt_free(nullptr), ONRT_OK);

  ASSERT_EQ(onrt_malloc(1, 0, nullptr, &p), ONRT_OK);
  EXPECT_EQ(p, nullptr);
}

TEST(MemoryApiTest, StreamMustBelongToTheDevice) {
  ASSERT_EQ(onrt_init(), ONRT_OK);
  onrt_stream_t s1;
  ASSERT_EQ(onrt_stream_get_default(1, &s1), ONRT_OK);
  void* p = nullptr;
  EXPECT_EQ(onrt_malloc(0, 64, s1, &p), ONRT_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(onrt_malloc(1, 64, s1, &p), ONRT_OK);
  onrt_stream_t other;
  ASSERT_EQ(onrt_stream_create(1, 0, &other), ONRT_OK);
  EXPECT_EQ(onrt_record_stream(p, other), ONRT_OK);
  EXPECT_EQ(onrt_free(p), ONRT_OK);
  int local;
  EXPECT_EQ(onrt_record_stream(&local, other), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_stream_destroy(other), ONRT_OK);
}

TEST(MemoryApiTest, OutOfMemoryKeepsTheProcessGoing) {
  ASSERT_EQ(onrt_init(), ONRT_OK);
  onrt_memory_stats before, after;
  ASSERT_EQ(onrt_memory_get_stats(0, &before), ONRT_OK);
  void* p = nullptr;
  EXPECT_EQ(onrt_malloc(0, size_t{1} << 50, nullptr, &p), ONRT_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  const std::string msg = onrt_last_error();
  EXPECT_EQ(msg.rfind("neuron:0 out of memory: tried to allocate 1048576.00 GiB;", 0), 0u) << msg;
  EXPECT_NE(msg.find("allocated"), std::string::npos);
  EXPECT_NE(msg.find("reserved"), std::string::npos);
  EXPECT_NE(msg.find("capacity"), std::string::npos);
  ASSERT_EQ(onrt_memory_get_stats(0, &after), ONRT_OK);
  EXPECT_EQ(after.num_ooms, before.num_ooms + 1);
  ASSERT_EQ(onrt_malloc(0, 1 << 20, nullptr, &p), ONRT_OK);
  EXPECT_EQ(onrt_free(p), ONRT_OK);
}

TEST(MemoryApiTest, EmptyCacheReturnsSegments) {
  ASSERT_EQ(onrt_init(), ONRT_OK);
  void* p = nullptr;
  ASSERT_EQ(onrt_malloc(1, 40 << 20, nullptr, &p), ONRT_OK);
  ASSERT_EQ(onrt_free(p), ONRT_OK);
  onrt_memory_stats st;
  ASSERT_EQ(onrt_memory_get_stats(1, &st), ONRT_OK);
  EXPECT_GE(st.reserved_bytes[ONRT_POOL_LARGE].current, 40 << 20);
  ASSERT_EQ(onrt_empty_cache(1), ONRT_OK);
  ASSERT_EQ(onrt_memory_get_stats(1, &st), ONRT_OK);
  EXPECT_EQ(st.reserved_bytes[ONRT_POOL_LARGE].current, 0);
  uint64_t free_bytes, total;
  ASSERT_EQ(onrt_memory_get_info(1, &free_bytes, &total), ONRT_OK);
  EXPECT_EQ(free_bytes, total - static_cast<uint64_t>(st.reserved_bytes[ONRT_POOL_ALL].current));
}

}  // namespace
