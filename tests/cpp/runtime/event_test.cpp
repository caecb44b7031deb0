// Events: completion, timing, cross-stream and cross-device waits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gate.h"
#include "openneuron/runtime.h"

namespace {

using namespace std::chrono_literals;

using ontest::Gate;

int sleep_20ms(void*, char*, size_t) {
  std::this_thread::sleep_for(20ms);
  return 0;
}

class EventTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &s0_), ONRT_OK);
    ASSERT_EQ(onrt_stream_create(1, 0, &s1_), ONRT_OK);
  }
  void TearDown() override {
    EXPECT_EQ(onrt_stream_destroy(s0_), ONRT_OK);
    EXPECT_EQ(onrt_stream_destroy(s1_), ONRT_OK);
  }
  onrt_stream_t s0_ = nullptr, s1_ = nullptr;
};

TEST_F(EventTest, NeverRecordedIsComplete) {
  onrt_event_t e;
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_DEFAULT, &e), ONRT_OK);
  EXPECT_EQ(onrt_event_query(e), ONRT_OK);
  EXPECT_EQ(onrt_event_synchronize(e), ONRT_OK);
  EXPECT_EQ(onrt_stream_wait_event(s0_, e), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(s0_), ONRT_OK);
  EXPECT_EQ(onrt_event_destroy(e), ONRT_OK);
  EXPECT_EQ(onrt_event_create(0x80, &e), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_event_query(nullptr), ONRT_ERROR_INVALID_HANDLE);
}

TEST_F(EventTest, CompletesWhenTheStreamPassesIt) {
  for (unsigned flags : {unsigned{ONRT_EVENT_DEFAULT}, unsigned{ONRT_EVENT_TIMING}}) {
    Gate gate;
    onrt_event_t e;
    ASSERT_EQ(onrt_event_create(flags, &e), ONRT_OK);
    ASSERT_EQ(onrt_launch_host_fn(s0_, "gate", &Gate::wait, &gate), ONRT_OK);
    ASSERT_EQ(onrt_event_record(e, s0_), ONRT_OK);
    EXPECT_EQ(onrt_event_query(e), ONRT_ERROR_NOT_READY) << flags;
    gate.open = true;
    EXPECT_EQ(onrt_event_synchronize(e), ONRT_OK);
    EXPECT_EQ(onrt_event_query(e), ONRT_OK);
    // Re-recording on an idle stream captures nothing pending.
    ASSERT_EQ(onrt_event_record(e, s0_), ONRT_OK);
    EXPECT_EQ(onrt_event_synchronize(e), ONRT_OK);
    EXPECT_EQ(onrt_event_query(e), ONRT_OK);
    EXPECT_EQ(onrt_event_destroy(e), ONRT_OK);
  }
}

TEST_F(EventTest, RecordDoesNotWaitForLaterWork) {
  Gate gate;
  onrt_event_t e;
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_DEFAULT, &e), ONRT_OK);
  ASSERT_EQ(onrt_event_record(e, s0_), ONRT_OK);  // nothing queued before it
  ASSERT_EQ(onrt_launch_host_fn(s0_, "gate", &Gate::wait, &gate), ONRT_OK);
  EXPECT_EQ(onrt_event_query(e), ONRT_OK);
  gate.open = true;
  EXPECT_EQ(onrt_stream_synchronize(s0_), ONRT_OK);
  EXPECT_EQ(onrt_event_destroy(e), ONRT_OK);
}

