// The intra-op pool: persistent workers that split one parallel region at a
// time. A region that finds the pool busy (another core's worker is using it)
// or starts inside a worker runs inline, so callers never wait on each other
// and nested regions never deadlock.
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "openneuron/device_access.h"
#include "openneuron/host_contention.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::kernels {
namespace detail {
namespace {

thread_local bool t_in_region = false;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : 0;
}

int default_threads() {
  if (const int n = env_int("OPENNEURON_INTRAOP_THREADS"); n > 0) return n;
  const unsigned hc = std::thread::hardware_concurrency();
  const int host = hc > 0 ? static_cast<int>(hc) : 1;
  // Ranks started by torchrun share the host: each takes its share of the cores
  // (torchrun's OMP_NUM_THREADS=1 is meant for CPU training and is not taken).
  if (const int local = env_int("LOCAL_WORLD_SIZE"); local > 1) return std::max(1, host / local);
  if (const int n = env_int("OMP_NUM_THREADS"); n > 0) return n;
  return host;
}

std::atomic<int> g_threads{0};

class Pool {
 public:
  // Runs the chunks on up to `want` threads including the caller. False when
  // another region holds the pool.
  bool try_run(int64_t n, int64_t chunks, RangeFn fn, int want) {
    std::unique_lock<std::mutex> region(region_mu_, std::try_to_lock);
    if (!region.owns_lock()) return false;
    want = std::min(want, kMaxSeats);
    ensure_workers(want - 1);
    // Seat s owns chunks [s * chunks / want, (s + 1) * chunks / want): the same
    // chunk goes to the same seat on every call, so a tensor processed again
    // is found in the cache of the core that touched it last (OpenMP's static
    // schedule does the same for PyTorch). A seat that runs out steals.
    for (int st = 0; st < want; ++st) {
      seat_[st].next.store(st * chunks / want, std::memory_order_relaxed);
      seat_[st].end = (st + 1) * chunks / want;
    }
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = &fn;
      n_ = n;
      chunks_ = chunks;
      want_ = want;
      pending_.store(chunks, std::memory_order_relaxed);
      seats_ = want - 1;
      generation_.fetch_add(1, std::memory_order_release);
      wake = sleepers_ > 0;  // spinning workers see the new generation by themselves
    }
    if (wake) cv_.notify_all();
    work(fn, n, chunks, 0, want);
    // Workers usually finish within microseconds of the caller: spin before sleeping.
    auto finished = [&] {
      return pending_.load(std::memory_order_acquire) == 0 && busy_.load(std::memory_order_acquire) == 0;
    };
    spin_until(finished);
    // Seats are taken under mu_: seeing the region finished while holding it, and
    // closing it before letting go, keeps a late worker out of the next region.
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, finished);
    seats_ = 0;
    fn_ = nullptr;
    return true;
  }

 private:
  static constexpr int kMaxSeats = 256;
  // About 50 us: longer than the gap between back-to-back kernels, short
  // enough that an idle pool stops spinning at once. After a short busy spin
  // the spinner yields, so a thread with work (the Python thread issuing the
  // next op, PyTorch's own pool) gets the core whenever it wants it. On a
  // contended host (host_contention.h) it does not spin at all.
  static constexpr auto kSpin = std::chrono::microseconds(50);

  template <class Pred>
  static bool spin_until(Pred&& pred) {
    if (onrt_host_contended()) return pred();  // the core goes to a thread with work
    const auto limit = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; ++i) {
      if (pred()) return true;
      if (i < 64) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        continue;
      }
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > limit) return false;
    }
  }

  void work(RangeFn fn, int64_t n, int64_t chunks, int seat, int want) {
    const bool was = t_in_region;
    t_in_region = true;
    int64_t done = 0;
    for (int k = 0; k < want; ++k) {  // own range first, then the others'
      Seat& st = seat_[(seat + k) % want];
      for (;;) {
        const int64_t c = st.next.fetch_add(1, std::memory_order_relaxed);
        if (c >= st.end) break;
        fn(c * n / chunks, (c + 1) * n / chunks);
        ++done;
      }
    }
    t_in_region = was;
    if (done && pending_.fetch_sub(done, std::memory_order_acq_rel) == done) {
      std::lock_guard<std::mutex> lk(mu_);  // pairs with the caller's done_cv_ wait
      done_cv_.notify_all();
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
    for (;;) {
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
      std::unique_lock<std::mutex> lk(mu_);
      ++sleepers_;
      cv_.wait(lk, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
      --sleepers_;
      seen = generation_.load(std::memory_order_relaxed);
      if (seats_ <= 0 || fn_ == nullptr) continue;
      const int seat = want_ - seats_;
      --seats_;
      busy_.fetch_add(1, std::memory_order_relaxed);
      RangeFn fn = *fn_;
      const int64_t n = n_, chunks = chunks_;
      const int want = want_;
      lk.unlock();
      // A pool thread may have been started outside runtime work (protected
      // device memory locks it out then); its tasks are always device work.
      const unsigned access = onrt_device_access_begin();
      work(fn, n, chunks, seat, want);
      onrt_device_access_end(access);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> g(mu_);
        done_cv_.notify_all();
      }
    }
  }

  struct alignas(64) Seat {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };

  std::mutex region_mu_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  Seat seat_[kMaxSeats];
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  std::atomic<int64_t> pending_{0};
  std::atomic<int> busy_{0};
  int want_ = 0;
  int seats_ = 0;
  int sleepers_ = 0;  // guarded by mu_
  std::atomic<uint64_t> generation_{0};
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: workers may outlive static dtors
  return *p;
}

}  // namespace

void wait_at_least(const std::atomic<int64_t>& v, int64_t target) {
  for (int i = 0; v.load(std::memory_order_acquire) < target; ++i) {
#if defined(__x86_64__)
    if (i < 1024 && !onrt_host_contended()) {
      __builtin_ia32_pause();
      continue;
    }
#endif
    std::this_thread::yield();
  }
}

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
