// Public device API under the default environment (2 trn2 cores).
#include <gtest/gtest.h>

#include <string>

#include "../../../csrc/runtime/config.h"
#include "openneuron/runtime.h"

namespace {

int device_count() {
  int n = -1;
  EXPECT_EQ(onrt_device_count(&n), ONRT_OK);
  return n;
}

TEST(DeviceTest, CountMatchesEnvironmentDefault) {
  EXPECT_EQ(device_count(), 2);
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  EXPECT_EQ(onrt_is_initialized(), 1);
  EXPECT_EQ(onrt_in_bad_fork(), 0);
  EXPECT_EQ(onrt_init(), ONRT_OK);  // idempotent
  EXPECT_EQ(device_count(), 2);
}

TEST(DeviceTest, Properties) {
  onrt_device_properties p;
  ASSERT_EQ(onrt_device_get_properties(1, &p), ONRT_OK) << onrt_last_error();
  EXPECT_STREQ(p.name, "OpenNeuron virtual NeuronCore (trn2)");
  EXPECT_STREQ(p.platform, "trn2");
  EXPECT_EQ(p.physical_index, 1);
  EXPECT_EQ(p.supports_fp8, 0);
  EXPECT_EQ(p.supports_bf16, 1);
  EXPECT_EQ(p.supports_fp16, 1);
  const uint64_t host = openneuron::runtime::host_physical_memory();
  EXPECT_EQ(p.total_memory, std::min<uint64_t>(24ull << 30, host));
}

TEST(DeviceTest, InvalidIndexNamesTheValidRange) {
  onrt_device_properties p;
  EXPECT_EQ(onrt_device_get_properties(5, &p), ONRT_ERROR_INVALID_DEVICE);
  EXPECT_STREQ(onrt_last_error(),
               "neuron device index 5 is out of range: 2 cores are available "
               "(neuron:0..neuron:1)");
  EXPECT_EQ(onrt_device_synchronize(-1), ONRT_ERROR_INVALID_DEVICE);
  void* ptr = nullptr;
  EXPECT_EQ(onrt_malloc(2, 16, nullptr, &ptr), ONRT_ERROR_INVALID_DEVICE);
  onrt_stream_t s;
  EXPECT_EQ(onrt_stream_create(7, 0, &s), ONRT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(onrt_empty_cache(3), ONRT_ERROR_INVALID_DEVICE);
  onrt_memory_stats stats;
  EXPECT_EQ(onrt_memory_get_stats(9, &stats), ONRT_ERROR_INVALID_DEVICE);
  EXPECT_NE(std::string(onrt_last_error()).find("index 9"), std::string::npos);
}

TEST(DeviceTest, PlatformNames) { EXPECT_STREQ(onrt_platform_names(), "trn2,trn3"); }

TEST(DeviceTest, MemoryInfoReportsCapacity) {
  onrt_device_properties p;
  ASSERT_EQ(onrt_device_get_properties(0, &p), ONRT_OK);
  uint64_t free_bytes = 0, total = 0;
  ASSERT_EQ(onrt_memory_get_info(0, &free_bytes, &total), ONRT_OK);
  EXPECT_EQ(total, p.total_memory);
  onrt_memory_stats stats;
  ASSERT_EQ(onrt_memory_get_stats(0, &stats), ONRT_OK);
  EXPECT_EQ(free_bytes, total - static_cast<uint64_t>(stats.reserved_bytes[ONRT_POOL_ALL].current));
}

}  // namespace
