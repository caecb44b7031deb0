// Streams: ids, in-order execution, error state.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gate.h"
#include "openneuron/runtime.h"

namespace {

// Appends args[1].i to the int64 log at args[0].ptr (log[0] is the length).
int append_kernel(const void*, const onrt_arg* args, char*, size_t) {
  auto* log = static_cast<int64_t*>(args[0].ptr);
  log[1 + log[0]] = args[1].i;
  ++log[0];
  return 0;
}

int fail_kernel(const void*, const onrt_arg*, char* err, size_t errlen) {
  snprintf(err, errlen, "boom");
  return 1;
}

using ontest::Gate;

onrt_program_t make_program(const char* name, const char* instr, onrt_kernel_fn fn,
                            std::vector<int32_t> slots) {
  onrt_program_t p;
  EXPECT_EQ(onrt_program_create(name, &p), ONRT_OK);
  EXPECT_EQ(onrt_program_add_instruction(p, instr, fn, nullptr, 0, slots.data(),
                                         static_cast<int32_t>(slots.size())),
            ONRT_OK);
  return p;
}

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &stream_), ONRT_OK);
    append_ = make_program("log", "append", append_kernel, {0, 1});
    fail_ = make_program("bad_prog", "explode", fail_kernel, {});
  }
  void TearDown() override {
    onrt_program_release(append_);
    onrt_program_release(fail_);
    EXPECT_EQ(onrt_stream_destroy(stream_), ONRT_OK);
  }

  // Device int64 log with room for n entries, zeroed.
  int64_t* new_log(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(onrt_malloc(0, (n + 1) * sizeof(int64_t), stream_, &p), ONRT_OK);
    std::vector<int64_t> zeros(n + 1, 0);
    EXPECT_EQ(onrt_memcpy(p, zeros.data(), zeros.size() * 8, ONRT_COPY_HOST_TO_DEVICE, stream_),
              ONRT_OK);
    return static_cast<int64_t*>(p);
  }
  std::vector<int64_t> read_log(int64_t* log, size_t n) {
    std::vector<int64_t> out(n + 1);
    EXPECT_EQ(onrt_memcpy(out.data(), log, out.size() * 8, ONRT_COPY_DEVICE_TO_HOST, stream_),
              ONRT_OK)
        << onrt_last_error();
    return out;
  }
  void append(int64_t* log, int64_t value) {
    onrt_arg args[2];
    args[0].ptr = log;
    args[1].i = value;
    ASSERT_EQ(onrt_program_launch(stream_, append_, args, 2), ONRT_OK) << onrt_last_error();
  }

  onrt_stream_t stream_ = nullptr;
  onrt_program_t append_ = nullptr;
  onrt_program_t fail_ = nullptr;
};

