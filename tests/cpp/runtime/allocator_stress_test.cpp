// Stress test of the caching allocator: many threads allocate and free blocks
// of random sizes on several streams, use blocks on other streams
// (record_stream, ordered by events) right up to their free, and flush the cache
// and read statistics meanwhile. Every block is filled with its owner's tag by
// work on its stream and checked by work on every stream that uses it: a block
// handed out again before the streams using it passed the free would show
// another owner's tag (and, under TSan, a race between two workers). At the end
// every statistic of live memory is back where it started.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../../../csrc/runtime/allocator.h"
#include "../../../csrc/runtime/stream.h"
#include "../stress_util.h"
#include "openneuron/runtime.h"

namespace openneuron::runtime {
namespace {

using ontest::stress::Deadline;
using ontest::stress::Failures;

constexpr size_t kKiB = 1 << 10, kMiB = 1 << 20;

// Either the device's allocator through the public API, or a private one with
// a small capacity (out-of-memory retries, waits for streams before unmapping).
struct Target {
  CachingAllocator* own = nullptr;  // null: device 0 through onrt_*
  onrt_status malloc(size_t bytes, onrt_stream_t s, void** p) {
    return own ? own->malloc(bytes, to_stream(s), p) : onrt_malloc(0, bytes, s, p);
  }
  onrt_status free(void* p) { return own ? own->free(p) : onrt_free(p); }
  onrt_status record(void* p, onrt_stream_t s) {
    return own ? own->record_stream(p, to_stream(s)) : onrt_record_stream(p, s);
  }
  void empty_cache() {
    if (own) {
      own->empty_cache();
    } else {
      onrt_empty_cache(0);
    }
  }
  onrt_memory_stats stats() {
    if (own) return own->stats();
    onrt_memory_stats s{};
    onrt_memory_get_stats(0, &s);
    return s;
  }
};

// Work queued on streams: fill a block with a tag, or check that it still holds it.
struct BlockWork {
  char* p;
  size_t bytes;
  unsigned char tag;
  bool fill;
  int pause_us;
  Failures* failures;
  std::atomic<int64_t>* ran;
  std::string where;
  static int run(void* self, char*, size_t) {
    std::unique_ptr<BlockWork> w(static_cast<BlockWork*>(self));
    if (w->fill) {
      std::memset(w->p, w->tag, w->bytes);
    } else {
      if (w->pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(w->pause_us));
      // The first 64 bytes, then one byte in every 4093, then the last.
      for (size_t off = 0; off < w->bytes; off += off < 64 ? 1 : 4093) {
        if (static_cast<unsigned char>(w->p[off]) != w->tag) {
          w->failures->add(w->where + ": byte " + std::to_string(off) + " of a " +
                           std::to_string(w->bytes) + "-byte block holds " +
                           std::to_string(static_cast<unsigned char>(w->p[off])) +
                           " instead of its owner's tag " + std::to_string(w->tag) +
                           " (reused while still in use?)");
          break;
        }
      }
      if (static_cast<unsigned char>(w->p[w->bytes - 1]) != w->tag) {
        w->failures->add(w->where + ": last byte overwritten");
      }
    }
    w->ran->fetch_add(1);
    return 0;
  }
};

struct Live {
  char* p;
  size_t bytes;
  int stream;
  unsigned char tag;
};

// Runs the mixed workload; `max_bytes` bounds one request. Returns the number
// of out-of-memory failures (allowed only when `allow_oom`).
int64_t run_workload(Target target, size_t max_bytes, bool allow_oom, const char* name) {
  constexpr int kThreads = 6, kStreams = 4, kIters = 1500, kMaxLive = 8;
  std::vector<onrt_stream_t> streams(kStreams);
  for (auto& s : streams) EXPECT_EQ(onrt_stream_create(0, 0, &s), ONRT_OK) << onrt_last_error();
  target.empty_cache();
  const onrt_memory_stats before = target.stats();
  Failures failures;
  Deadline deadline;
  std::atomic<int64_t> launched{0}, ran{0}, ooms{0}, allocs{0}, frees{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(ontest::stress::seed()) + t);
      onrt_event_t ev;
      onrt_event_create(ONRT_EVENT_DEFAULT, &ev);
      std::vector<Live> live;
      auto where = [&](int it, const char* what) {
        return std::string(name) + ", thread " + std::to_string(t) + ", iteration " +
               std::to_string(it) + ", " + what;
      };
      auto queue = [&](int s, BlockWork* w) {
        launched.fetch_add(1);
        if (onrt_launch_host_fn(streams[s], w->fill ? "fill" : "check", BlockWork::run, w) !=
            ONRT_OK) {
          failures.add(w->where + ": launch failed: " + onrt_last_error());
          launched.fetch_sub(1);
          delete w;
        }
      };
      auto release = [&](size_t k, int it) {
        Live b = live[k];
        live[k] = live.back();
        live.pop_back();
        queue(b.stream, new BlockWork{b.p, b.bytes, b.tag, false, 0, &failures, &ran,
                                      where(it, "check before free")});
        if (rng() % 2 == 0) {
          // Used on another stream after the fill, then freed at once: the
          // block must not be handed out before that stream passes the check.
          const int o = (b.stream + 1 + static_cast<int>(rng() % (kStreams - 1))) % kStreams;
          onrt_event_record(ev, streams[b.stream]);
          onrt_stream_wait_event(streams[o], ev);
          queue(o, new BlockWork{b.p, b.bytes, b.tag, false, static_cast<int>(rng() % 300),
                                 &failures, &ran, where(it, "check on another stream")});
          if (target.record(b.p, streams[o]) != ONRT_OK) {
            failures.add(where(it, "record_stream: ") + onrt_last_error());
          }
        }
        if (target.free(b.p) != ONRT_OK) failures.add(where(it, "free: ") + onrt_last_error());
        frees.fetch_add(1);
      };
      for (int it = 0; it < kIters && !deadline.passed() && failures.count() == 0; ++it) {
        const int op = static_cast<int>(rng() % 100);
        if (op < 45 && static_cast<int>(live.size()) < kMaxLive) {
          const int kind = static_cast<int>(rng() % 20);
          const size_t bytes = kind < 14   ? 1 + rng() % (256 * kKiB)
                               : kind < 19 ? kMiB + rng() % (3 * kMiB)
                                           : 1 + rng() % max_bytes;
          const int s = static_cast<int>(rng() % kStreams);
          void* p = nullptr;
          const onrt_status st = target.malloc(bytes, streams[s], &p);
          if (st == ONRT_ERROR_OUT_OF_MEMORY && allow_oom) {
            ooms.fetch_add(1);
            continue;
          }
          if (st != ONRT_OK || p == nullptr) {
            failures.add(where(it, "malloc: ") + onrt_last_error());
            continue;
          }
          allocs.fetch_add(1);
          const auto tag = static_cast<unsigned char>(1 + (t * 37 + it) % 251);
          live.push_back(Live{static_cast<char*>(p), bytes, s, tag});
          queue(s, new BlockWork{static_cast<char*>(p), bytes, tag, true, 0, &failures, &ran,
                                 where(it, "fill")});
        } else if (op < 80 && !live.empty()) {
          release(rng() % live.size(), it);
        } else if (op < 88 && !live.empty()) {
          // A blocking copy back on the block's stream sees the fill.
          const Live& b = live[rng() % live.size()];
          unsigned char head[64];
          const size_t n = std::min(sizeof head, b.bytes);
          if (onrt_memcpy(head, b.p, n, ONRT_COPY_DEVICE_TO_HOST, streams[b.stream]) != ONRT_OK) {
            failures.add(where(it, "memcpy: ") + onrt_last_error());
          } else if (head[0] != b.tag || head[n - 1] != b.tag) {
            failures.add(where(it, "copy back did not see the block's own fill"));
          }
        } else if (op < 92) {
          target.empty_cache();
        } else if (op < 97) {
          const onrt_memory_stats s = target.stats();
          const auto& all = s.allocated_bytes[ONRT_POOL_ALL];
          if (all.current < 0 || s.reserved_bytes[ONRT_POOL_ALL].current < all.current ||
              all.peak < all.current) {
            failures.add(where(it, "inconsistent statistics"));
          }
        } else {
          onrt_stream_synchronize(streams[rng() % kStreams]);
        }
      }
      while (!live.empty()) release(live.size() - 1, kIters);
      onrt_event_destroy(ev);
    });
  }
  for (auto& th : threads) th.join();
  for (auto s : streams) EXPECT_EQ(onrt_stream_synchronize(s), ONRT_OK) << onrt_last_error();
  target.empty_cache();
  const onrt_memory_stats after = target.stats();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  EXPECT_EQ(ran.load(), launched.load()) << ontest::stress::seed_note();
  EXPECT_EQ(allocs.load(), frees.load());
  EXPECT_GT(allocs.load(), kThreads) << ontest::stress::seed_note();
  // Nothing leaked or left pending: live, active and requested bytes are back,
  // and with every stream idle the cache returned every segment it added.
  EXPECT_EQ(after.allocation[ONRT_POOL_ALL].current, before.allocation[ONRT_POOL_ALL].current);
  EXPECT_EQ(after.active[ONRT_POOL_ALL].current, before.active[ONRT_POOL_ALL].current);
  EXPECT_EQ(after.allocated_bytes[ONRT_POOL_ALL].current,
            before.allocated_bytes[ONRT_POOL_ALL].current);
  EXPECT_EQ(after.requested_bytes[ONRT_POOL_ALL].current,
            before.requested_bytes[ONRT_POOL_ALL].current);
  EXPECT_EQ(after.active_bytes[ONRT_POOL_ALL].current, before.active_bytes[ONRT_POOL_ALL].current);
  EXPECT_EQ(after.reserved_bytes[ONRT_POOL_ALL].current,
            before.reserved_bytes[ONRT_POOL_ALL].current);
  EXPECT_EQ(after.allocation[ONRT_POOL_ALL].allocated - before.allocation[ONRT_POOL_ALL].allocated,
            allocs.load());
  for (auto s : streams) EXPECT_EQ(onrt_stream_destroy(s), ONRT_OK);
  return ooms.load();
}

TEST(AllocatorStress, DeviceAllocatorManyThreadsAndStreams) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  const int64_t ooms = run_workload(Target{}, 12 * kMiB, false, "device allocator");
  EXPECT_EQ(ooms, 0);
}

// 48 MiB for six threads of up to eight blocks of up to 8 MiB: requests fail
// and retry after flushing the cache, which waits (unlocked) for the streams
// still using freed segments.
TEST(AllocatorStress, SmallCapacityFlushesAndWaitsUnderContention) {
  ASSERT_EQ(onrt_init(), ONRT_OK) << onrt_last_error();
  CachingAllocator allocator(0, 48 * kMiB);
  run_workload(Target{&allocator}, 8 * kMiB, true, "48 MiB allocator");
  const onrt_memory_stats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(s.allocation[ONRT_POOL_ALL].current, 0);
  EXPECT_EQ(s.inactive_split[ONRT_POOL_ALL].current, 0);
}

}  // namespace
}  // namespace openneuron::runtime
