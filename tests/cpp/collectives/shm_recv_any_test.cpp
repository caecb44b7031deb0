// Receives from any rank (recv_any, behind torch.distributed.recv without src):
// the first message with the tag next in any peer's ring is taken, with its
// sender; messages with another tag stay for a later recv; a size that differs
// or a peer that is gone raises.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "shm_test_util.h"

namespace {

using namespace shm_test;

std::vector<int32_t> payload(int from, int k) {
  std::vector<int32_t> v(257);
  for (size_t i = 0; i < v.size(); ++i) v[i] = from * 100000 + k * 1000 + static_cast<int32_t>(i);
  return v;
}

TEST(ShmRecvAny, SourcesAndTags) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    const size_t bytes = payload(0, 0).size() * sizeof(int32_t);
    if (ctx.rank == 0) {
      // Ranks 1 and 2 both sent with tag 1: two receives get one each.
      bool seen[3] = {false, false, false};
      for (int i = 0; i < 2; ++i) {
        std::vector<int32_t> got(payload(0, 0).size());
        const int src = comm->recv_any(got.data(), bytes, 1);
        RANK_CHECK(src == 1 || src == 2);
        RANK_CHECK(!seen[src]);
        seen[src] = true;
        RANK_CHECK(got == payload(src, 1));
      }
      // Rank 2's next message has tag 7: a receive with tag 5 takes rank 1's.
      comm->barrier();
      std::vector<int32_t> got(payload(0, 0).size());
      RANK_CHECK(comm->recv_any(got.data(), bytes, 5) == 1);
      RANK_CHECK(got == payload(1, 5));
      comm->recv(got.data(), bytes, 2, 7);
      RANK_CHECK(got == payload(2, 7));
    } else {
      const auto first = payload(ctx.rank, 1);
      comm->send(first.data(), bytes, 0, 1);
      if (ctx.rank == 2) {
        const auto other = payload(2, 7);
        comm->send(other.data(), bytes, 0, 7);
      }
      comm->barrier();  // rank 2's tag-7 message is in the ring before rank 1's tag-5 one
      if (ctx.rank == 1) {
        const auto m = payload(1, 5);
        comm->send(m.data(), bytes, 0, 5);
      }
    }
    comm->barrier();
    return 0;
  };
  EXPECT_EQ(run_ranks(3, body), zeros(3));
}

// recv_any(tag 1) runs while another thread receives rank 2's messages, whose
// payloads read as tag-1 headers: it must never look at rank 2's ring between
// a header and its payload.
TEST(ShmRecvAny, ConcurrentWithRecvFromOnePeer) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    constexpr int kMessages = 200;
    std::vector<int64_t> ones(64, 1);
    const size_t bytes = ones.size() * sizeof(int64_t);
    if (ctx.rank == 0) {
      std::atomic<bool> ok{true};
      std::thread from2([&] {
        try {
          for (int k = 0; k < kMessages; ++k) {
            std::vector<int64_t> got(ones.size());
            comm->recv(got.data(), bytes, 2, 2);
            if (got != ones) ok = false;
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "recv: %s\n", e.what());
          ok = false;
        }
      });
      for (int k = 0; k < kMessages && ok; ++k) {
        std::vector<int64_t> got(ones.size());
        if (comm->recv_any(got.data(), bytes, 1) != 1 || got[0] != k) ok = false;
      }
      from2.join();
      RANK_CHECK(ok);
    } else {
      // Rank 1 sends later: recv_any polls rank 2's ring all along its stream.
      if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      for (int k = 0; k < kMessages; ++k) {
        std::vector<int64_t> m = ones;
        if (ctx.rank == 1) m[0] = k;
        comm->send(m.data(), bytes, 0, ctx.rank);
      }
    }
    comm->barrier();
    return 0;
  };
  ShmOptions o;
  o.ring_bytes = 4096;
  EXPECT_EQ(run_ranks(3, body, o), zeros(3));
}

TEST(ShmRecvAny, SizeMismatchAndExitedPeer) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    std::vector<char> b(64);
    if (ctx.rank == 1) {
      comm->send(b.data(), 8, 0, 3);
      comm->send(b.data(), 8, 0, 4);
      _exit(0);  // its messages stay readable
    }
    comm->recv(b.data(), 8, 1, 3);
    try {
      comm->recv_any(b.data(), 16, 4);
      RANK_CHECK(false);
    } catch (const CollectiveError& e) {
      RANK_CHECK(
          std::strstr(e.what(),
                      "recv from any rank (tag 4): expected 16 bytes, rank 1 sent 8 bytes") !=
          nullptr);
    }
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), zeros(2));

  // Nothing left and every peer gone: fails at once rather than at the timeout.
  auto gone = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    if (ctx.rank == 1) _exit(0);
    std::vector<char> b(8);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      comm->recv_any(b.data(), 8, 0);
      RANK_CHECK(false);
    } catch (const CollectiveError& e) {
      RANK_CHECK(std::strstr(e.what(), "recv from any rank (tag 0): rank 1 (pid ") != nullptr);
    }
    RANK_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    return 0;
  };
  ShmOptions o;
  o.timeout = std::chrono::seconds(60);
  EXPECT_EQ(run_ranks(2, gone, o), zeros(2));
}

}  // namespace
