// Stress test of copies and the DMA helpers (csrc/runtime/dma.cpp): several
// threads move position-dependent data host -> device -> device -> host across
// streams ordered only by events, with sizes on both sides of the split
// threshold (so large copies contend for the helpers and fall back to the
// calling thread), overlapping device-to-device moves, and blocking copies that
// run inline on the caller. Every byte that comes back is compared with what
// went in; the copy counter must match the copies issued.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../../../csrc/runtime/dma.h"
#include "../stress_util.h"
#include "openneuron/runtime.h"

namespace {

using ontest::stress::Deadline;
using ontest::stress::Failures;

constexpr size_t kMiB = 1 << 20;
constexpr size_t kMaxBytes = 9 * kMiB + 12345;  // beyond the 4 MiB split, not slice aligned

// Bytes that differ with their position: a slice copied to the wrong offset shows.
std::vector<unsigned char> pattern(size_t n, uint32_t seed) {
  std::vector<unsigned char> p(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<unsigned char>(x >> 24);
  }
  return p;
}

size_t random_size(std::mt19937& rng, int iteration) {
  switch (iteration == 0 ? 3 : rng() % 4) {  // the first is split over the helpers
    case 0:
      return 1 + rng() % 4096;
    case 1:
      return 1 + rng() % (4 * kMiB);
    default:
      return 4 * kMiB + rng() % (kMaxBytes - 4 * kMiB + 1);  // split over the helpers
  }
}

TEST(DmaStress, EventOrderedCopiesAcrossStreams) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  constexpr int kThreads = 4, kStreams = 4, kIters = 200;
  std::vector<onrt_stream_t> streams(kStreams);
  for (auto& s : streams) ASSERT_EQ(onrt_stream_create(0, 0, &s), ONRT_OK);
  onrt_counters counters_before{};
  ASSERT_EQ(onrt_get_counters(&counters_before), ONRT_OK);
  Failures failures;
  Deadline deadline;
  std::atomic<int64_t> copies{0}, iterations{0}, large{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(ontest::stress::seed()) + t);
      // Sources are windows of a pattern twice the largest copy.
      const std::vector<unsigned char> src = pattern(2 * kMaxBytes, static_cast<uint32_t>(t));
      std::vector<unsigned char> back(kMaxBytes);
      void* a = nullptr;
      void* b = nullptr;
      if (onrt_malloc(0, kMaxBytes, streams[t % kStreams], &a) != ONRT_OK ||
          onrt_malloc(0, kMaxBytes, streams[t % kStreams], &b) != ONRT_OK) {
        failures.add("malloc: " + std::string(onrt_last_error()));
        return;
      }
      onrt_event_t ev[3];
      for (auto& e : ev) onrt_event_create(ONRT_EVENT_DEFAULT, &e);
      auto issue = [&](onrt_status st, const std::string& what, int it) {
        copies.fetch_add(1);
        if (st != ONRT_OK) {
          failures.add("thread " + std::to_string(t) + ", iteration " + std::to_string(it) + ", " +
                       what + ": " + onrt_last_error());
        }
      };
      for (int it = 0; it < kIters && !deadline.passed_after(it) && failures.count() == 0; ++it) {
        const size_t n = random_size(rng, it);
        if (n >= 4 * kMiB) large.fetch_add(1);
        const unsigned char* p = src.data() + rng() % (src.size() - n + 1);
        const int s1 = static_cast<int>(rng() % kStreams);
        const int s2 = static_cast<int>(rng() % kStreams);
        const int s3 = static_cast<int>(rng() % kStreams);
        issue(onrt_memcpy_async(a, p, n, ONRT_COPY_HOST_TO_DEVICE, streams[s1]), "H2D", it);
        onrt_event_record(ev[0], streams[s1]);
        onrt_stream_wait_event(streams[s2], ev[0]);
        issue(onrt_memcpy_async(b, a, n, ONRT_COPY_DEVICE_TO_DEVICE, streams[s2]), "D2D", it);
        // Sometimes an overlapping move inside b: b[d, n) <- b[0, n - d).
        const size_t d = rng() % 3 == 0 ? 1 + rng() % std::min<size_t>(n, 8192) : 0;
        if (d > 0 && d < n) {
          issue(onrt_memcpy_async(static_cast<char*>(b) + d, b, n - d, ONRT_COPY_DEVICE_TO_DEVICE,
                                  streams[s2]),
                "overlapping D2D", it);
        }
        onrt_event_record(ev[1], streams[s2]);
        onrt_stream_wait_event(streams[s3], ev[1]);
        std::memset(back.data(), 0, n);
        switch (rng() % 3) {
          case 0:  // blocking: may run inline on this thread
            issue(onrt_memcpy(back.data(), b, n, ONRT_COPY_DEVICE_TO_HOST, streams[s3]), "D2H", it);
            break;
          case 1:
            issue(onrt_memcpy_async(back.data(), b, n, ONRT_COPY_DEVICE_TO_HOST, streams[s3]),
                  "D2H async", it);
            onrt_event_record(ev[2], streams[s3]);
            if (onrt_event_synchronize(ev[2]) != ONRT_OK) failures.add("event_synchronize");
            break;
          default:
            issue(onrt_memcpy_async(back.data(), b, n, ONRT_COPY_DEVICE_TO_HOST, streams[s3]),
                  "D2H async", it);
            if (onrt_stream_synchronize(streams[s3]) != ONRT_OK) failures.add("synchronize");
            break;
        }
        // s3 has passed the chain's end; the next round's H2D into `a` must also
        // come after this round's D2D reading it, which only s2 orders.
        if (onrt_stream_synchronize(streams[s2]) != ONRT_OK) failures.add("synchronize s2");
        const bool ok = d > 0 && d < n ? std::memcmp(back.data(), p, d) == 0 &&
                                             std::memcmp(back.data() + d, p, n - d) == 0
                                       : std::memcmp(back.data(), p, n) == 0;
        if (!ok) {
          size_t first = 0;
          while (first < n &&
                 back[first] == (d > 0 && d < n && first >= d ? p[first - d] : p[first]))
            ++first;
          failures.add("thread " + std::to_string(t) + ", iteration " + std::to_string(it) + ": " +
                       std::to_string(n) + "-byte copy chain (shift " + std::to_string(d) +
                       ") differs from its source at byte " + std::to_string(first));
        }
        iterations.fetch_add(1);
      }
      for (auto& e : ev) onrt_event_destroy(e);
      for (auto& s : streams) onrt_stream_synchronize(s);
      onrt_free(a);
      onrt_free(b);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  EXPECT_GT(iterations.load(), kThreads) << ontest::stress::seed_note();
  EXPECT_GT(large.load(), 0) << ontest::stress::seed_note();
  onrt_counters counters_after{};
  ASSERT_EQ(onrt_get_counters(&counters_after), ONRT_OK);
  EXPECT_EQ(counters_after.copies - counters_before.copies, copies.load());
  for (auto s : streams) {
    EXPECT_EQ(onrt_stream_synchronize(s), ONRT_OK);
    EXPECT_EQ(onrt_stream_destroy(s), ONRT_OK);
  }
}

