// Host/device copies and their validation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "openneuron/runtime.h"

namespace {

class CopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_get_default(0, &s0_), ONRT_OK);
    ASSERT_EQ(onrt_stream_get_default(1, &s1_), ONRT_OK);
  }
  void* dev_alloc(int device, size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(onrt_malloc(device, bytes, nullptr, &p), ONRT_OK) << onrt_last_error();
    return p;
  }
  onrt_stream_t s0_ = nullptr, s1_ = nullptr;
};

TEST_F(CopyTest, RoundTripAcrossDevices) {
  constexpr size_t kN = 300000;  // ~1.2 MiB: large pool
  std::vector<int32_t> src(kN), dst(kN, -1);
  std::iota(src.begin(), src.end(), 7);
  void* a = dev_alloc(0, kN * 4);
  void* b = dev_alloc(1, kN * 4);
  onrt_counters before, after;
  ASSERT_EQ(onrt_get_counters(&before), ONRT_OK);
  ASSERT_EQ(onrt_memcpy_async(a, src.data(), kN * 4, ONRT_COPY_HOST_TO_DEVICE, s0_), ONRT_OK);
  ASSERT_EQ(onrt_memcpy_async(b, a, kN * 4, ONRT_COPY_DEVICE_TO_DEVICE, s0_), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(s0_), ONRT_OK);
  ASSERT_EQ(onrt_memcpy(dst.data(), b, kN * 4, ONRT_COPY_DEVICE_TO_HOST, s1_), ONRT_OK);
  EXPECT_EQ(dst, src);
  ASSERT_EQ(onrt_get_counters(&after), ONRT_OK);
  EXPECT_GE(after.copies - before.copies, 3);
  EXPECT_EQ(onrt_free(a), ONRT_OK);
  EXPECT_EQ(onrt_free(b), ONRT_OK);
}

TEST_F(CopyTest, SyncCopyWaitsForEarlierWork) {
  struct Slow {
    static int run(void*, char*, size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return 0;
    }
  };
  std::vector<int64_t> src(1000, 42), dst(1000, 0);
  void* a = dev_alloc(0, 8000);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "slow", &Slow::run, nullptr), ONRT_OK);
  ASSERT_EQ(onrt_memcpy_async(a, src.data(), 8000, ONRT_COPY_HOST_TO_DEVICE, s0_), ONRT_OK);
  ASSERT_EQ(onrt_memcpy(dst.data(), a, 8000, ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_OK);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(onrt_stream_query(s0_), ONRT_OK);
  EXPECT_EQ(onrt_free(a), ONRT_OK);
}

