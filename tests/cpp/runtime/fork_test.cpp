// A child forked after initialisation must refuse to use the runtime.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "openneuron/runtime.h"

namespace {

// Each failed check in the child maps to its own exit code, so the parent's
// assertion says which one broke.
int child_checks() {
  if (onrt_in_bad_fork() != 1) return 10;
  if (onrt_is_initialized() != 0) return 11;
  if (onrt_init() != ONRT_ERROR_FORKED) return 12;
  const std::string msg = onrt_last_error();
  if (msg.find("initialised in the parent process") == std::string::npos) return 13;
  if (msg.find("multiprocessing.set_start_method('spawn')") == std::string::npos) return 14;
  void* p = nullptr;
  if (onrt_malloc(0, 64, nullptr, &p) != ONRT_ERROR_FORKED) return 15;
  onrt_stream_t s;
  if (onrt_stream_get_default(0, &s) != ONRT_ERROR_FORKED) return 16;
  if (onrt_device_synchronize(0) != ONRT_ERROR_FORKED) return 17;
  int n = 0;
  if (onrt_device_count(&n) != ONRT_OK || n != 2) return 18;  // still answers
  return 0;
}

TEST(ForkTest, ChildOfInitialisedParentGetsForkedError) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  // Make sure worker threads exist in the parent at fork time.
  onrt_stream_t s;
  ASSERT_EQ(onrt_stream_get_default(0, &s), ONRT_OK);
  ASSERT_EQ(onrt_launch_host_fn(
                s, "noop", [](void*, char*, size_t) { return 0; }, nullptr),
            ONRT_OK);
  ASSERT_EQ(onrt_stream_synchronize(s), ONRT_OK);

  pid_t pid = fork();
  ASSERT_GE(pid, 0) << strerror(errno);
  if (pid == 0) _exit(child_checks());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  // The parent is unaffected.
  EXPECT_EQ(onrt_in_bad_fork(), 0);
  EXPECT_EQ(onrt_is_initialized(), 1);
  void* p = nullptr;
  ASSERT_EQ(onrt_malloc(0, 64, nullptr, &p), ONRT_OK);
  EXPECT_EQ(onrt_free(p), ONRT_OK);
}

}  // namespace