TEST_F(StreamTest, IdsAndLookup) {
  onrt_stream_t d0, d1;
  ASSERT_EQ(onrt_stream_get_default(0, &d0), ONRT_OK);
  ASSERT_EQ(onrt_stream_get_default(1, &d1), ONRT_OK);
  EXPECT_NE(d0, d1);
  EXPECT_EQ(onrt_stream_id(d0), 0);
  EXPECT_EQ(onrt_stream_id(d1), 0);
  EXPECT_EQ(onrt_stream_device(d1), 1);

  onrt_stream_t a, b;
  ASSERT_EQ(onrt_stream_create(1, 0, &a), ONRT_OK);
  ASSERT_EQ(onrt_stream_create(1, -1, &b), ONRT_OK);
  EXPECT_GT(onrt_stream_id(a), 0);
  EXPECT_EQ(onrt_stream_id(b), onrt_stream_id(a) + 1);
  EXPECT_EQ(onrt_stream_device(b), 1);

  onrt_stream_t found;
  ASSERT_EQ(onrt_stream_from_id(1, onrt_stream_id(b), &found), ONRT_OK);
  EXPECT_EQ(found, b);
  ASSERT_EQ(onrt_stream_from_id(0, 0, &found), ONRT_OK);
  EXPECT_EQ(found, d0);
  EXPECT_EQ(onrt_stream_from_id(1, 1000000, &found), ONRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(onrt_stream_from_id(1, -1, &found), ONRT_ERROR_INVALID_HANDLE);

  const int64_t id_b = onrt_stream_id(b);
  ASSERT_EQ(onrt_stream_destroy(b), ONRT_OK);
  EXPECT_EQ(onrt_stream_from_id(1, id_b, &found), ONRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(onrt_stream_synchronize(b), ONRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(onrt_stream_id(b), -1);
  EXPECT_EQ(onrt_stream_synchronize(nullptr), ONRT_ERROR_INVALID_HANDLE);
  ASSERT_EQ(onrt_stream_destroy(a), ONRT_OK);
  // Ids are never reused.
  onrt_stream_t c;
  ASSERT_EQ(onrt_stream_create(1, 0, &c), ONRT_OK);
  EXPECT_GT(onrt_stream_id(c), id_b);
  ASSERT_EQ(onrt_stream_destroy(c), ONRT_OK);
  // The default stream survives a destroy request.
  EXPECT_EQ(onrt_stream_destroy(d0), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(d0), ONRT_OK);
}

TEST_F(StreamTest, ExecutesManyLaunchesInOrder) {
  constexpr int kN = 5000;
  int64_t* log = new_log(kN);
  onrt_counters before, after;
  ASSERT_EQ(onrt_get_counters(&before), ONRT_OK);
  for (int i = 0; i < kN; ++i) append(log, i);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK) << onrt_last_error();
  ASSERT_EQ(onrt_get_counters(&after), ONRT_OK);
  EXPECT_GE(after.launches - before.launches, kN);
  EXPECT_GE(after.instructions_executed - before.instructions_executed, kN);
  std::vector<int64_t> got = read_log(log, kN);
  ASSERT_EQ(got[0], kN);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(got[1 + i], i) << "at " << i;
  EXPECT_EQ(onrt_free(log), ONRT_OK);
}

TEST_F(StreamTest, HostFunctionsRunOnTheWorkerInOrder) {
  struct Ctx {
    std::vector<int> order;
    std::thread::id thread;
  } ctx;
  struct Step {
    Ctx* ctx;
    int value;
    static int run(void* self, char*, size_t) {
      auto* s = static_cast<Step*>(self);
      s->ctx->order.push_back(s->value);
      s->ctx->thread = std::this_thread::get_id();
      return 0;
    }
  };
  std::vector<Step> steps;
  for (int i = 0; i < 100; ++i) steps.push_back({&ctx, i});
  for (auto& s : steps) ASSERT_EQ(onrt_launch_host_fn(stream_, "step", &Step::run, &s), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  ASSERT_EQ(ctx.order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ctx.order[i], i);
  EXPECT_NE(ctx.thread, std::this_thread::get_id());
}

TEST_F(StreamTest, QueryReportsPendingWork) {
  Gate gate;
  ASSERT_EQ(onrt_launch_host_fn(stream_, "gate", &Gate::wait, &gate), ONRT_OK);
  EXPECT_EQ(onrt_stream_query(stream_), ONRT_ERROR_NOT_READY);
  gate.open = true;
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  EXPECT_EQ(onrt_stream_query(stream_), ONRT_OK);
}

TEST_F(StreamTest, FailureSkipsLaterWorkAndSurfacesOnceAtSynchronize) {
  int64_t* log = new_log(8);
  Gate gate;
  ASSERT_EQ(onrt_launch_host_fn(stream_, "gate", &Gate::wait, &gate), ONRT_OK);
  append(log, 1);
  ASSERT_EQ(onrt_program_launch(stream_, fail_, nullptr, 0), ONRT_OK);  // async: no error yet
  append(log, 2);                                                       // skipped
  append(log, 3);                                                       // skipped
  gate.open = true;
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "bad_prog/explode: boom");
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);  // cleared

  append(log, 4);  // runs again
  std::vector<int64_t> got = read_log(log, 8);
  EXPECT_EQ(got[0], 2);
  EXPECT_EQ(got[1], 1);
  EXPECT_EQ(got[2], 4);
  EXPECT_EQ(onrt_free(log), ONRT_OK);
}

TEST_F(StreamTest, QuerySurfacesErrorWhenIdle) {
  auto failing = [](void*, char* err, size_t len) -> int {
    snprintf(err, len, "disk on fire");
    return 7;
  };
  ASSERT_EQ(onrt_launch_host_fn(stream_, "save_checkpoint", failing, nullptr), ONRT_OK);
  onrt_status st;
  while ((st = onrt_stream_query(stream_)) == ONRT_ERROR_NOT_READY) std::this_thread::yield();
  EXPECT_EQ(st, ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "save_checkpoint: disk on fire");
  EXPECT_EQ(onrt_stream_query(stream_), ONRT_OK);
}

TEST_F(StreamTest, KernelWithoutMessageStillNamesTheOperation) {
  onrt_program_t p = make_program(
      "quiet", "silent_fail", [](const void*, const onrt_arg*, char*, size_t) { return 3; }, {});
  ASSERT_EQ(onrt_program_launch(stream_, p, nullptr, 0), ONRT_OK);
  onrt_program_release(p);
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "quiet/silent_fail: kernel returned error 3");
}