TEST_F(CopyTest, SyncCopyReportsEarlierFailure) {
  auto failing = [](void*, char* err, size_t len) -> int {
    snprintf(err, len, "upstream failure");
    return 1;
  };
  int64_t host = 5;
  void* a = dev_alloc(0, 8);
  ASSERT_EQ(onrt_memcpy(a, &host, 8, ONRT_COPY_HOST_TO_DEVICE, s0_), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "producer", failing, nullptr), ONRT_OK);
  int64_t out = -1;
  EXPECT_EQ(onrt_memcpy(&out, a, 8, ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "producer: upstream failure");
  EXPECT_EQ(out, -1);  // skipped like any work after a failure
  ASSERT_EQ(onrt_memcpy(&out, a, 8, ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_OK);
  EXPECT_EQ(out, 5);
  EXPECT_EQ(onrt_free(a), ONRT_OK);
}

TEST_F(CopyTest, ZeroBytesIsANoOp) {
  EXPECT_EQ(onrt_memcpy(nullptr, nullptr, 0, ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_OK);
  EXPECT_EQ(onrt_memcpy_async(nullptr, nullptr, 0, ONRT_COPY_HOST_TO_DEVICE, s0_), ONRT_OK);
}

TEST_F(CopyTest, RejectsPointersOutsideLiveAllocations) {
  std::vector<char> host(4096);
  char* a = static_cast<char*>(dev_alloc(0, 1024));
  EXPECT_EQ(onrt_memcpy(host.data(), host.data() + 8, 8, ONRT_COPY_DEVICE_TO_HOST, s0_),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("source"), std::string::npos);
  EXPECT_NE(std::string(onrt_last_error()).find("not inside a live neuron allocation"),
            std::string::npos);
  EXPECT_EQ(onrt_memcpy_async(host.data(), host.data(), 8, ONRT_COPY_HOST_TO_DEVICE, s0_),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("destination"), std::string::npos);
  // Overrunning the allocation.
  EXPECT_EQ(onrt_memcpy(host.data(), a, 2048, ONRT_COPY_DEVICE_TO_HOST, s0_),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_memcpy(host.data(), a + 512, 512, ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_OK);
  EXPECT_EQ(onrt_memcpy(a, host.data(), 8, static_cast<onrt_copy_kind>(9), s0_),
            ONRT_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(onrt_free(a), ONRT_OK);
  // Freed: no longer valid.
  EXPECT_EQ(onrt_memcpy(host.data(), a, 8, ONRT_COPY_DEVICE_TO_HOST, s0_),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_memcpy(host.data(), a, 8, ONRT_COPY_DEVICE_TO_HOST, nullptr),
            ONRT_ERROR_INVALID_HANDLE);
}

// Copies of several MiB are split over the DMA helper threads: every byte must
// land, whatever the offsets and the length modulo the slice size, including
// two copies issued at once from different streams (one finds the helpers busy).
TEST_F(CopyTest, LargeCopiesAreExactAtOddOffsetsAndConcurrently) {
  constexpr size_t kBytes = (size_t{9} << 20) + 12345;
  std::vector<uint8_t> src(kBytes + 7);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  char* a = static_cast<char*>(dev_alloc(0, kBytes + 64));
  char* b = static_cast<char*>(dev_alloc(0, kBytes + 64));
  ASSERT_EQ(onrt_memcpy(a + 3, src.data() + 7, kBytes, ONRT_COPY_HOST_TO_DEVICE, s0_), ONRT_OK);
  onrt_stream_t other = nullptr;
  ASSERT_EQ(onrt_stream_create(0, 0, &other), ONRT_OK);
  ASSERT_EQ(onrt_memcpy_async(b + 5, a + 3, kBytes, ONRT_COPY_DEVICE_TO_DEVICE, s0_), ONRT_OK);
  std::vector<uint8_t> back1(kBytes), back2(kBytes);
  std::thread t([&] {
    EXPECT_EQ(onrt_memcpy(back2.data(), a + 3, kBytes, ONRT_COPY_DEVICE_TO_HOST, other), ONRT_OK);
  });
  ASSERT_EQ(onrt_stream_synchronize(s0_), ONRT_OK);
  ASSERT_EQ(onrt_memcpy(back1.data(), b + 5, kBytes, ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_OK);
  t.join();
  const std::vector<uint8_t> want(src.begin() + 7, src.begin() + 7 + kBytes);
  EXPECT_TRUE(back1 == want);
  EXPECT_TRUE(back2 == want);
  EXPECT_EQ(onrt_stream_destroy(other), ONRT_OK);
  EXPECT_EQ(onrt_free(a), ONRT_OK);
  EXPECT_EQ(onrt_free(b), ONRT_OK);
}

// A device-to-device copy within one allocation may overlap: memmove semantics.
TEST_F(CopyTest, OverlappingLargeDeviceCopyMovesLikeMemmove) {
  constexpr size_t kBytes = size_t{6} << 20, kShift = 1000;
  std::vector<uint8_t> src(kBytes + kShift);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 40503u >> 7);
  char* a = static_cast<char*>(dev_alloc(0, kBytes + kShift));
  ASSERT_EQ(onrt_memcpy(a, src.data(), src.size(), ONRT_COPY_HOST_TO_DEVICE, s0_), ONRT_OK);
  ASSERT_EQ(onrt_memcpy_async(a + kShift, a, kBytes, ONRT_COPY_DEVICE_TO_DEVICE, s0_), ONRT_OK);
  std::vector<uint8_t> back(src.size());
  ASSERT_EQ(onrt_memcpy(back.data(), a, back.size(), ONRT_COPY_DEVICE_TO_HOST, s0_), ONRT_OK);
  std::vector<uint8_t> want = src;
  std::memmove(want.data() + kShift, want.data(), kBytes);
  EXPECT_TRUE(back == want);
  EXPECT_EQ(onrt_free(a), ONRT_OK);
}

}  // namespace
