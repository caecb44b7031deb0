// The virtual core's DMA queues (dma.h): helper threads that move the slices
// of one large copy concurrently.
#include "dma.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>

#include "protect.h"
#include "spin.h"

namespace openneuron::runtime {
namespace {

// Below this a single core's memmove is as fast as waking a helper would be.
constexpr size_t kSplitBytes = size_t{4} << 20;
constexpr size_t kSliceBytes = size_t{1} << 20;
constexpr int kMaxQueues = 8;
constexpr auto kHelperSpin = std::chrono::microseconds(50);

class DmaQueues {
 public:
  DmaQueues() {
    const unsigned hc = std::thread::hardware_concurrency();
    helpers_ = std::clamp(static_cast<int>(hc) - 1, 0, kMaxQueues - 1);
  }

  // False when another copy holds the helpers (the caller then copies alone).
  bool try_copy(char* dst, const char* src, size_t bytes) {
    std::unique_lock<std::mutex> use(use_mu_, std::try_to_lock);
    if (!use.owns_lock() || helpers_ == 0) return false;
    start_helpers();
    const size_t slices = (bytes + kSliceBytes - 1) / kSliceBytes;
    {
      std::lock_guard<std::mutex> lk(mu_);
      dst_ = dst;
      src_ = src;
      bytes_ = bytes;
      slices_ = slices;
      next_.store(0, std::memory_order_relaxed);
      left_ = slices;
      generation_.fetch_add(1, std::memory_order_release);
    }
    work_cv_.notify_all();
    run_slices();
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return left_ == 0 && active_ == 0; });
    return true;
  }

 private:
  void start_helpers() {
    if (started_) return;
    started_ = true;
    for (int i = 0; i < helpers_; ++i)
      std::thread([this] { helper_main(); }).detach();  // lives for the process, like the stream workers
  }

  // Slices are claimed one at a time, so a helper that wakes late takes less.
  void run_slices() {
    size_t done = 0;
    for (;;) {
      const size_t s = next_.fetch_add(1, std::memory_order_relaxed);
      if (s >= slices_) break;
      const size_t off = s * kSliceBytes;
      std::memcpy(dst_ + off, src_ + off, std::min(kSliceBytes, bytes_ - off));
      ++done;
    }
    if (done == 0) return;
    std::lock_guard<std::mutex> lk(mu_);
    left_ -= done;
    if (left_ == 0) done_cv_.notify_all();
  }

  void helper_main() {
    uint64_t seen = 0;
    for (;;) {
      // Copies come in runs (a batch of outputs read back, a checkpoint): poll
      // for the next one briefly before sleeping, so it does not start with a
      // futex wake-up (tens of microseconds on a VM) of its helpers.
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, kHelperSpin);
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
      seen = generation_.load(std::memory_order_relaxed);
      if (left_ == 0) continue;  // the caller finished before this helper woke
      ++active_;
      lk.unlock();
      {
        const DeviceAccess access;
        run_slices();
      }
      lk.lock();
      if (--active_ == 0 && left_ == 0) done_cv_.notify_all();
    }
  }

  int helpers_ = 0;
  bool started_ = false;  // under use_mu_
  std::mutex use_mu_;  // one split copy at a time
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::atomic<uint64_t> generation_{0};  // written under mu_, polled without it
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t bytes_ = 0, slices_ = 0, left_ = 0;
  int active_ = 0;
  std::atomic<size_t> next_{0};
};

DmaQueues& queues() {
  static auto* q = new DmaQueues();  // never destroyed: detached helpers use it
  return *q;
}

}  // namespace

void dma_copy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const bool disjoint = d + bytes <= s || s + bytes <= d;
  if (bytes >= kSplitBytes && disjoint && queues().try_copy(d, s, bytes)) return;
  std::memmove(dst, src, bytes);
}

}  // namespace openneuron::runtime