TEST_F(EventTest, ElapsedTime) {
  onrt_event_t start, end, plain;
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_TIMING, &start), ONRT_OK);
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_TIMING, &end), ONRT_OK);
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_DEFAULT, &plain), ONRT_OK);
  float ms = -1;
  EXPECT_EQ(onrt_event_elapsed_ms(start, end, &ms), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("never recorded"), std::string::npos);

  Gate gate;
  ASSERT_EQ(onrt_launch_host_fn(s0_, "gate", &Gate::wait, &gate), ONRT_OK);
  ASSERT_EQ(onrt_event_record(start, s0_), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "sleep", &sleep_20ms, nullptr), ONRT_OK);
  ASSERT_EQ(onrt_event_record(end, s0_), ONRT_OK);
  EXPECT_EQ(onrt_event_elapsed_ms(start, end, &ms), ONRT_ERROR_NOT_READY);
  EXPECT_NE(std::string(onrt_last_error()).find("not completed"), std::string::npos);
  gate.open = true;
  ASSERT_EQ(onrt_event_synchronize(end), ONRT_OK);
  ASSERT_EQ(onrt_event_elapsed_ms(start, end, &ms), ONRT_OK) << onrt_last_error();
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 5000.0f);

  ASSERT_EQ(onrt_event_record(plain, s0_), ONRT_OK);
  EXPECT_EQ(onrt_event_elapsed_ms(start, plain, &ms), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("ONRT_EVENT_TIMING"), std::string::npos);
  for (onrt_event_t e : {start, end, plain}) EXPECT_EQ(onrt_event_destroy(e), ONRT_OK);
}

TEST_F(EventTest, StreamWaitsForEventAcrossDevices) {
  std::atomic<int> producer_done{0};
  int seen_by_consumer = -1;
  Gate gate;
  struct Produce {
    static int run(void* p, char*, size_t) {
      std::this_thread::sleep_for(5ms);
      static_cast<std::atomic<int>*>(p)->store(1);
      return 0;
    }
  };
  struct Consume {
    std::atomic<int>* done;
    int* seen;
    static int run(void* self, char*, size_t) {
      auto* c = static_cast<Consume*>(self);
      *c->seen = c->done->load();
      return 0;
    }
  } consume{&producer_done, &seen_by_consumer};

  onrt_event_t e;
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_DEFAULT, &e), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "gate", &Gate::wait, &gate), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "produce", &Produce::run, &producer_done), ONRT_OK);
  ASSERT_EQ(onrt_event_record(e, s0_), ONRT_OK);
  ASSERT_EQ(onrt_stream_wait_event(s1_, e), ONRT_OK);  // s1 is on neuron:1
  ASSERT_EQ(onrt_launch_host_fn(s1_, "consume", &Consume::run, &consume), ONRT_OK);
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(onrt_stream_query(s1_), ONRT_ERROR_NOT_READY);
  gate.open = true;
  ASSERT_EQ(onrt_stream_synchronize(s1_), ONRT_OK);
  EXPECT_EQ(seen_by_consumer, 1);
  EXPECT_EQ(onrt_event_destroy(e), ONRT_OK);
}

TEST_F(EventTest, DestroyWhileTimestampPendingIsSafe) {
  Gate gate;
  onrt_event_t e;
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_TIMING, &e), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "gate", &Gate::wait, &gate), ONRT_OK);
  ASSERT_EQ(onrt_event_record(e, s0_), ONRT_OK);
  ASSERT_EQ(onrt_event_destroy(e), ONRT_OK);
  gate.open = true;
  EXPECT_EQ(onrt_stream_synchronize(s0_), ONRT_OK);
}

TEST_F(EventTest, EventsCompleteEvenWhenTheStreamFailed) {
  auto failing = [](void*, char* err, size_t len) -> int {
    snprintf(err, len, "nope");
    return 1;
  };
  onrt_event_t e;
  ASSERT_EQ(onrt_event_create(ONRT_EVENT_TIMING, &e), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(s0_, "failing", failing, nullptr), ONRT_OK);
  ASSERT_EQ(onrt_event_record(e, s0_), ONRT_OK);
  ASSERT_EQ(onrt_stream_wait_event(s1_, e), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(s1_), ONRT_OK);  // no deadlock
  EXPECT_EQ(onrt_event_synchronize(e), ONRT_OK);
  float ms;
  EXPECT_EQ(onrt_event_elapsed_ms(e, e, &ms), ONRT_OK);
  EXPECT_EQ(ms, 0.0f);
  EXPECT_EQ(onrt_stream_synchronize(s0_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "failing: nope");
  EXPECT_EQ(onrt_event_destroy(e), ONRT_OK);
}

}  // namespace
