// A caller's wait for device work ends early when the embedding's wait check
// says so (Ctrl-C) or when the watchdog sees no progress, with the queued work
// going on; the runtime's own waits are never cut short.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "../../../csrc/runtime/wait_policy.h"
#include "openneuron/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> release_kernel{false};

int blocked_kernel(const void*, const onrt_arg*, char*, size_t) {
  while (!release_kernel.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 0;
}

class WaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &stream_), ONRT_OK);
    ASSERT_EQ(onrt_program_create("Stuck", &program_), ONRT_OK);
    ASSERT_EQ(
        onrt_program_add_instruction(program_, "spin", blocked_kernel, nullptr, 0, nullptr, 0),
        ONRT_OK);
    release_kernel = false;
  }
  void TearDown() override {
    release_kernel = true;
    onrt_set_wait_check(nullptr, nullptr, 0);
    openneuron::runtime::set_watchdog_seconds(300);
    EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);  // the work went on
    onrt_program_release(program_);
    onrt_stream_destroy(stream_);
  }
  onrt_stream_t stream_ = nullptr;
  onrt_program_t program_ = nullptr;
};

TEST_F(WaitTest, WaitCheckEndsTheWaitPromptlyAndTheWorkGoesOn) {
  static std::atomic<int> checks{0};
  checks = 0;
  onrt_set_wait_check([](void*) { return ++checks >= 3 ? 1 : 0; }, nullptr, 10);
  ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  const auto start = Clock::now();
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_INTERRUPTED);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(checks.load(), 3);
  EXPECT_NE(std::string(onrt_last_error()).find("was interrupted; its queued work goes on"),
            std::string::npos)
      << onrt_last_error();
  EXPECT_EQ(onrt_device_synchronize(0),
            ONRT_ERROR_INTERRUPTED);                            // checked again, interrupted again
  EXPECT_EQ(onrt_stream_query(stream_), ONRT_ERROR_NOT_READY);  // still running
}

TEST_F(WaitTest, WatchdogNamesTheStuckProgram) {
  openneuron::runtime::set_watchdog_seconds(0.2);
  ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_TIMEOUT);
  const std::string message = onrt_last_error();
  EXPECT_NE(message.find("completed no work for 0 s while running program 'Stuck' (1 more queued)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("OPENNEURON_WATCHDOG_SECONDS"), std::string::npos);
}

TEST_F(WaitTest, WatchdogIgnoresHostFunctionsWhichHaveTheirOwnTimeouts) {
  // A collective's host function waits for its peers as long as the process
  // group allows: the watchdog is for kernels and copies only.
  openneuron::runtime::set_watchdog_seconds(0.1);
  auto slow = [](void*, char*, size_t) -> int {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return 0;
  };
  ASSERT_EQ(onrt_launch_host_fn(stream_, "peers", slow, nullptr), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK) << onrt_last_error();
}

TEST_F(WaitTest, AnInterruptedBlockingCopyIsNotMadeLater) {
  onrt_set_wait_check([](void*) { return 1; }, nullptr, 10);
  void* dev = nullptr;
  ASSERT_EQ(onrt_malloc(0, 64, stream_, &dev), ONRT_OK);
  char ones[64];
  std::memset(ones, 1, sizeof ones);
  ASSERT_EQ(onrt_memcpy(dev, ones, sizeof ones, ONRT_COPY_HOST_TO_DEVICE, stream_), ONRT_OK);
  ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  char host[64] = {};
  EXPECT_EQ(onrt_memcpy(host, dev, sizeof host, ONRT_COPY_DEVICE_TO_HOST, stream_),
            ONRT_ERROR_INTERRUPTED);
  onrt_set_wait_check(nullptr, nullptr, 0);
  release_kernel = true;
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  for (char c : host) EXPECT_EQ(c, 0);  // the caller gave up on it: never written
  EXPECT_EQ(onrt_free(dev), ONRT_OK);
}

}  // namespace
