// all_reduce in place on the peers' device memory (openneuron/ipc.h): forked
// ranks allocate their buffers on a virtual core whose memory is shareable and
// check the result against the reduction computed locally from every rank's
// input; a rank whose buffer is in private memory sends the group through the
// staged algorithm instead, and with sharing off no rank maps any peer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "openneuron/ipc.h"
#include "openneuron/runtime.h"
#include "shm_test_util.h"

namespace {

using namespace shm_test;

// Rank r's input: small integers, so float sums are exact in any order.
float input(int r, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + r * 13) % 11) - 5);
}

// Runs one all_reduce of `count` floats on every rank; `in_device` says per
// rank whether its buffer is device memory (else plain host memory).
int reduce_and_check(RankContext& ctx, size_t count, const std::vector<bool>& in_device,
                     bool expect_in_place) {
  ctx.options.device = 0;
  auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
  RANK_CHECK(comm->peer_memory());
  float* data = nullptr;
  std::vector<float> host;
  if (in_device[ctx.rank]) {
    void* p = nullptr;
    RANK_CHECK(onrt_malloc(0, count * sizeof(float), nullptr, &p) == ONRT_OK);
    data = static_cast<float*>(p);
  } else {
    host.resize(count);
    data = host.data();
  }
  for (size_t i = 0; i < count; ++i) data[i] = input(ctx.rank, i);
  comm->all_reduce(data, count, DType::Float32, ReduceOp::Sum);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < ctx.size; ++r) want += input(r, i);
    if (data[i] != want) {
      std::fprintf(stderr, "[rank %d] element %zu: %g, expected %g\n", ctx.rank, i, data[i], want);
      return 1;
    }
  }
  RANK_CHECK(comm->in_place_calls() == (expect_in_place ? 1u : 0u));
  if (in_device[ctx.rank]) RANK_CHECK(onrt_free(data) == ONRT_OK);
  return 0;
}

class SharedMemoryOn : public ::testing::Test {
 protected:
  void SetUp() override { setenv("OPENNEURON_SHAREABLE_MEMORY", "on", 1); }
  void TearDown() override { unsetenv("OPENNEURON_SHAREABLE_MEMORY"); }
};
class PeerMemory : public SharedMemoryOn, public ::testing::WithParamInterface<int> {};

TEST_P(PeerMemory, AllReduceInPlace) {
  const int n = GetParam();
  // An odd count: the last rank's slice is short.
  for (size_t count : {size_t{20'000}, size_t{250'001}}) {
    auto codes = run_ranks(n, [&](RankContext& ctx) {
      return reduce_and_check(ctx, count, std::vector<bool>(n, true), true);
    });
    EXPECT_EQ(codes, zeros(n)) << count;
  }
}

TEST_P(PeerMemory, OneRankInPrivateMemoryStagesTheCall) {
  const int n = GetParam();
  std::vector<bool> in_device(n, true);
  in_device[n - 1] = false;
  auto codes = run_ranks(
      n, [&](RankContext& ctx) { return reduce_and_check(ctx, 100'003, in_device, false); });
  EXPECT_EQ(codes, zeros(n));
}

INSTANTIATE_TEST_SUITE_P(Ranks, PeerMemory, ::testing::Values(2, 3));

// Rank 0 gives up waiting for rank 1 inside an in-place all_reduce: its buffer
// may still be written by a peer, so the caller must not reuse it. A staged
// call that fails the same way leaves no such doubt.
TEST_F(SharedMemoryOn, AGiveUpInPlaceKeepsTheBuffer) {
  for (bool in_device : {true, false}) {
    auto codes = run_ranks(2, [&](RankContext& ctx) {
      ctx.options.device = 0;
      if (ctx.rank == 0) ctx.options.timeout = std::chrono::milliseconds(200);
      auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
      const size_t count = 100'000;
      std::vector<float> host(count, 1.f);
      void* data = host.data();
      if (in_device) RANK_CHECK(onrt_malloc(0, count * sizeof(float), nullptr, &data) == ONRT_OK);
      if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
      try {
        comm->all_reduce(data, count, DType::Float32, ReduceOp::Sum);
      } catch (const CollectiveError&) {
        if (ctx.rank == 0) RANK_CHECK(comm->buffer_may_still_be_written() == in_device);
        return 0;
      }
      return 1;  // both ranks must fail: 0 on its timeout, 1 on 0's abort
    });
    EXPECT_EQ(codes, zeros(2)) << (in_device ? "device memory" : "host memory");
  }
}

TEST(PeerMemoryOff, NoRankMapsAPeer) {
  setenv("OPENNEURON_SHAREABLE_MEMORY", "off", 1);
  auto codes = run_ranks(2, [](RankContext& ctx) {
    ctx.options.device = 0;
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    RANK_CHECK(!comm->peer_memory());
    onrt_ipc_handle h{};
    RANK_CHECK(onrt_ipc_range_handle(0, &h) == ONRT_ERROR_UNSUPPORTED);
    return 0;
  });
  unsetenv("OPENNEURON_SHAREABLE_MEMORY");
  EXPECT_EQ(codes, zeros(2));
}

}  // namespace
