// Failures of the shared-memory transport surface as CollectiveErrors on every
// rank instead of hangs: mismatched calls, a rank that exits or is killed, a
// timeout. Also point-to-point messages and the lifetime of the segments.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>

#include "shm_test_util.h"

namespace {

using namespace shm_test;
using Clock = std::chrono::steady_clock;

bool contains(const std::exception& e, const char* s) {
  if (std::strstr(e.what(), s) != nullptr) return true;
  std::fprintf(stderr, "[pid %d] message \"%s\" lacks \"%s\"\n", getpid(), e.what(), s);
  return false;
}

// Runs f, which must throw a CollectiveError whose message contains `needle`.
#define RANK_EXPECT_ERROR(stmt, needle)      \
  do {                                       \
    bool thrown = false;                     \
    try {                                    \
      stmt;                                  \
    } catch (const CollectiveError& e) {     \
      thrown = true;                         \
      RANK_CHECK(contains(e, needle));       \
    }                                        \
    RANK_CHECK(thrown);                      \
  } while (0)

TEST(ShmFailure, MismatchedKinds) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    std::vector<float> buf(1024, 1.f);
    comm->barrier();
    if (ctx.rank == 0) {
      RANK_EXPECT_ERROR(comm->all_reduce(buf.data(), 1024, DType::Float32, ReduceOp::Sum),
                        "all_reduce #2: rank 1 called all_gather #2 (4096 bytes) where rank 0 called "
                        "all_reduce (float32, 1024 elements, sum)");
    } else {
      std::vector<float> out(2048);
      void* outs[] = {out.data(), out.data() + 1024};
      RANK_EXPECT_ERROR(comm->all_gather(buf.data(), 4096, outs), "rank 0 called all_reduce #2");
    }
    // The communicator is dead from now on.
    RANK_EXPECT_ERROR(comm->barrier(), "aborted");
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), zeros(2));
}

TEST(ShmFailure, MismatchedCounts) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    const size_t count = ctx.rank == 2 ? 100 : 99;
    std::vector<int64_t> buf(count, 1);
    RANK_EXPECT_ERROR(comm->all_reduce(buf.data(), count, DType::Int64, ReduceOp::Sum),
                      ctx.rank == 2 ? "where rank 2 called all_reduce (int64, 100 elements, sum)"
                                    : "rank 2 called all_reduce #1 (int64, 100 elements, sum)");
    return 0;
  };
  EXPECT_EQ(run_ranks(3, body), zeros(3));
}

TEST(ShmFailure, MismatchedAllToAllSizes) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    std::vector<char> a(64), b(64);
    const void* in[] = {a.data(), a.data()};
    void* out[] = {b.data(), b.data()};
    size_t isz[2] = {8, 8}, osz[2] = {8, 8};
    if (ctx.rank == 1) osz[0] = 20;  // rank 0 sends 8
    RANK_EXPECT_ERROR(comm->all_to_all(in, isz, out, osz), "rank 0 sends 8 bytes to rank 1, which expects 20");
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), zeros(2));
}

// A rank that exits (or is killed) between collectives: the others fail fast
// with its rank and pid instead of waiting for the 30-minute timeout.
void dead_rank_test(bool kill_it) {
  auto body = [kill_it](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    std::vector<float> buf(4096, 1.f);
    comm->all_reduce(buf.data(), buf.size(), DType::Float32, ReduceOp::Sum);
    if (ctx.rank == 2) {
      if (kill_it) raise(SIGKILL);
      _exit(0);
    }
    const auto t0 = Clock::now();
    RANK_EXPECT_ERROR(comm->all_reduce(buf.data(), buf.size(), DType::Float32, ReduceOp::Sum), "rank 2 (pid ");
    RANK_CHECK(Clock::now() - t0 < std::chrono::seconds(2));
    return 0;
  };
  ShmOptions o;
  o.timeout = std::chrono::seconds(60);
  o.chunk_bytes = 4096;
  const auto codes = run_ranks(3, body, o);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], kill_it ? 128 + SIGKILL : 0);
}

TEST(ShmFailure, RankExits) { dead_rank_test(false); }
TEST(ShmFailure, RankKilled) { dead_rank_test(true); }

TEST(ShmFailure, Timeout) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    if (ctx.rank == 0) {
      const auto t0 = Clock::now();
      RANK_EXPECT_ERROR(comm->barrier(), "barrier #1: timed out after 0.3 s waiting for rank(s) 1");
      RANK_CHECK(Clock::now() - t0 < std::chrono::milliseconds(900));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      RANK_EXPECT_ERROR(comm->barrier(), "rank 0 aborted: barrier #1: timed out");
    }
    return 0;
  };
  ShmOptions o;
  o.timeout = std::chrono::milliseconds(300);
  EXPECT_EQ(run_ranks(2, body, o), zeros(2));
}

