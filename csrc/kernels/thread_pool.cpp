// The intra-op pool: persistent workers that split one parallel region at a
// time. A region that finds the pool busy (another core's worker is using it)
// or starts inside a worker runs inline, so callers never wait on each other
// and nested regions never deadlock.
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "internal.h"

namespace openneuron::kernels {
namespace detail {
namespace {

thread_local bool t_in_region = false;

int default_threads() {
  for (const char* name : {"OPENNEURON_INTRAOP_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(name)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

std::atomic<int> g_threads{0};

class Pool {
 public:
  // Runs the chunks on up to `want` threads including the caller. False when
  // another region holds the pool.
  bool try_run(int64_t n, int64_t chunks, RangeFn fn, int want) {
    std::unique_lock<std::mutex> region(region_mu_, std::try_to_lock);
    if (!region.owns_lock()) return false;
    ensure_workers(want - 1);
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = &fn;
      n_ = n;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      pending_ = chunks;
      seats_ = want - 1;
      ++generation_;
    }
    cv_.notify_all();
    work(fn, n, chunks);
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0 && busy_ == 0; });
    // Workers that wake late must not join a finished region.
    seats_ = 0;
    fn_ = nullptr;
    return true;
  }

 private:
  void work(RangeFn fn, int64_t n, int64_t chunks) {
    const bool was = t_in_region;
    t_in_region = true;
    int64_t done = 0;
    for (;;) {
      const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) break;
      fn(c * n / chunks, (c + 1) * n / chunks);
      ++done;
    }
    t_in_region = was;
    if (done) {
      std::lock_guard<std::mutex> lk(mu_);
      pending_ -= done;
      if (pending_ == 0) done_cv_.notify_all();
    }
  }

  void ensure_workers(int count) {
    while (static_cast<int>(workers_.size()) < count) {
      workers_.emplace_back([this] { worker_main(); });
      workers_.back().detach();  // the pool lives for the process
    }
  }

  void worker_main() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return generation_ != seen; });
      seen = generation_;
      if (seats_ <= 0 || fn_ == nullptr) continue;
      --seats_;
      ++busy_;
      RangeFn fn = *fn_;
      const int64_t n = n_, chunks = chunks_;
      lk.unlock();
      work(fn, n, chunks);
      lk.lock();
      if (--busy_ == 0) done_cv_.notify_all();
    }
  }

  std::mutex region_mu_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t pending_ = 0;
  int seats_ = 0;
  int busy_ = 0;
  uint64_t generation_ = 0;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: workers may outlive static dtors
  return *p;
}

}  // namespace

int pool_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return t_in_region ? 1 : n;
}

void run_chunks(int64_t n, int64_t chunks, RangeFn fn) {
  const int want = static_cast<int>(std::min<int64_t>(chunks, pool_threads()));
  if (want <= 1 || t_in_region || !pool().try_run(n, chunks, fn, want)) {
    // Serial fallback keeps the same chunk boundaries (reductions rely on it).
    for (int64_t c = 0; c < chunks; ++c) fn(c * n / chunks, (c + 1) * n / chunks);
  }
}

}  // namespace detail

int num_threads() { return detail::pool_threads(); }

void set_num_threads(int n) {
  detail::g_threads.store(n > 0 ? n : detail::default_threads(), std::memory_order_relaxed);
}

}  // namespace openneuron::kernels
