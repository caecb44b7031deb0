// Shareable device memory (openneuron/ipc.h), within one process: a handle
// opened here is a second view of the same memory, freed memory is released
// for every view, and memory allocated before sharing stays private.
#include "openneuron/ipc.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "openneuron/runtime.h"

namespace {

// Core 1, so the other tests' allocations on core 0 stay private.
constexpr int kDevice = 1;

TEST(IpcTest, HandlesOpenAViewOfTheSameMemory) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  void* before = nullptr;
  ASSERT_EQ(onrt_malloc(kDevice, 4 << 20, nullptr, &before), ONRT_OK);
  onrt_ipc_handle h{};
  EXPECT_EQ(onrt_ipc_get_handle(before, &h), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("not in shareable device memory"),
            std::string::npos);

  ASSERT_EQ(onrt_ipc_enable(kDevice), ONRT_OK) << onrt_last_error();
  ASSERT_EQ(onrt_ipc_enable(kDevice), ONRT_OK);  // idempotent
  void* p = nullptr;
  const size_t bytes = 24 << 20;  // a segment of its own
  ASSERT_EQ(onrt_malloc(kDevice, bytes, nullptr, &p), ONRT_OK);
  ASSERT_EQ(onrt_ipc_get_handle(static_cast<char*>(p) + 100, &h), ONRT_OK) << onrt_last_error();
  onrt_ipc_handle range{};
  ASSERT_EQ(onrt_ipc_range_handle(kDevice, &range), ONRT_OK);
  EXPECT_EQ(range.offset, 0u);
  EXPECT_EQ(range.inode, h.inode);
  EXPECT_GE(range.bytes, bytes);

  void* view = nullptr;
  ASSERT_EQ(onrt_ipc_open(&h, &view), ONRT_OK) << onrt_last_error();
  char* mine = static_cast<char*>(p);
  char* theirs = static_cast<char*>(view) + h.offset - 100;
  std::memset(mine, 7, bytes);
  EXPECT_EQ(theirs[0], 7);
  EXPECT_EQ(theirs[bytes - 1], 7);
  theirs[5] = 9;
  EXPECT_EQ(mine[5], 9);
  void* again = nullptr;  // opened twice: one mapping, two references
  ASSERT_EQ(onrt_ipc_open(&range, &again), ONRT_OK);
  EXPECT_EQ(again, view);
  EXPECT_EQ(onrt_ipc_close(again), ONRT_OK);

  // Freed and released: the pages are gone from the view too.
  ASSERT_EQ(onrt_free(p), ONRT_OK);
  ASSERT_EQ(onrt_empty_cache(kDevice), ONRT_OK);
  EXPECT_EQ(theirs[0], 0);
  // The range is reused by the next segment.
  void* q = nullptr;
  ASSERT_EQ(onrt_malloc(kDevice, bytes, nullptr, &q), ONRT_OK);
  onrt_ipc_handle hq{};
  ASSERT_EQ(onrt_ipc_get_handle(q, &hq), ONRT_OK);
  EXPECT_EQ(hq.offset, h.offset - 100);
  ASSERT_EQ(onrt_free(q), ONRT_OK);
  ASSERT_EQ(onrt_free(before), ONRT_OK);

  EXPECT_EQ(onrt_ipc_close(view), ONRT_OK);
  EXPECT_EQ(onrt_ipc_close(view), ONRT_ERROR_INVALID_ARGUMENT);
}

TEST(IpcTest, StaleOrForeignHandlesAreRejected) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  onrt_ipc_handle h{};
  ASSERT_EQ(onrt_ipc_range_handle(kDevice, &h), ONRT_OK) << onrt_last_error();
  void* view = nullptr;
  onrt_ipc_handle wrong = h;
  wrong.inode += 1;  // the descriptor now names other memory
  EXPECT_EQ(onrt_ipc_open(&wrong, &view), ONRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(view, nullptr);
  wrong = h;
  wrong.fd = 1 << 20;  // no such descriptor
  EXPECT_EQ(onrt_ipc_open(&wrong, &view), ONRT_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(onrt_last_error()).find("cannot open /proc/"), std::string::npos);
  EXPECT_EQ(onrt_ipc_open(nullptr, &view), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_ipc_get_handle(nullptr, &h), ONRT_ERROR_INVALID_ARGUMENT);
}

}  // namespace
