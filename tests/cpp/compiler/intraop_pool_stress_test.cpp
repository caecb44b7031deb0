// Stress test of the intra-op pool (csrc/kernels/parallel.cpp): many threads
// submit parallel regions at once (the pool serves one, the others run inline),
// some regions nest, and another thread keeps changing the pool size. Checks
// that every index is covered exactly once, that chunk boundaries are the
// documented ones whoever runs them (reductions rely on it), that a region
// nested in a chunk a pool worker runs stays on that worker (a chunk of a region
// that found the pool busy runs on its caller outside any region, so its nested
// region may use the pool), and that the pool really ran regions on more than
// one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../../csrc/kernels/parallel.h"
#include "../stress_util.h"
#include "openneuron/kernels/kernels.h"

namespace {

using ontest::stress::Deadline;
using ontest::stress::Failures;
using openneuron::kernels::detail::parallel_for;
using openneuron::kernels::detail::run_chunks;

float value(int64_t i) { return static_cast<float>(i % 7) * 0.25f; }

// The chunk of [0, n) in `chunks` pieces that starts at b, or -1.
int64_t chunk_of(int64_t b, int64_t e, int64_t n, int64_t chunks) {
  const int64_t c = (b * chunks + n - 1) / n;
  return c < chunks && c * n / chunks == b && (c + 1) * n / chunks == e ? c : -1;
}

struct RestoreThreads {
  ~RestoreThreads() { openneuron::kernels::set_num_threads(0); }
};

TEST(IntraOpPoolStress, ManySubmittersNestedRegionsAndResizes) {
  constexpr int kThreads = 6, kIters = 1500;
  constexpr int64_t kMaxN = 40000;
  RestoreThreads restore;
  openneuron::kernels::set_num_threads(4);
  Failures failures;
  Deadline deadline;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> regions{0}, nested_regions{0};

  // Resizes the pool while regions run (torch.set_num_threads may do so).
  std::thread resizer([&] {
    std::mt19937 rng(static_cast<uint32_t>(ontest::stress::seed()) + 1000);
    const int sizes[] = {1, 2, 3, 4, 6};
    while (!stop.load()) {
      openneuron::kernels::set_num_threads(sizes[rng() % 5]);
      std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 800));
    }
  });

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(ontest::stress::seed()) + t);
      std::vector<uint32_t> hits(kMaxN);
      std::vector<float> partial;
      auto where = [&](int it, const std::string& what) {
        return "thread " + std::to_string(t) + ", iteration " + std::to_string(it) + ": " + what;
      };
      for (int it = 0; it < kIters && !deadline.passed() && failures.count() == 0; ++it) {
        const int64_t n = 1 + static_cast<int64_t>(rng() % (rng() % 4 == 0 ? 64 : kMaxN));
        std::fill(hits.begin(), hits.begin() + n, 0u);
        if (rng() % 2 == 0) {
          // parallel_for with a random grain and pieces; some chunks nest.
          const int64_t grains[] = {1, 16, 512, 4096, openneuron::kernels::detail::kGrain};
          const int64_t grain = grains[rng() % 5];
          const int pieces = 1 + static_cast<int>(rng() % 4);
          const bool nest = rng() % 3 == 0;
          std::atomic<int> bad_nested{0};
          const auto submitter = std::this_thread::get_id();
          parallel_for(
              n, grain,
              [&](int64_t b, int64_t e) {
                if (nest && e - b >= 64) {
                  const auto outer = std::this_thread::get_id();
                  const bool on_worker = outer != submitter;
                  std::atomic<int64_t> covered{0};
                  parallel_for(e - b, 1, [&](int64_t ib, int64_t ie) {
                    if (on_worker && std::this_thread::get_id() != outer) bad_nested.fetch_add(1);
                    for (int64_t i = b + ib; i < b + ie; ++i) ++hits[i];
                    covered.fetch_add(ie - ib, std::memory_order_relaxed);
                  });
                  if (covered != e - b) bad_nested.fetch_add(1);
                  nested_regions.fetch_add(1, std::memory_order_relaxed);
                } else {
                  for (int64_t i = b; i < e; ++i) ++hits[i];
                }
              },
              pieces);
          if (bad_nested.load() != 0) {
            failures.add(where(it, "a region nested on a pool worker left it, or lost work"));
          }
        } else {
          // run_chunks: fixed boundaries, a per-chunk partial sum combined in
          // chunk order must equal the serial result bit for bit.
          const int64_t chunks = 1 + static_cast<int64_t>(rng() % std::min<int64_t>(n, 64));
          partial.assign(chunks, -1.0f);
          std::atomic<int> bad_bounds{0};
          std::atomic<int64_t> calls{0};
          auto body = [&](int64_t b, int64_t e) {
            calls.fetch_add(1, std::memory_order_relaxed);
            const int64_t c = chunk_of(b, e, n, chunks);
            if (c < 0) {
              bad_bounds.fetch_add(1);
              return;
            }
            float s = 0;
            for (int64_t i = b; i < e; ++i) {
              ++hits[i];
              s += value(i);
            }
            partial[c] = s;
          };
          run_chunks(n, chunks, openneuron::kernels::detail::RangeFn(body));
          if (bad_bounds.load() != 0 || calls.load() != chunks) {
            failures.add(where(it, "run_chunks(" + std::to_string(n) + ", " +
                                       std::to_string(chunks) + ") made " +
                                       std::to_string(calls.load()) + " calls, " +
                                       std::to_string(bad_bounds.load()) + " off the boundaries"));
          }
          float got = 0, want = 0;
          for (int64_t c = 0; c < chunks; ++c) {
            got += partial[c];
            float s = 0;
            for (int64_t i = c * n / chunks; i < (c + 1) * n / chunks; ++i) s += value(i);
            want += s;
          }
          if (got != want) {
            failures.add(where(
                it, "chunked sum " + std::to_string(got) + " != serial " + std::to_string(want)));
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          if (hits[i] != 1) {
            failures.add(where(it, "index " + std::to_string(i) + " of " + std::to_string(n) +
                                       " covered " + std::to_string(hits[i]) + " times"));
            break;
          }
        }
        regions.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  stop.store(true);
  resizer.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  EXPECT_GT(regions.load(), kThreads) << ontest::stress::seed_note();
  EXPECT_GT(nested_regions.load(), 0) << ontest::stress::seed_note();

  // With the pool idle, a region of slow chunks is shared with its workers.
  openneuron::kernels::set_num_threads(3);
  std::set<std::thread::id> ran_on;
  for (int attempt = 0; attempt < 50 && ran_on.size() < 2; ++attempt) {
    std::mutex mu;
    parallel_for(6, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard<std::mutex> lock(mu);
      ran_on.insert(std::this_thread::get_id());
    });
  }
  EXPECT_GE(ran_on.size(), 2u) << "the pool never ran a region on a worker";
}

}  // namespace
