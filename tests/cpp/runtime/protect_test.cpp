// Protected device memory (OPENNEURON_PROTECT_MEMORY=1): host code outside
// runtime work faults on device memory, with a message naming the mode; the
// runtime's own work (copies, host functions) still reaches it. Each case runs
// in a death-test child, which turns protection on before the runtime starts.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "openneuron/device_access.h"
#include "openneuron/runtime.h"

namespace {

bool have_protection_keys() {
  const int key = pkey_alloc(0, 0);
  if (key < 0) return false;
  pkey_free(key);
  return true;
}

onrt_stream_t default_stream() {
  onrt_stream_t s = nullptr;
  if (onrt_stream_get_default(0, &s) != ONRT_OK) std::exit(5);
  return s;
}

// A device buffer of the protected runtime holding 1, 2, 3, 4.
int* protected_buffer() {
  setenv("OPENNEURON_PROTECT_MEMORY", "1", 1);
  void* p = nullptr;
  if (onrt_malloc(0, 4 * sizeof(int), nullptr, &p) != ONRT_OK) {
    fprintf(stderr, "onrt_malloc: %s\n", onrt_last_error());
    std::exit(3);
  }
  const int values[4] = {1, 2, 3, 4};
  if (onrt_memcpy(p, values, sizeof values, ONRT_COPY_HOST_TO_DEVICE, default_stream()) !=
      ONRT_OK) {
    fprintf(stderr, "onrt_memcpy: %s\n", onrt_last_error());
    std::exit(4);
  }
  return static_cast<int*>(p);
}

const char* const kMessage =
    "host code touched neuron device memory at 0x[0-9a-f]+ outside runtime work";

class ProtectedMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_protection_keys()) GTEST_SKIP() << "no memory protection keys (pku) here";
  }
};

TEST_F(ProtectedMemory, AHostReadFaultsWithAMessage) {
  EXPECT_DEATH(
      {
        volatile int* p = protected_buffer();
        fprintf(stderr, "read %d\n", p[1]);
      },
      kMessage);
}

TEST_F(ProtectedMemory, AHostWriteFaultsToo) {
  EXPECT_DEATH(std::memset(protected_buffer(), 0, sizeof(int)), kMessage);
}

TEST_F(ProtectedMemory, RuntimeWorkStillReadsAndWrites) {
  EXPECT_EXIT(
      {
        int* p = protected_buffer();
        void* q = nullptr;
        int out[4] = {};
        const bool ok =
            onrt_malloc(0, sizeof out, nullptr, &q) == ONRT_OK &&
            onrt_memcpy(q, p, sizeof out, ONRT_COPY_DEVICE_TO_DEVICE, default_stream()) ==
                ONRT_OK &&
            onrt_memcpy(out, q, sizeof out, ONRT_COPY_DEVICE_TO_HOST, default_stream()) == ONRT_OK;
        onrt_device_properties props{};
        onrt_device_get_properties(0, &props);
        std::exit(ok && out[0] == 1 && out[3] == 4 && props.host_mapped == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ProtectedMemory, AccessOpensOnlyTheCallingThreadAndCloses) {
  EXPECT_EXIT(
      {
        volatile int* p = protected_buffer();
        const unsigned outer = onrt_device_access_begin();
        const unsigned inner = onrt_device_access_begin();  // nested: already open
        onrt_device_access_end(inner);
        const int seen = p[2];  // still open after the inner scope ended
        onrt_device_access_end(outer);
        std::exit(seen == 3 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_DEATH(
      {
        volatile int* p = protected_buffer();
        onrt_device_access_end(onrt_device_access_begin());
        fprintf(stderr, "read %d\n", p[0]);  // closed again
      },
      kMessage);
  // Another thread, started before: still closed while this one is open.
  // (A thread started inside runtime work inherits the access, as the
  // kernels' OpenMP teams need.)
  EXPECT_DEATH(
      {
        volatile int* p = protected_buffer();
        std::atomic<bool> go{false};
        std::thread other([p, &go] {
          while (!go.load()) std::this_thread::yield();
          fprintf(stderr, "read %d\n", p[0]);
        });
        const unsigned access = onrt_device_access_begin();
        go.store(true);
        other.join();
        onrt_device_access_end(access);
      },
      kMessage);
}

TEST(ProtectedMemoryConfig, WithoutProtectionKeysInitialisationSaysWhy) {
  if (have_protection_keys()) GTEST_SKIP() << "this machine has protection keys";
  EXPECT_EXIT(
      {
        setenv("OPENNEURON_PROTECT_MEMORY", "1", 1);
        const bool named = onrt_init() == ONRT_ERROR_INVALID_CONFIG &&
                           std::strstr(onrt_last_error(), "memory protection keys") != nullptr;
        std::exit(named ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
