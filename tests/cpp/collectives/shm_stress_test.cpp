// Stress test of the shared-memory transport: forked ranks run a long random
// sequence of collectives (the same sequence on every rank: one seed) with
// random sizes, dtypes and roots over small staging buffers, while each rank's
// own threads send and receive random-size messages around the ring. Every
// result is compared with its exact expected value. Ranks agree on when to
// stop (an all_reduce of "past the time cap" every round), so a slow build runs
// fewer rounds instead of timing out.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../stress_util.h"
#include "shm_test_util.h"

namespace {

using namespace shm_test;
using Bytes = std::vector<uint8_t>;

Bytes fill(int who, uint64_t salt, size_t bytes) {
  Bytes b(bytes + 1);
  uint32_t x = static_cast<uint32_t>(who * 7919 + salt * 104729 + 1);
  for (size_t i = 0; i < bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<uint8_t>(x >> 24);
  }
  return b;
}

size_t random_bytes(std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return rng() % 16;
    case 1:
      return rng() % 5000;
    default:
      return rng() % 70000;  // many rounds of 4 KiB staging
  }
}

// Failed checks in a rank: where, with the seed, then the rank's exit status.
#define STRESS_CHECK(cond, round)                                                         \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "[rank %d] round %d: %s:%d: check failed: %s; %s\n", r, round, \
                   __FILE__, __LINE__, #cond, ontest::stress::seed_note().c_str());       \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int rank_body(RankContext& ctx) {
  constexpr int kRounds = 400, kMessages = 60;
  auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
  const int n = ctx.size, r = ctx.rank;
  const uint64_t seed = ontest::stress::seed();
  ontest::stress::Deadline deadline;

  // Point to point on their own threads: rank r sends kMessages to r + 1 and
  // receives as many from r - 1; sizes come from the sender's seed.
  std::atomic<int> p2p_errors{0};
  auto sizes_of = [&](int sender) {
    std::mt19937 rng(static_cast<uint32_t>(seed) + 1000 + sender);
    std::vector<size_t> s(kMessages);
    for (auto& b : s) b = random_bytes(rng);
    return s;
  };
  std::thread sender([&] {
    try {
      const auto sizes = sizes_of(r);
      for (int k = 0; k < kMessages; ++k) {
        const Bytes m = fill(r, 5000 + k, sizes[k]);
        comm->send(m.data(), sizes[k], (r + 1) % n, k % 3);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] send: %s\n", r, e.what());
      p2p_errors.fetch_add(1);
    }
  });
  std::thread receiver([&] {
    try {
      const int from = (r + n - 1) % n;
      const auto sizes = sizes_of(from);
      for (int k = 0; k < kMessages; ++k) {
        Bytes got(sizes[k] + 1);
        comm->recv(got.data(), sizes[k], from, k % 3);
        if (std::memcmp(got.data(), fill(from, 5000 + k, sizes[k]).data(), sizes[k]) != 0) {
          std::fprintf(stderr, "[rank %d] message %d from %d corrupted\n", r, k, from);
          p2p_errors.fetch_add(1);
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] recv: %s\n", r, e.what());
      p2p_errors.fetch_add(1);
    }
  });

  std::mt19937 rng(static_cast<uint32_t>(seed));  // the same on every rank
  int rounds = 0;
  for (int it = 0; it < kRounds; ++it) {
    int32_t stop = deadline.passed() ? 1 : 0;
    comm->all_reduce(&stop, 1, DType::Int32, ReduceOp::Max);
    if (stop) break;
    ++rounds;
    const size_t bytes = random_bytes(rng);
    const int root = static_cast<int>(rng() % n);
    switch (rng() % 6) {
      case 0: {  // all_reduce, Int32 sum
        const size_t count = bytes / 4;
        std::vector<int32_t> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = (r + 1) * static_cast<int32_t>(i % 17) + it;
        comm->all_reduce(v.data(), count, DType::Int32, ReduceOp::Sum);
        for (size_t i = 0; i < count; ++i)
          STRESS_CHECK(v[i] == static_cast<int32_t>(i % 17) * n * (n + 1) / 2 + n * it, it);
        break;
      }
      case 1: {  // all_reduce, Float32 max / min
        const size_t count = bytes / 4;
        const bool max = rng() % 2 == 0;
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(((r + i) % n) * 0.5);
        comm->all_reduce(v.data(), count, DType::Float32, max ? ReduceOp::Max : ReduceOp::Min);
        for (size_t i = 0; i < count; ++i)
          STRESS_CHECK(v[i] == (max ? static_cast<float>((n - 1) * 0.5) : 0.0f), it);
        break;
      }
      case 2: {  // broadcast
        Bytes b = r == root ? fill(root, it, bytes) : Bytes(bytes + 1);
        comm->broadcast(b.data(), bytes, root);
        STRESS_CHECK(std::memcmp(b.data(), fill(root, it, bytes).data(), bytes) == 0, it);
        break;
      }
      case 3: {  // all_gather
        const Bytes in = fill(r, it, bytes);
        std::vector<Bytes> outs(n, Bytes(bytes + 1));
        std::vector<void*> ptrs;
        for (auto& o : outs) ptrs.push_back(o.data());
        comm->all_gather(in.data(), bytes, ptrs.data());
        for (int q = 0; q < n; ++q)
          STRESS_CHECK(std::memcmp(outs[q].data(), fill(q, it, bytes).data(), bytes) == 0, it);
        break;
      }
      case 4: {  // reduce_scatter, Int64 sum: block q of rank s holds s * 1000 + q + i % 11
        const size_t count = bytes / 8;
        std::vector<std::vector<int64_t>> in(n, std::vector<int64_t>(count + 1));
        std::vector<const void*> ptrs;
        for (int q = 0; q < n; ++q) {
          for (size_t i = 0; i < count; ++i) in[q][i] = r * 1000 + q + static_cast<int64_t>(i % 11);
          ptrs.push_back(in[q].data());
        }
        std::vector<int64_t> out(count + 1);
        comm->reduce_scatter(ptrs.data(), out.data(), count, DType::Int64, ReduceOp::Sum);
        for (size_t i = 0; i < count; ++i)
          STRESS_CHECK(out[i] == 1000 * n * (n - 1) / 2 + n * (r + static_cast<int64_t>(i % 11)),
                       it);
        break;
      }
      default: {  // uneven all_to_all: rank s sends size(s, q) bytes to q
        auto size_of = [&](int s, int q) { return (bytes * (s + 1) + q * 977) % 30000; };
        std::vector<Bytes> ins, outs;
        std::vector<const void*> iptrs;
        std::vector<void*> optrs;
        std::vector<size_t> isz, osz;
        for (int q = 0; q < n; ++q) {
          ins.push_back(fill(r * 16 + q, it, size_of(r, q)));
          outs.push_back(Bytes(size_of(q, r) + 1));
          isz.push_back(size_of(r, q));
          osz.push_back(size_of(q, r));
        }
        for (int q = 0; q < n; ++q) {
          iptrs.push_back(ins[q].data());
          optrs.push_back(outs[q].data());
        }
        comm->all_to_all(iptrs.data(), isz.data(), optrs.data(), osz.data());
        for (int q = 0; q < n; ++q)
          STRESS_CHECK(
              std::memcmp(outs[q].data(), fill(q * 16 + r, it, osz[q]).data(), osz[q]) == 0, it);
        break;
      }
    }
    if (rng() % 16 == 0) comm->barrier();
  }
  sender.join();
  receiver.join();
  STRESS_CHECK(p2p_errors.load() == 0, rounds);
  STRESS_CHECK(rounds > 0, rounds);
  comm->barrier();
  return 0;
}

TEST(ShmStress, RandomCollectivesWithConcurrentPointToPoint) {
  for (int ranks : {2, 3}) {
    ShmOptions o;
    o.chunk_bytes = 4096;
    o.ring_bytes = 4096;
    EXPECT_EQ(run_ranks(ranks, rank_body, o, std::chrono::seconds(120)), zeros(ranks))
        << ranks << " ranks; " << ontest::stress::seed_note();
  }
}

}  // namespace
