// Programs: argument mapping, parameters, reference counting, validation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "openneuron/runtime.h"

namespace {

struct Scale {
  double factor;
  int64_t offset;
};

// out[0] = in[0] * factor + offset + extra, with out = args[0], in = args[1],
// extra = args[2].f.
int scale_kernel(const void* params, const onrt_arg* args, char*, size_t) {
  const auto* p = static_cast<const Scale*>(params);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(params) % 16, 0u);
  auto* out = static_cast<double*>(args[0].ptr);
  const auto* in = static_cast<const double*>(args[1].ptr);
  out[0] = in[0] * p->factor + static_cast<double>(p->offset) + args[2].f;
  return 0;
}

// Sums args[k].i for k < n (n in params) into the int64 at args[0].ptr.
int sum_kernel(const void* params, const onrt_arg* args, char*, size_t) {
  int32_t n;
  std::memcpy(&n, params, sizeof n);
  int64_t total = 0;
  for (int32_t k = 1; k < n; ++k) total += args[k].i;
  *static_cast<int64_t*>(args[0].ptr) = total;
  return 0;
}

class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
    ASSERT_EQ(onrt_stream_create(0, 0, &stream_), ONRT_OK);
  }
  void TearDown() override { EXPECT_EQ(onrt_stream_destroy(stream_), ONRT_OK); }

  template <typename T>
  T* upload(const T& value) {
    void* p = nullptr;
    EXPECT_EQ(onrt_malloc(0, sizeof(T), stream_, &p), ONRT_OK);
    EXPECT_EQ(onrt_memcpy(p, &value, sizeof(T), ONRT_COPY_HOST_TO_DEVICE, stream_), ONRT_OK);
    return static_cast<T*>(p);
  }
  template <typename T>
  T download(const T* p) {
    T v{};
    EXPECT_EQ(onrt_memcpy(&v, p, sizeof(T), ONRT_COPY_DEVICE_TO_HOST, stream_), ONRT_OK)
        << onrt_last_error();
    return v;
  }

  onrt_stream_t stream_ = nullptr;
};

TEST_F(ProgramTest, MapsSlotsAndCopiesParams) {
  onrt_program_t p;
  ASSERT_EQ(onrt_program_create("affine", &p), ONRT_OK);
  Scale params{2.0, 3};
  // Launch args: [0] = extra, [1] = input, [2] = output.
  const int32_t slots[] = {2, 1, 0};
  ASSERT_EQ(
      onrt_program_add_instruction(p, "scale", scale_kernel, &params, sizeof params, slots, 3),
      ONRT_OK);
  params.factor = 100.0;  // the program keeps its own copy
  EXPECT_EQ(onrt_program_num_instructions(p), 1);
  EXPECT_STREQ(onrt_program_name(p), "affine");

  double* in = upload(5.0);
  double* out = upload(0.0);
  onrt_arg args[3];
  args[0].f = 0.5;
  args[1].ptr = in;
  args[2].ptr = out;
  ASSERT_EQ(onrt_program_launch(stream_, p, args, 3), ONRT_OK);
  EXPECT_EQ(download(out), 5.0 * 2.0 + 3 + 0.5);
  EXPECT_EQ(onrt_program_release(p), ONRT_OK);
  EXPECT_EQ(onrt_free(in), ONRT_OK);
  EXPECT_EQ(onrt_free(out), ONRT_OK);
}

TEST_F(ProgramTest, InstructionsRunInOrderOverSharedBuffers) {
  // y = (x * 2 + 1) * 3 + 0 : two instructions chained through a temporary.
  onrt_program_t p;
  ASSERT_EQ(onrt_program_create("chain", &p), ONRT_OK);
  Scale first{2.0, 1}, second{3.0, 0};
  const int32_t s1[] = {1, 0, 3};  // tmp = x * 2 + 1 + zero
  const int32_t s2[] = {2, 1, 3};  // y = tmp * 3 + zero
  ASSERT_EQ(onrt_program_add_instruction(p, "first", scale_kernel, &first, sizeof first, s1, 3),
            ONRT_OK);
  ASSERT_EQ(onrt_program_add_instruction(p, "second", scale_kernel, &second, sizeof second, s2, 3),
            ONRT_OK);
  double* x = upload(4.0);
  double* tmp = upload(0.0);
  double* y = upload(0.0);
  onrt_arg args[4];
  args[0].ptr = x;
  args[1].ptr = tmp;
  args[2].ptr = y;
  args[3].f = 0.0;
  ASSERT_EQ(onrt_program_launch(stream_, p, args, 4), ONRT_OK);
  EXPECT_EQ(download(y), (4.0 * 2 + 1) * 3);
  onrt_program_release(p);
  for (void* b : {static_cast<void*>(x), static_cast<void*>(tmp), static_cast<void*>(y)}) {
    EXPECT_EQ(onrt_free(b), ONRT_OK);
  }
}