// The DMA queues themselves, called from many threads at once as the stream
// workers do: one split copy holds the helpers, the others copy alone.
TEST(DmaStress, ConcurrentSplitCopies) {
  constexpr int kThreads = 4, kIters = 60;
  Failures failures;
  Deadline deadline;
  std::atomic<int64_t> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(ontest::stress::seed()) + 100 + t);
      const std::vector<unsigned char> src = pattern(kMaxBytes, static_cast<uint32_t>(50 + t));
      std::vector<unsigned char> dst(kMaxBytes);
      const std::vector<unsigned char> zeros(kMaxBytes);
      for (int it = 0; it < kIters && !deadline.passed_after(it) && failures.count() == 0; ++it) {
        const size_t n = random_size(rng, it);
        const size_t off = rng() % (kMaxBytes - n + 1);
        std::memset(dst.data(), 0, kMaxBytes);
        openneuron::runtime::dma_copy(dst.data() + off, src.data() + off, n);
        if (std::memcmp(dst.data() + off, src.data() + off, n) != 0) {
          failures.add("thread " + std::to_string(t) + ", iteration " + std::to_string(it) +
                       ": dma_copy of " + std::to_string(n) + " bytes lost data");
        }
        if (std::memcmp(dst.data(), zeros.data(), off) != 0 ||
            std::memcmp(dst.data() + off + n, zeros.data(), kMaxBytes - off - n) != 0) {
          failures.add("thread " + std::to_string(t) + ": dma_copy wrote outside its range");
        }
        done.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  EXPECT_GT(done.load(), kThreads);
}

}  // namespace
