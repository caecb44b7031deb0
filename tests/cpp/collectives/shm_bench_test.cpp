// Bandwidth check of the shared-memory all_reduce (not a test): runs only with
// OPENNEURON_SHM_BENCH=1, e.g.
//   OPENNEURON_SHM_BENCH=1 collectives_tests --gtest_filter='ShmBench.*'
// Prints all_reduce bus bandwidth (bytes * 2 (n - 1) / n / time) on 2 ranks
// next to a single-thread memcpy measured in the same run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shm_test_util.h"

namespace {

using namespace shm_test;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(ShmBench, AllReduceBandwidth) {
  if (std::getenv("OPENNEURON_SHM_BENCH") == nullptr) GTEST_SKIP() << "set OPENNEURON_SHM_BENCH=1";
  const size_t big = size_t{32} << 20;
  {
    std::vector<char> a(big, 1), b(big, 2);
    double best = 1e9;
    for (int i = 0; i < 10; ++i) {
      const auto t0 = Clock::now();
      std::memcpy(b.data(), a.data(), big);
      best = std::min(best, seconds_since(t0));
    }
    std::printf("memcpy 32 MiB (1 thread): %.2f GB/s\n", big / best / 1e9);
  }
  const int n = std::getenv("OPENNEURON_SHM_BENCH_RANKS") ? std::atoi(std::getenv("OPENNEURON_SHM_BENCH_RANKS")) : 2;
  // As under torchrun: each rank's kernels get its share of the host cores.
  setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 0);
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    for (size_t bytes : {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{32} << 20}) {
      const size_t count = bytes / 4;
      std::vector<float> v(count, 0.f);  // sums stay 0: no overflow to inf over the iterations
      const int iters = static_cast<int>(std::max<size_t>(5, (size_t{64} << 20) / bytes));
      for (int i = 0; i < 3; ++i) comm->all_reduce(v.data(), count, DType::Float32, ReduceOp::Sum);
      // Best of 5: the host may be shared.
      double t = 1e9;
      for (int rep = 0; rep < 5; ++rep) {
        comm->barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) comm->all_reduce(v.data(), count, DType::Float32, ReduceOp::Sum);
        t = std::min(t, seconds_since(t0) / iters);
      }
      const double bus = bytes * 2.0 * (ctx.size - 1) / ctx.size / t;
      if (ctx.rank == 0) {
        std::printf("all_reduce %2d ranks %8zu KiB: %8.1f us  bus %.2f GB/s\n", ctx.size, bytes >> 10, t * 1e6,
                    bus / 1e9);
      }
    }
    return 0;
  };
  ShmOptions o;
  o.timeout = std::chrono::seconds(60);
  EXPECT_EQ(run_ranks(n, body, o, std::chrono::seconds(120)), zeros(n));
}

}  // namespace
