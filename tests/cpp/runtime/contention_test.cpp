// Contended-host execution (contention.h): short launches onto an idle stream
// run on the calling thread with the worker's error semantics, and the
// automatic judgement follows the load.
#include "../../../csrc/runtime/contention.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "openneuron/runtime.h"

namespace {

using openneuron::runtime::ContentionMode;
using openneuron::runtime::host_contended;
using openneuron::runtime::set_contention_mode;

std::atomic<std::thread::id> g_ran_on;
std::atomic<int> g_fail_next{0};

int record_thread(const void*, const onrt_arg*, char* err, size_t len) {
  g_ran_on = std::this_thread::get_id();
  if (g_fail_next.exchange(0) != 0) {
    snprintf(err, len, "index 9 out of bounds");
    return 1;
  }
  return 0;
}

int busy_2ms(const void*, const onrt_arg*, char*, size_t) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
  while (std::chrono::steady_clock::now() < end) {
  }
  g_ran_on = std::this_thread::get_id();
  return 0;
}

class ContentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &stream_), ONRT_OK);
    ASSERT_EQ(onrt_program_create("short", &short_), ONRT_OK);
    ASSERT_EQ(onrt_program_add_instruction(short_, "vector.gather", record_thread, nullptr, 0,
                                           nullptr, 0),
              ONRT_OK);
  }
  void TearDown() override {
    set_contention_mode(ContentionMode::kAuto);
    EXPECT_EQ(onrt_stream_destroy(stream_), ONRT_OK);
    onrt_program_release(short_);
  }
  // Launches `p` once on the worker (its first run is not known to be short)
  // and waits for it.
  void warm(onrt_program_t p) {
    ASSERT_EQ(onrt_program_launch(stream_, p, nullptr, 0), ONRT_OK);
    ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  }
  onrt_stream_t stream_ = nullptr;
  onrt_program_t short_ = nullptr;
};

TEST_F(ContentionTest, ShortLaunchRunsOnTheCallerWhenContended) {
  set_contention_mode(ContentionMode::kOn);
  warm(short_);
  EXPECT_NE(g_ran_on.load(), std::this_thread::get_id());  // first run: on the worker
  ASSERT_EQ(onrt_program_launch(stream_, short_, nullptr, 0), ONRT_OK);
  EXPECT_EQ(g_ran_on.load(), std::this_thread::get_id());
  EXPECT_EQ(onrt_stream_query(stream_), ONRT_OK);

  set_contention_mode(ContentionMode::kOff);
  ASSERT_EQ(onrt_program_launch(stream_, short_, nullptr, 0), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  EXPECT_NE(g_ran_on.load(), std::this_thread::get_id());
}

TEST_F(ContentionTest, FailureOnTheCallerIsReportedAtTheNextSynchronization) {
  set_contention_mode(ContentionMode::kOn);
  warm(short_);
  g_fail_next = 1;
  EXPECT_EQ(onrt_program_launch(stream_, short_, nullptr, 0), ONRT_OK);
  EXPECT_EQ(g_ran_on.load(), std::this_thread::get_id());
  // Later work is skipped until the error is taken, as on the worker.
  g_ran_on = std::thread::id();
  EXPECT_EQ(onrt_program_launch(stream_, short_, nullptr, 0), ONRT_OK);
  EXPECT_EQ(g_ran_on.load(), std::thread::id());
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "short/vector.gather: index 9 out of bounds");
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);  // reported once
}

TEST_F(ContentionTest, BusyStreamKeepsItsOrder) {
  set_contention_mode(ContentionMode::kOn);
  warm(short_);
  std::atomic<int> order{0};
  int slow_at = -1;
  struct Slow {
    std::atomic<int>* order;
    int* at;
    static int run(void* self, char*, size_t) {
      auto* s = static_cast<Slow*>(self);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      *s->at = s->order->fetch_add(1);
      return 0;
    }
  } slow{&order, &slow_at};
  ASSERT_EQ(onrt_launch_host_fn(stream_, "slow", &Slow::run, &slow), ONRT_OK);
  g_ran_on = std::thread::id();
  ASSERT_EQ(onrt_program_launch(stream_, short_, nullptr, 0), ONRT_OK);  // queued behind it
  EXPECT_EQ(g_ran_on.load(), std::thread::id());
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  EXPECT_EQ(slow_at, 0);
  EXPECT_NE(g_ran_on.load(), std::this_thread::get_id());
}

TEST_F(ContentionTest, LongLaunchStaysOnTheWorker) {
  set_contention_mode(ContentionMode::kOn);
  onrt_program_t slow;
  ASSERT_EQ(onrt_program_create("long", &slow), ONRT_OK);
  ASSERT_EQ(onrt_program_add_instruction(slow, "vector.spin", busy_2ms, nullptr, 0, nullptr, 0),
            ONRT_OK);
  warm(slow);
  ASSERT_EQ(onrt_program_launch(stream_, slow, nullptr, 0), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  EXPECT_NE(g_ran_on.load(), std::this_thread::get_id());
  onrt_program_release(slow);
}

TEST_F(ContentionTest, AutomaticJudgementFollowsTheLoad) {
  if (!std::ifstream("/proc/thread-self/schedstat")) GTEST_SKIP() << "no schedstat on this kernel";
  set_contention_mode(ContentionMode::kAuto);
  onrt_program_t slow;
  ASSERT_EQ(onrt_program_create("long", &slow), ONRT_OK);
  ASSERT_EQ(onrt_program_add_instruction(slow, "vector.spin", busy_2ms, nullptr, 0, nullptr, 0),
            ONRT_OK);
  // Twice as many spinning threads as cores: the worker waits for a core most
  // of the time it is runnable.
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (unsigned i = 0; i < 2 * std::max(1u, std::thread::hardware_concurrency()); ++i) {
    load.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 10; ++i) ASSERT_EQ(onrt_program_launch(stream_, slow, nullptr, 0), ONRT_OK);
    ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
    seen = host_contended();
  }
  stop = true;
  for (auto& t : load) t.join();
  EXPECT_TRUE(seen) << "a loaded host was never judged contended";
  // A judgement holds for 250 ms; the quiet host is judged afresh after it.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(host_contended());
  onrt_program_release(slow);
}

}  // namespace