std::vector<uint8_t> msg(int from, int k, size_t bytes) {
  std::vector<uint8_t> b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(from * 17 + k * 5 + i * 3 + (i >> 10));
  return b;
}

TEST(ShmP2P, BothSendFirst) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    const int peer = 1 - ctx.rank;
    // Both send before receiving: fits in the ring, so neither blocks.
    for (int k = 0; k < 3; ++k) {
      const auto m = msg(ctx.rank, k, 100 + k);
      comm->send(m.data(), m.size(), peer, k);
    }
    comm->send(nullptr, 0, peer, 9);
    for (int k = 0; k < 3; ++k) {
      std::vector<uint8_t> got(100 + k);
      comm->recv(got.data(), got.size(), peer, k);
      RANK_CHECK(got == msg(peer, k, 100 + k));
    }
    comm->recv(nullptr, 0, peer, 9);
    return 0;
  };
  ShmOptions o;
  o.ring_bytes = 4096;
  EXPECT_EQ(run_ranks(2, body, o), zeros(2));
}

// Messages far larger than the ring, both directions at once on their own
// threads, while the main threads run collectives.
TEST(ShmP2P, LargeConcurrentWithCollectives) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    const int n = ctx.size, r = ctx.rank;
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    std::atomic<bool> ok{true};
    std::thread sender([&] {
      try {
        for (int k = 0; k < 4; ++k) {
          const auto m = msg(r, k, (size_t{1} << 20) + k * 77);
          comm->send(m.data(), m.size(), to, k);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "send: %s\n", e.what());
        ok = false;
      }
    });
    std::thread receiver([&] {
      try {
        for (int k = 0; k < 4; ++k) {
          std::vector<uint8_t> got((size_t{1} << 20) + k * 77);
          comm->recv(got.data(), got.size(), from, k);
          if (got != msg(from, k, got.size())) ok = false;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "recv: %s\n", e.what());
        ok = false;
      }
    });
    for (int i = 0; i < 50; ++i) {
      std::vector<int32_t> v(3000, r + i);
      comm->all_reduce(v.data(), v.size(), DType::Int32, ReduceOp::Sum);
      RANK_CHECK(v[2999] == n * i + n * (n - 1) / 2);
    }
    sender.join();
    receiver.join();
    RANK_CHECK(ok);
    return 0;
  };
  ShmOptions o;
  o.ring_bytes = 4096;
  o.chunk_bytes = 4096;
  EXPECT_EQ(run_ranks(3, body, o), zeros(3));
}

TEST(ShmP2P, TagMismatch) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    std::vector<char> b(100);
    if (ctx.rank == 0) {
      comm->send(b.data(), 100, 1, 1);
      RANK_EXPECT_ERROR(comm->barrier(), "rank 1 aborted: recv from rank 0 (tag 2): expected 100 bytes");
    } else {
      RANK_EXPECT_ERROR(comm->recv(b.data(), 100, 0, 2), "rank 0 sent 100 bytes with tag 1");
    }
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), zeros(2));
}

TEST(ShmSegments, RemoveStale) {
  const std::string key = "openneuron-";
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string name = "/openneuron-" + std::to_string(getpid()) + "-00000000deadbeef-0";
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    _exit(fd >= 0 && ftruncate(fd, 4096) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(shm_entries_of(pid).size(), 1u);
  // A live process's segment stays.
  const std::string live = "/openneuron-" + std::to_string(getpid()) + "-00000000deadbeef-1";
  const int fd = shm_open(live.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_GE(remove_stale_segments(), 1);
  EXPECT_TRUE(shm_entries_of(pid).empty());
  EXPECT_EQ(shm_entries_of(getpid()).size(), 1u);
  shm_unlink(live.c_str());
}

TEST(ShmSegments, SingleRank) {
  auto body = [](RankContext& ctx) {
    auto comm = ShmCommunicator::create(ctx.rdv, ctx.options);
    RANK_CHECK(comm->linked_segments().empty());
    RANK_CHECK(shm_entries_of(getpid()).empty());
    std::vector<float> v(100, 2.f);
    comm->all_reduce(v.data(), v.size(), DType::Float32, ReduceOp::Sum);
    RANK_CHECK(v[99] == 2.f);
    comm->barrier();
    return 0;
  };
  EXPECT_EQ(run_ranks(1, body), zeros(1));
}

}  // namespace