TEST_F(ProgramTest, ManyArgumentsAndSlots) {
  // 40 launch args (beyond the inline buffer) and 40 slots (beyond the stack array).
  constexpr int32_t kN = 40;
  onrt_program_t p;
  ASSERT_EQ(onrt_program_create("wide", &p), ONRT_OK);
  std::vector<int32_t> slots(kN);
  slots[0] = 0;
  for (int32_t k = 1; k < kN; ++k) slots[k] = kN - k;  // reversed: not the identity
  ASSERT_EQ(onrt_program_add_instruction(p, "sum", sum_kernel, &kN, sizeof kN, slots.data(), kN),
            ONRT_OK);
  int64_t* out = upload(int64_t{0});
  std::vector<onrt_arg> args(kN);
  args[0].ptr = out;
  int64_t expected = 0;
  for (int32_t k = 1; k < kN; ++k) {
    args[k].i = k * k;
    expected += k * k;
  }
  ASSERT_EQ(onrt_program_launch(stream_, p, args.data(), kN), ONRT_OK);
  args.assign(kN, onrt_arg{});  // launch copied them
  EXPECT_EQ(download(out), expected);
  onrt_program_release(p);
  EXPECT_EQ(onrt_free(out), ONRT_OK);
}

TEST_F(ProgramTest, QueuedLaunchKeepsTheProgramAlive) {
  std::atomic<bool> open{false};
  auto gate = [](void* self, char*, size_t) -> int {
    auto* o = static_cast<std::atomic<bool>*>(self);
    while (!o->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    return 0;
  };
  double* v = upload(0.0);
  ASSERT_EQ(onrt_launch_host_fn(stream_, "gate", gate, &open), ONRT_OK);
  onrt_program_t p;
  ASSERT_EQ(onrt_program_create("ephemeral", &p), ONRT_OK);
  Scale params{1.0, 41};
  const int32_t slots[] = {0, 0, 1};
  ASSERT_EQ(onrt_program_add_instruction(p, "inc", scale_kernel, &params, sizeof params, slots, 3),
            ONRT_OK);
  onrt_arg args[2];
  args[0].ptr = v;
  args[1].f = 1.0;
  ASSERT_EQ(onrt_program_retain(p), ONRT_OK);
  ASSERT_EQ(onrt_program_launch(stream_, p, args, 2), ONRT_OK);
  EXPECT_EQ(onrt_program_release(p), ONRT_OK);
  EXPECT_EQ(onrt_program_release(p), ONRT_OK);  // only the queued launch holds it now
  open = true;
  EXPECT_EQ(download(v), 42.0);
  EXPECT_EQ(onrt_free(v), ONRT_OK);
}

TEST_F(ProgramTest, Validation) {
  onrt_program_t p;
  ASSERT_EQ(onrt_program_create("checked", &p), ONRT_OK);
  const int32_t negative[] = {0, -1};
  EXPECT_EQ(onrt_program_add_instruction(p, "neg", sum_kernel, nullptr, 0, negative, 2),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(onrt_last_error()).find("checked"), std::string::npos);
  EXPECT_NE(std::string(onrt_last_error()).find("neg"), std::string::npos);
  EXPECT_EQ(onrt_program_add_instruction(p, "nofn", nullptr, nullptr, 0, nullptr, 0),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_program_num_instructions(p), 0);

  const int32_t slots[] = {0, 4};
  int32_t n = 2;
  ASSERT_EQ(onrt_program_add_instruction(p, "uses_slot_4", sum_kernel, &n, sizeof n, slots, 2),
            ONRT_OK);
  onrt_arg args[5] = {};
  int64_t* out = upload(int64_t{0});
  args[0].ptr = out;
  EXPECT_EQ(onrt_program_launch(stream_, p, args, 3), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(onrt_last_error(),
               "program 'checked', instruction 'uses_slot_4': argument 1 uses launch slot 4 but "
               "only 3 arguments were passed");
  EXPECT_EQ(onrt_program_launch(stream_, p, nullptr, 5), ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_program_launch(stream_, nullptr, args, 5), ONRT_ERROR_INVALID_HANDLE);
  args[4].i = 9;
  ASSERT_EQ(onrt_program_launch(stream_, p, args, 5), ONRT_OK);
  EXPECT_EQ(download(out), 9);
  // Launched programs are frozen.
  EXPECT_EQ(onrt_program_add_instruction(p, "late", sum_kernel, &n, sizeof n, slots, 2),
            ONRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onrt_program_num_instructions(p), 1);
  onrt_program_release(p);
  EXPECT_EQ(onrt_free(out), ONRT_OK);
}

}  // namespace
