// NEURON_LAUNCH_BLOCKING semantics, switched on through the internal setter
// (the environment is read once per process).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../../../csrc/runtime/state.h"
#include "openneuron/runtime.h"

namespace {

class LaunchBlockingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &stream_), ONRT_OK);
    openneuron::runtime::set_launch_blocking(true);
  }
  void TearDown() override {
    openneuron::runtime::set_launch_blocking(false);
    EXPECT_EQ(onrt_stream_destroy(stream_), ONRT_OK);
  }
  onrt_stream_t stream_ = nullptr;
};

int fail_kernel(const void*, const onrt_arg*, char* err, size_t len) {
  snprintf(err, len, "index 7 out of bounds");
  return 1;
}

TEST_F(LaunchBlockingTest, ErrorsSurfaceAtTheLaunch) {
  onrt_program_t p;
  ASSERT_EQ(onrt_program_create("gather", &p), ONRT_OK);
  ASSERT_EQ(onrt_program_add_instruction(p, "vector.gather", fail_kernel, nullptr, 0, nullptr, 0),
            ONRT_OK);
  EXPECT_EQ(onrt_program_launch(stream_, p, nullptr, 0), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "gather/vector.gather: index 7 out of bounds");
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);  // reported once
  onrt_program_release(p);
}

TEST_F(LaunchBlockingTest, WorkIsDoneWhenTheCallReturns) {
  std::atomic<int> runs{0};
  auto fn = [](void* self, char*, size_t) -> int {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    static_cast<std::atomic<int>*>(self)->fetch_add(1);
    return 0;
  };
  for (int i = 1; i <= 5; ++i) {
    ASSERT_EQ(onrt_launch_host_fn(stream_, "count", fn, &runs), ONRT_OK);
    EXPECT_EQ(runs.load(), i);
    EXPECT_EQ(onrt_stream_query(stream_), ONRT_OK);
  }
}

TEST_F(LaunchBlockingTest, BusyStreamStillCompletesBeforeReturning) {
  // Work queued from before blocking mode: the blocking launch queues behind
  // it and waits for both.
  openneuron::runtime::set_launch_blocking(false);
  std::atomic<int> order{0};
  int first = -1, second = -1;
  struct Step {
    std::atomic<int>* order;
    int* slot;
    int sleep_ms;
    static int run(void* self, char*, size_t) {
      auto* s = static_cast<Step*>(self);
      std::this_thread::sleep_for(std::chrono::milliseconds(s->sleep_ms));
      *s->slot = s->order->fetch_add(1);
      return 0;
    }
  } slow{&order, &first, 20}, fast{&order, &second, 0};
  ASSERT_EQ(onrt_launch_host_fn(stream_, "slow", &Step::run, &slow), ONRT_OK);
  openneuron::runtime::set_launch_blocking(true);
  ASSERT_EQ(onrt_launch_host_fn(stream_, "fast", &Step::run, &fast), ONRT_OK);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
}

}  // namespace
