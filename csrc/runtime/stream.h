// A stream: an in-order queue executed by its own worker thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "openneuron/runtime.h"
#include "work_item.h"

namespace openneuron::runtime {

class Stream {
 public:
  static constexpr uint32_t kMagic = 0x4f4e5354;  // "ONST"

  Stream(int device, int64_t id, int priority);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  bool valid() const { return magic_ == kMagic && !destroyed_.load(std::memory_order_acquire); }
  int device() const { return device_; }
  int64_t id() const { return id_; }
  int priority() const { return priority_; }

  // Queues the item and returns its sequence number; never waits for work.
  uint64_t push(WorkItem&& item);
  // push(), or with `blocking` run the item to completion before returning:
  // inline when the stream is idle, else queued and waited for. A blocking
  // submit reports failures (its own or earlier ones) as EXECUTION_FAILED.
  // A short launch onto an idle stream of a contended host also runs inline,
  // its failure reported at the next synchronization (contention.h).
  onrt_status submit(WorkItem&& item, bool blocking);

  // Items are numbered 1, 2, ...: an event is "position `enqueued()`" and is
  // complete once the worker has passed it.
  uint64_t enqueued() const { return enqueued_.load(std::memory_order_acquire); }
  bool reached(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  // Waits until the worker has passed `seq`. A caller's wait may end early:
  // INTERRUPTED by the embedding's wait check, TIMEOUT by the watchdog (the
  // work goes on). The runtime's own waits (the allocator, a worker waiting
  // for another stream, destroy) see neither and always return OK.
  enum class Waiter { kCaller, kRuntime };
  onrt_status wait_until(uint64_t seq, Waiter waiter = Waiter::kRuntime);

  // Waits for all queued work; returns and clears a pending error.
  onrt_status synchronize();
  // OK when idle (returning and clearing a pending error), NOT_READY otherwise.
  onrt_status query();
  // Drains the queue and stops the worker. The object stays allocated so that
  // events and ids referring to it stay safe to inspect.
  void destroy();

 private:
  void worker_main();
  void spin_for_work();
  onrt_status take_error_locked(std::unique_lock<std::mutex>& lock);
  // Runs `item` on the calling thread (the stream is idle, mu_ held). Blocking:
  // returns its failure, or an earlier pending one; otherwise a failure is kept
  // for the next synchronization, as the worker does.
  onrt_status run_here_locked(WorkItem&& item, std::unique_lock<std::mutex>& lock, bool blocking);
  void record_error_locked(std::string error);
  void log_failure(const std::string& error) const;
  void complete_locked(uint64_t seq);  // publishes seq, wakes the waiters it satisfies
  std::string describe_running_locked() const;  // for the watchdog's message

  uint32_t magic_ = kMagic;
  const int device_;
  const int64_t id_;
  const int priority_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker sleeps here
  std::condition_variable done_cv_;  // synchronizing threads sleep here
  WorkQueue queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), readable while spinning
  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> completed_{0};
  // Set while an item runs (on the worker or inline on a caller thread), so
  // inline execution never overlaps queued work.
  bool busy_ = false;
  // What the worker runs (under mu_), for the watchdog's message.
  WorkKind running_kind_ = WorkKind::kHostFn;
  std::string running_program_;
  bool worker_sleeping_ = false;
  // Smallest sequence number a sleeping synchronizer waits for (under mu_):
  // completions before it wake no one, so a thread draining a long queue
  // sleeps through it instead of waking (and taking a core) once per item.
  uint64_t wake_at_ = UINT64_MAX;
  bool stop_ = false;
  std::atomic<bool> destroyed_{false};
  std::thread worker_;
  // First failure since the last synchronize/query; later items are skipped.
  std::atomic<bool> has_error_{false};
  std::string error_;
};

inline Stream* to_stream(onrt_stream_t s) { return reinterpret_cast<Stream*>(s); }
inline onrt_stream_t to_handle(Stream* s) { return reinterpret_cast<onrt_stream_t>(s); }

}  // namespace openneuron::runtime
