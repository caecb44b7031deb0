// Device activity tracing: records carry the queuing thread's correlation id,
// instruction and program names, ordered non-overlapping intervals on one
// stream; totals count whole programs; nothing is recorded while disabled.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "openneuron/runtime.h"

namespace {

int sleep_kernel(const void*, const onrt_arg*, char*, size_t) {
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  return 0;
}

struct Seen {
  std::string name, program;
  onrt_activity_kind kind;
  uint64_t correlation, call_id;
  int64_t start, end, stream;
  uint64_t bytes;
};

void collect(const onrt_activity* a, void* user) {
  static_cast<std::vector<Seen>*>(user)->push_back(Seen{a->name, a->program, a->kind,
                                                        a->correlation_id, a->call_id, a->start_ns,
                                                        a->end_ns, a->stream, a->bytes});
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &stream_), ONRT_OK);
    ASSERT_EQ(onrt_program_create("Two", &program_), ONRT_OK);
    for (const char* name : {"first", "second"}) {
      ASSERT_EQ(onrt_program_add_instruction(program_, name, sleep_kernel, nullptr, 0, nullptr, 0),
                ONRT_OK);
    }
  }
  void TearDown() override {
    EXPECT_EQ(onrt_program_release(program_), ONRT_OK);
    EXPECT_EQ(onrt_stream_destroy(stream_), ONRT_OK);
  }
  onrt_stream_t stream_ = nullptr;
  onrt_program_t program_ = nullptr;
};

TEST_F(TraceTest, RecordsKernelsAndCopiesWithCorrelation) {
  ASSERT_EQ(onrt_trace_enable(ONRT_TRACE_RECORDS, 1, 0), ONRT_OK);
  onrt_trace_push_correlation(7);
  ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  onrt_trace_pop_correlation();
  onrt_trace_push_correlation(8);
  std::vector<char> host(4096, 1);
  void* dev = nullptr;
  ASSERT_EQ(onrt_malloc(0, host.size(), stream_, &dev), ONRT_OK);
  ASSERT_EQ(onrt_memcpy_async(dev, host.data(), host.size(), ONRT_COPY_HOST_TO_DEVICE, stream_),
            ONRT_OK);
  onrt_trace_pop_correlation();
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  ASSERT_EQ(onrt_trace_enable(ONRT_TRACE_RECORDS, 0, 0), ONRT_OK);

  std::vector<Seen> all;
  EXPECT_EQ(onrt_trace_collect(collect, &all), 0u);
  // The host-side calls: one launch and one copy, stamped like their work.
  std::vector<Seen> seen, calls;
  for (const Seen& s : all) (s.kind == ONRT_ACTIVITY_RUNTIME ? calls : seen).push_back(s);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "onrtLaunch");
  EXPECT_EQ(calls[0].program, "Two");
  EXPECT_EQ(calls[0].correlation, 7u);
  EXPECT_EQ(calls[1].name, "onrtMemcpy");
  EXPECT_EQ(calls[1].correlation, 8u);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].name, "first");
  EXPECT_EQ(seen[1].name, "second");
  for (int k : {0, 1}) {
    EXPECT_EQ(seen[k].program, "Two");
    EXPECT_EQ(seen[k].kind, ONRT_ACTIVITY_KERNEL);
    EXPECT_EQ(seen[k].correlation, 7u);
    EXPECT_GE(seen[k].end - seen[k].start, 200'000);
    EXPECT_EQ(seen[k].stream, onrt_stream_id(stream_));
  }
  EXPECT_LE(seen[0].end, seen[1].start);
  EXPECT_EQ(seen[2].name, "memcpy host-to-device");
  EXPECT_EQ(seen[2].kind, ONRT_ACTIVITY_COPY);
  EXPECT_EQ(seen[2].correlation, 8u);
  EXPECT_EQ(seen[2].bytes, host.size());
  EXPECT_LE(seen[1].end, seen[2].start);
  // Each call's id is its own and is carried by the work it queued.
  EXPECT_NE(calls[0].call_id, 0u);
  EXPECT_NE(calls[0].call_id, calls[1].call_id);
  EXPECT_EQ(seen[0].call_id, calls[0].call_id);
  EXPECT_EQ(seen[1].call_id, calls[0].call_id);
  EXPECT_EQ(seen[2].call_id, calls[1].call_id);

  // Collect forgot them; nothing is recorded while disabled.
  ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  seen.clear();
  onrt_trace_collect(collect, &seen);
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(onrt_free(dev), ONRT_OK);
}

TEST_F(TraceTest, BoundedRecordsCountDrops) {
  ASSERT_EQ(onrt_trace_enable(ONRT_TRACE_RECORDS, 1, 6), ONRT_OK);
  for (int k = 0; k < 3; ++k)
    ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  ASSERT_EQ(onrt_trace_enable(ONRT_TRACE_RECORDS, 0, 0), ONRT_OK);
  std::vector<Seen> seen;
  // 3 launch calls and 6 kernels: the last 3 kernels do not fit.
  EXPECT_EQ(onrt_trace_collect(collect, &seen), 3u);
  EXPECT_EQ(seen.size(), 6u);
}

void add_total(const char* name, int64_t count, int64_t ns, void* user) {
  auto* out = static_cast<std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>>*>(user);
  out->push_back({name, {count, ns}});
}

TEST_F(TraceTest, TotalsCountWholeProgramsAndKeepNoRecords) {
  ASSERT_EQ(onrt_trace_enable(ONRT_TRACE_TOTALS, 1, 0), ONRT_OK);
  for (int k = 0; k < 4; ++k)
    ASSERT_EQ(onrt_program_launch(stream_, program_, nullptr, 0), ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(stream_), ONRT_OK);
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> totals;
  onrt_trace_totals(add_total, &totals);
  ASSERT_EQ(onrt_trace_enable(ONRT_TRACE_TOTALS, 0, 0), ONRT_OK);
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(totals[0].first, "Two");
  EXPECT_EQ(totals[0].second.first, 4);
  EXPECT_GE(totals[0].second.second, 4 * 400'000);
  std::vector<Seen> seen;
  onrt_trace_collect(collect, &seen);
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(onrt_trace_enable(77, 1, 0), ONRT_ERROR_INVALID_ARGUMENT);
}

}  // namespace
