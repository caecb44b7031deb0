// Stress test of the program cache (program_cache.cpp): many threads look up
// and compile the same and different graphs at once (compilation runs outside
// the cache's lock, so two threads may compile one key; the first insert wins),
// mixed with graphs that fail to compile (never cached), and run what they get,
// some programs large enough to use the intra-op pool. Checks that every
// caller of a key gets the same program, that the programs compute the right
// values, and that hits + misses add up to the lookups made; then the same
// with clear() racing the lookups.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../stress_util.h"
#include "test_util.h"

namespace ontest {
namespace {

using stress::Deadline;
using stress::Failures;

constexpr Op kOps[] = {Op::Add, Op::Mul, Op::Neg};
constexpr DType kTypes[] = {DType::Float32, DType::Int32};
constexpr int64_t kSizes[] = {5, 1000, 70000};  // the last splits over the pool
constexpr int kKeys = 3 * 2 * 3;
constexpr int64_t kMaxN = 70000;

struct Key {
  Op op;
  DType dt;
  int64_t n;
};
Key key(int k) { return Key{kOps[k / 6], kTypes[(k / 3) % 2], kSizes[k % 3]}; }

Graph graph_of(const Key& k) {
  const ValueType v = ValueType::of(make_type(k.dt, {k.n}));
  return k.op == Op::Neg ? Graph::single_op(Op::Neg, {v, v}, 1)
                         : Graph::single_op(k.op, {v, v, v}, 2);
}

double in_a(int64_t i) { return static_cast<double>(i % 13) - 6; }
double in_b(int64_t i) { return static_cast<double>(i % 7) - 3; }

// Runs `p` for key `k` on host buffers; "" or what went wrong.
std::string run_and_check(const Program& p, const Key& k, std::vector<uint64_t>& a,
                          std::vector<uint64_t>& b, std::vector<uint64_t>& out) {
  const bool f = k.dt == DType::Float32;
  auto put = [&](std::vector<uint64_t>& buf, int64_t i, double v) {
    if (f) {
      reinterpret_cast<float*>(buf.data())[i] = static_cast<float>(v);
    } else {
      reinterpret_cast<int32_t*>(buf.data())[i] = static_cast<int32_t>(v);
    }
  };
  for (int64_t i = 0; i < k.n; ++i) {
    put(a, i, in_a(i));
    put(b, i, in_b(i));
    put(out, i, 1e6);
  }
  std::vector<onrt_arg> args(k.op == Op::Neg ? 2 : 3);
  args[0].ptr = a.data();
  if (k.op == Op::Neg) {
    args[1].ptr = out.data();
  } else {
    args[1].ptr = b.data();
    args[2].ptr = out.data();
  }
  std::vector<uint64_t> scratch;
  if (p.scratch_bytes > 0) {
    scratch.assign(p.scratch_bytes / 8 + 8, 0);
    onrt_arg s;
    s.ptr = scratch.data();
    args.push_back(s);
  }
  if (static_cast<int32_t>(args.size()) != p.num_args) return "wrong argument count";
  std::string err;
  if (!run_on_host(p, args.data(), static_cast<int32_t>(args.size()), &err)) return err;
  for (int64_t i = 0; i < k.n; ++i) {
    const double want = k.op == Op::Add   ? in_a(i) + in_b(i)
                        : k.op == Op::Mul ? in_a(i) * in_b(i)
                                          : -in_a(i);
    const double got = f ? reinterpret_cast<const float*>(out.data())[i]
                         : reinterpret_cast<const int32_t*>(out.data())[i];
    if (got != want) {
      return std::string(op_name(k.op)) + " element " + std::to_string(i) + " = " +
             std::to_string(got) + ", expected " + std::to_string(want);
    }
  }
  return "";
}

// The lookups of one thread; `same` (may be null) records the first program of each key.
void lookups(int t, int iters, bool clearing, Failures& failures, const Deadline& deadline,
             std::atomic<const Program*>* same, std::atomic<int64_t>& calls,
             std::atomic<int64_t>& failed_compiles) {
  ProgramCache& cache = ProgramCache::global();
  std::mt19937 rng(static_cast<uint32_t>(stress::seed()) + t);
  std::vector<uint64_t> a(kMaxN), b(kMaxN), out(kMaxN);
  // Shared Graph objects are read by every thread; others build their own.
  std::vector<Graph> shared;
  for (int k = 0; k < kKeys; ++k) shared.push_back(graph_of(key(k)));
  const ValueType i64 = ValueType::of(make_type(DType::Int64, {4}));
  const Graph bad = Graph::single_op(Op::Exp, {i64, i64}, 1);
  for (int it = 0; it < iters && !deadline.passed() && failures.count() == 0; ++it) {
    const std::string where = "thread " + std::to_string(t) + ", iteration " + std::to_string(it);
    if (rng() % 20 == 0) {
      try {
        cache.get_or_compile(bad);
        failures.add(where + ": a graph that cannot be lowered compiled");
      } catch (const CompileError&) {
        failed_compiles.fetch_add(1);
      }
      continue;
    }
    // Skewed towards a few hot keys, as eager mode is.
    const int k = rng() % 2 == 0 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % kKeys);
    std::shared_ptr<const Program> p;
    if (rng() % 2 == 0) {
      p = cache.get_or_compile(shared[k]);
    } else {
      p = cache.get_or_compile(graph_of(key(k)));
    }
    calls.fetch_add(1);
    if (!p) {
      failures.add(where + ": no program");
      continue;
    }
    if (same != nullptr) {
      const Program* expected = nullptr;
      if (!same[k].compare_exchange_strong(expected, p.get()) && expected != p.get()) {
        failures.add(where + ": key " + std::to_string(k) + " gave two different programs");
      }
    }
    if (rng() % 4 == 0 || key(k).n < kMaxN) {
      if (std::string e = run_and_check(*p, key(k), a, b, out); !e.empty()) {
        failures.add(where + ": " + e);
      }
    }
    if (clearing && rng() % 50 == 0) cache.clear();
  }
}

TEST(ProgramCacheStress, SameAndDifferentKeysFromManyThreads) {
  constexpr int kThreads = 8, kIters = 400;
  ProgramCache& cache = ProgramCache::global();
  cache.clear();
  Failures failures;
  Deadline deadline;
  std::atomic<const Program*> same[kKeys];
  for (auto& s : same) s.store(nullptr);
  std::atomic<int64_t> calls{0}, failed_compiles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(
        [&, t] { lookups(t, kIters, false, failures, deadline, same, calls, failed_compiles); });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  int distinct = 0;
  for (auto& s : same) distinct += s.load() != nullptr;
  const CacheStats st = cache.stats();
  EXPECT_EQ(st.entries, distinct) << stress::seed_note();
  EXPECT_EQ(st.hits + st.misses, calls.load()) << stress::seed_note();
  // Each key is compiled at least once, and again only by threads that missed
  // it at the same time (at most one extra compile per other thread).
  EXPECT_GE(st.misses, distinct);
  EXPECT_LE(st.misses, int64_t{distinct} * kThreads);
  EXPECT_GT(calls.load(), kThreads);
  cache.clear();
}

TEST(ProgramCacheStress, ClearRacingLookups) {
  constexpr int kThreads = 6, kIters = 300;
  ProgramCache& cache = ProgramCache::global();
  cache.clear();
  Failures failures;
  Deadline deadline;
  std::atomic<int64_t> calls{0}, failed_compiles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(
        [&, t] { lookups(t, kIters, true, failures, deadline, nullptr, calls, failed_compiles); });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.summary();
  const CacheStats st = cache.stats();
  EXPECT_LE(st.entries, kKeys);
  EXPECT_LE(st.hits + st.misses, calls.load());
  cache.clear();
  EXPECT_EQ(cache.stats().entries, 0);
}

}  // namespace
}  // namespace ontest