TEST_F(StreamTest, KernelExceptionsBecomeTheStreamErrorAndTheStreamGoesOn) {
  onrt_program_t throws = make_program(
      "gemm", "tile",
      [](const void*, const onrt_arg*, char*, size_t) -> int {
        throw std::runtime_error("primitive creation failed");
      },
      {});
  onrt_program_t throws_other = make_program(
      "odd", "thing", [](const void*, const onrt_arg*, char*, size_t) -> int { throw 42; }, {});
  ASSERT_EQ(onrt_program_launch(stream_, throws, nullptr, 0), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(),
               "gemm/tile: internal error (C++ exception): primitive creation failed");
  ASSERT_EQ(onrt_program_launch(stream_, throws_other, nullptr, 0), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "odd/thing: internal error (unknown C++ exception)");
  onrt_program_release(throws);
  onrt_program_release(throws_other);
  // The worker survived both: later work runs.
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  onrt_program_t fine =
      make_program("fine", "noop", [](const void*, const onrt_arg*, char*, size_t) { return 0; }, {});
  ASSERT_EQ(onrt_program_launch(stream_, fine, nullptr, 0), ONRT_OK);
  onrt_program_release(fine);
  EXPECT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
}

TEST_F(StreamTest, DeviceSynchronizeReportsAndClearsStreamErrors) {
  onrt_stream_t other;
  ASSERT_EQ(onrt_stream_create(0, 0, &other), ONRT_OK);
  ASSERT_EQ(onrt_program_launch(other, fail_, nullptr, 0), ONRT_OK);
  EXPECT_EQ(onrt_device_synchronize(0), ONRT_ERROR_EXECUTION_FAILED);
  EXPECT_STREQ(onrt_last_error(), "bad_prog/explode: boom");
  EXPECT_EQ(onrt_device_synchronize(0), ONRT_OK);
  EXPECT_EQ(onrt_stream_synchronize(other), ONRT_OK);
  ASSERT_EQ(onrt_stream_destroy(other), ONRT_OK);
}

TEST_F(StreamTest, ConcurrentLaunchersOnSeparateStreams) {
  constexpr int kThreads = 3, kN = 1000;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      onrt_stream_t s;
      ASSERT_EQ(onrt_stream_create(t % 2, 0, &s), ONRT_OK);
      void* p = nullptr;
      ASSERT_EQ(onrt_malloc(t % 2, (kN + 1) * 8, s, &p), ONRT_OK);
      std::vector<int64_t> host(kN + 1, 0);
      ASSERT_EQ(onrt_memcpy(p, host.data(), host.size() * 8, ONRT_COPY_HOST_TO_DEVICE, s), ONRT_OK);
      for (int i = 0; i < kN; ++i) {
        onrt_arg args[2];
        args[0].ptr = p;
        args[1].i = i * 10 + t;
        ASSERT_EQ(onrt_program_launch(s, append_, args, 2), ONRT_OK);
      }
      ASSERT_EQ(onrt_memcpy(host.data(), p, host.size() * 8, ONRT_COPY_DEVICE_TO_HOST, s), ONRT_OK);
      results[t] = host;
      ASSERT_EQ(onrt_free(p), ONRT_OK);
      ASSERT_EQ(onrt_stream_destroy(s), ONRT_OK);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(results[t].size(), static_cast<size_t>(kN + 1));
    EXPECT_EQ(results[t][0], kN);
    for (int i = 0; i < kN; ++i) ASSERT_EQ(results[t][1 + i], i * 10 + t);
  }
}

}  // namespace
