#include "../../../csrc/runtime/status.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "openneuron/runtime.h"

namespace openneuron::runtime {
namespace {

TEST(StatusTest, Names) {
  EXPECT_STREQ(onrt_status_name(ONRT_OK), "ONRT_OK");
  EXPECT_STREQ(onrt_status_name(ONRT_ERROR_OUT_OF_MEMORY), "ONRT_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(onrt_status_name(ONRT_ERROR_INVALID_CONFIG), "ONRT_ERROR_INVALID_CONFIG");
  EXPECT_STREQ(onrt_status_name(static_cast<onrt_status>(99)), "ONRT_ERROR_UNKNOWN");
}

TEST(StatusTest, LastErrorIsPerThread) {
  EXPECT_EQ(onrt_malloc(12345, 16, nullptr, nullptr), ONRT_ERROR_INVALID_ARGUMENT);
  std::string mine = onrt_last_error();
  EXPECT_NE(mine.find("NULL"), std::string::npos) << mine;
  std::string other = "unset";
  std::thread([&] { other = onrt_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(std::string(onrt_last_error()), mine);
}

TEST(StatusTest, FormatSize) {
  EXPECT_EQ(format_size(0), "0 bytes");
  EXPECT_EQ(format_size(512), "512 bytes");
  EXPECT_EQ(format_size(1536), "1.50 KiB");
  EXPECT_EQ(format_size(20ull << 20), "20.00 MiB");
  EXPECT_EQ(format_size(25ull << 30), "25.00 GiB");
}

}  // namespace
}  // namespace openneuron::runtime
