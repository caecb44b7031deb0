// The runtime's log channel: a callback gets the messages at its level and
// above, from any thread, and nothing once it is removed.
#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "openneuron/runtime.h"

namespace {

struct Received {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> messages;
};

void receive(int level, const char* message, void* user) {
  auto* r = static_cast<Received*>(user);
  std::lock_guard<std::mutex> lock(r->mu);
  r->messages.emplace_back(level, message);
}

TEST(LogTest, CallbackGetsItsLevelAndAboveFromAnyThread) {
  Received r;
  onrt_log_set_callback(receive, &r, ONRT_LOG_INFO);
  EXPECT_FALSE(onrt_log_enabled(ONRT_LOG_DEBUG));
  EXPECT_TRUE(onrt_log_enabled(ONRT_LOG_INFO));
  onrt_log(ONRT_LOG_DEBUG, "not sent");
  onrt_log(ONRT_LOG_INFO, "info");
  std::thread([] { onrt_log(ONRT_LOG_ERROR, "from a worker"); }).join();
  onrt_log_set_callback(nullptr, nullptr, 0);
  onrt_log(ONRT_LOG_INFO, "after removal");  // below the default (warnings): dropped
  EXPECT_FALSE(onrt_log_enabled(ONRT_LOG_INFO));
  EXPECT_TRUE(onrt_log_enabled(ONRT_LOG_WARNING));
  const std::vector<std::pair<int, std::string>> want{{ONRT_LOG_INFO, "info"},
                                                      {ONRT_LOG_ERROR, "from a worker"}};
  EXPECT_EQ(r.messages, want);
}

TEST(LogTest, AFailingStreamLogsItsError) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  Received r;
  onrt_log_set_callback(receive, &r, ONRT_LOG_DEBUG);
  onrt_stream_t stream = nullptr;
  ASSERT_EQ(onrt_stream_create(0, 0, &stream), ONRT_OK);
  onrt_program_t program = nullptr;
  ASSERT_EQ(onrt_program_create("Broken", &program), ONRT_OK);
  auto fails = [](const void*, const onrt_arg*, char* error, size_t size) -> int {
    std::snprintf(error, size, "bad index 7");
    return 1;
  };
  ASSERT_EQ(onrt_program_add_instruction(program, "gather", fails, nullptr, 0, nullptr, 0),
            ONRT_OK);
  ASSERT_EQ(onrt_program_launch(stream, program, nullptr, 0), ONRT_OK);
  EXPECT_NE(onrt_stream_synchronize(stream), ONRT_OK);
  onrt_log_set_callback(nullptr, nullptr, 0);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].first, ONRT_LOG_DEBUG);
  EXPECT_NE(r.messages[0].second.find("failed: Broken/gather: bad index 7"), std::string::npos)
      << r.messages[0].second;
  onrt_program_release(program);
  onrt_stream_destroy(stream);
}

}  // namespace
