// The intra-op parallel loop: parallel_for over the kernel thread pool
// (parallel.cpp), the grain below which work stays on the calling thread, and
// run_steps for a sequence of small dependent steps in one region.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace openneuron::kernels::detail {

// Non-owning callable reference: parallel regions pass lambdas without
// std::function's allocation.
class RangeFn {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, RangeFn>)
  RangeFn(F& f) : obj_(&f), call_([](void* o, int64_t b, int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

// Elementwise work below ~32K elements stays on the calling thread.
inline constexpr int64_t kGrain = 16384;

int pool_threads();  // cached; cheap
// Runs fn over [0, n) in `chunks` contiguous pieces (chunk c covers
// [c*n/chunks, (c+1)*n/chunks)); pieces run concurrently when the pool is free.
void run_chunks(int64_t n, int64_t chunks, RangeFn fn);

// Returns once v >= target, spinning briefly (not at all on a contended host), then
// yielding. For a target another running thread of the same region will reach.
void wait_at_least(const std::atomic<int64_t>& v, int64_t target);

// Runs fn(step, block) for steps 0 .. steps-1 in order, each over `blocks` blocks,
// in one parallel region: for a sequence of small dependent steps, where a region per
// step would wake the pool's threads once per step, which costs about what a step's
// work does. A thread takes the next (step, block) in order and, before a block of
// step s, waits until every block of step s-1 is done. A thread only ever waits on
// blocks another thread has taken and is running, so any number of threads (one,
// when the pool is busy) finishes. fn returns false on failure; the steps still run
// to their end; returns whether all succeeded.
template <class F>
bool run_steps(int64_t steps, int64_t blocks, F&& fn) {
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> ok{true};
  const int64_t total = steps * blocks;
  auto worker = [&](int64_t, int64_t) {
    for (;;) {
      const int64_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k >= total) break;
      wait_at_least(done, k / blocks * blocks);
      if (!fn(k / blocks, k % blocks)) ok.store(false, std::memory_order_relaxed);
      done.fetch_add(1, std::memory_order_release);
    }
  };
  run_chunks(blocks, blocks, RangeFn(worker));
  return ok.load();
}

// Splits [0, n) over the pool when each thread gets at least `grain` items,
// `pieces` contiguous pieces per thread. More than one piece lets a thread
// that finishes early take the last pieces of one the OS preempted; only for
// work whose result does not depend on where the pieces are cut.
template <class F>
inline void parallel_for(int64_t n, int64_t grain, F&& f, int pieces = 1) {
  if (n <= 0) return;
  const int64_t max_chunks = n / std::max<int64_t>(grain, 1);
  const int threads = max_chunks >= 2 ? pool_threads() : 1;
  const int64_t chunks = std::min<int64_t>(threads > 1 ? int64_t{threads} * pieces : 1, max_chunks);
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
  run_chunks(n, chunks, RangeFn(f));
}

}  // namespace openneuron::kernels::detail
