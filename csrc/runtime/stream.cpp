// Streams (stream.h): the work queue, the worker thread that runs it in order,
// submission, waiting and synchronisation, and stream teardown.
#include "stream.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "contention.h"
#include "counters.h"
#include "log.h"
#include "program.h"
#include "protect.h"
#include "spin.h"
#include "status.h"
#include "trace.h"
#include "wait_policy.h"

namespace openneuron::runtime {
namespace {

// Launches typically arrive a few microseconds apart from the Python thread;
// polling this long avoids a futex wake-up (tens of microseconds) per launch
// while costing little CPU when the stream really goes idle.
constexpr auto kWorkerSpin = std::chrono::microseconds(40);
// Synchronizing threads poll briefly for tiny programs to finish before sleeping.
constexpr auto kWaiterSpin = std::chrono::microseconds(20);

}  // namespace

void WorkQueue::push(WorkItem&& item) {
  if (size_ == slots_.size()) {
    std::vector<WorkItem> grown(slots_.empty() ? 64 : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) grown[i] = std::move(slots_[(head_ + i) % slots_.size()]);
    slots_ = std::move(grown);
    head_ = 0;
  }
  slots_[(head_ + size_) % slots_.size()] = std::move(item);
  ++size_;
}

WorkItem WorkQueue::pop() {
  WorkItem item = std::move(slots_[head_]);
  head_ = (head_ + 1) % slots_.size();
  --size_;
  return item;
}

void WorkQueue::release_storage() {
  slots_ = std::vector<WorkItem>();
  head_ = size_ = 0;
}

Stream::Stream(int device, int64_t id, int priority)
    : device_(device), id_(id), priority_(priority) {}

Stream::~Stream() {
  destroy();
  magic_ = 0;
}

uint64_t Stream::push(WorkItem&& item) {
  if (tracing_records()) item.correlation = current_correlation();
  bool wake;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Lazily: most streams of most devices never see work.
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_main(); });
    seq = enqueued_.load(std::memory_order_relaxed) + 1;
    item.seq = seq;
    queue_.push(std::move(item));
    enqueued_.store(seq, std::memory_order_release);
    queued_.store(queue_.size(), std::memory_order_release);
    wake = worker_sleeping_;
  }
  if (wake) work_cv_.notify_one();
  return seq;
}

onrt_status Stream::submit(WorkItem&& item, bool blocking) {
  std::optional<RuntimeCallScope> traced;
  if (tracing_records()) {
    const bool launch = item.kind == WorkKind::kProgram;
    item.call_id = next_call_id();
    traced.emplace(launch ? "onrtLaunch" : "onrtMemcpy",
                   launch ? item.launch.program->name() : std::string(), device_, id_,
                   item.call_id);
  }
  // Under protected memory a program never runs on the caller: its kernels'
  // OpenMP teams would be the caller's, whose threads cannot open device memory.
  const bool on_worker = item.kind == WorkKind::kProgram && memory_protected();
  if (!blocking) {
    if (item.kind == WorkKind::kProgram && !on_worker &&
        launch_on_caller(item.launch.program->last_run_ns())) {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty() && !busy_) return run_here_locked(std::move(item), lock, false);
    }
    push(std::move(item));
    return ONRT_OK;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (on_worker) {
    lock.unlock();
    wait_until(push(std::move(item)));
    lock.lock();
    return take_error_locked(lock);
  }
  if (!queue_.empty() || busy_) {
    // Drain, then run here: one hand-off fewer than queueing the item, and a
    // device-to-host copy lands in the caller's cache. Only if other threads
    // keep the stream busy does the item go through the queue.
    lock.unlock();
    if (onrt_status st = wait_until(enqueued(), Waiter::kCaller); st != ONRT_OK) {
      // Interrupted before the item ran. A copy is dropped: its host buffer
      // may be gone once the caller sees the error. Other work runs queued.
      if (item.kind != WorkKind::kCopy) push(std::move(item));
      return st;
    }
    lock.lock();
    if (!queue_.empty() || busy_) {
      lock.unlock();
      // Queued, so waited for to the end: a copy must not land after its
      // caller stopped waiting.
      wait_until(push(std::move(item)));
      lock.lock();
      return take_error_locked(lock);
    }
  }
  return run_here_locked(std::move(item), lock, true);
}

onrt_status Stream::run_here_locked(WorkItem&& item, std::unique_lock<std::mutex>& lock,
                                    bool blocking) {
  if (tracing_records()) item.correlation = current_correlation();
  // Idle: run here. Claiming busy_ and a sequence number keeps stream order
  // and event semantics exactly as if the worker had run it.
  busy_ = true;
  uint64_t seq = enqueued_.load(std::memory_order_relaxed) + 1;
  item.seq = seq;
  enqueued_.store(seq, std::memory_order_release);
  const bool skip = has_error_.load(std::memory_order_relaxed);
  lock.unlock();

  std::string error;
  bool ok = execute_item(*this, item, skip, &error);
  item = WorkItem();  // drop argument storage outside the lock
  if (!ok && !blocking) log_failure(error);

  lock.lock();
  busy_ = false;
  complete_locked(seq);
  if (!queue_.empty() && worker_sleeping_) work_cv_.notify_one();
  if (blocking) {
    if (skip) return take_error_locked(lock);
    if (!ok) return fail(ONRT_ERROR_EXECUTION_FAILED, std::move(error));
  } else if (!ok) {
    record_error_locked(std::move(error));  // as if the worker had run it
  }
  return ONRT_OK;
}

onrt_status Stream::wait_until(uint64_t seq, Waiter waiter) {
  if (reached(seq)) return ONRT_OK;
  if (spin_until([&] { return reached(seq); }, kWaiterSpin)) return ONRT_OK;
  const WaitPolicy policy = waiter == Waiter::kCaller ? wait_policy() : WaitPolicy{};
  std::unique_lock<std::mutex> lock(mu_);
  if (policy.period_ns == 0 && policy.watchdog_ns == 0) {
    while (!reached(seq)) {
      wake_at_ = std::min(wake_at_, seq);
      done_cv_.wait(lock);
    }
    return ONRT_OK;
  }
  // Sleep in slices; between them, run the wait check and watch for progress.
  using Clock = std::chrono::steady_clock;
  const std::chrono::nanoseconds slice(
      policy.period_ns > 0 ? policy.period_ns : std::min<int64_t>(policy.watchdog_ns, 1'000'000'000));
  uint64_t last_done = completed_.load(std::memory_order_acquire);
  Clock::time_point last_progress = Clock::now();
  while (!reached(seq)) {
    wake_at_ = std::min(wake_at_, seq);
    done_cv_.wait_for(lock, slice);
    if (reached(seq)) break;
    const Clock::time_point now = Clock::now();
    // Only a kernel or a copy is watched: a host function or a wait for another
    // stream depends on something outside (a collective's peers, other work)
    // that has its own timeout.
    const bool watched = busy_ && (running_kind_ == WorkKind::kProgram ||
                                   running_kind_ == WorkKind::kCopy);
    if (const uint64_t done = completed_.load(std::memory_order_acquire);
        done != last_done || !watched) {
      last_done = done;
      last_progress = now;
    } else if (policy.watchdog_ns > 0 &&
               now - last_progress >= std::chrono::nanoseconds(policy.watchdog_ns)) {
      return failf(ONRT_ERROR_TIMEOUT,
                   "neuron:%d stream %lld completed no work for %.0f s while %s (%zu more queued): "
                   "a kernel may be hung or deadlocked; gave up waiting "
                   "(OPENNEURON_WATCHDOG_SECONDS sets the limit, 0 turns the watchdog off)",
                   device_, static_cast<long long>(id_), policy.watchdog_ns / 1e9,
                   describe_running_locked().c_str(), queue_.size());
    }
    if (policy.check != nullptr) {
      lock.unlock();
      const bool stop = policy.check(policy.user) != 0;
      lock.lock();
      if (stop) {
        return failf(ONRT_ERROR_INTERRUPTED,
                     "waiting for neuron:%d stream %lld was interrupted; its queued work goes on",
                     device_, static_cast<long long>(id_));
      }
    }
  }
  return ONRT_OK;
}

std::string Stream::describe_running_locked() const {
  if (!busy_) return "not running anything";
  switch (running_kind_) {
    case WorkKind::kProgram:
      return "running program '" + running_program_ + "'";
    case WorkKind::kCopy:
      return "running a copy";
    case WorkKind::kHostFn:
      return "running a host function";
    case WorkKind::kTimestamp:
      return "recording an event";
    case WorkKind::kWait:
      return "waiting for an event of another stream";
  }
  return "running work";
}

void Stream::complete_locked(uint64_t seq) {
  completed_.store(seq, std::memory_order_release);
  if (seq < wake_at_) return;
  wake_at_ = UINT64_MAX;  // woken waiters still short of their target re-register
  done_cv_.notify_all();
}

onrt_status Stream::synchronize() {
  ONRT_RETURN_IF_ERROR(wait_until(enqueued(), Waiter::kCaller));
  std::unique_lock<std::mutex> lock(mu_);
  return take_error_locked(lock);
}

onrt_status Stream::query() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty() || busy_) return ONRT_ERROR_NOT_READY;
  return take_error_locked(lock);
}

onrt_status Stream::take_error_locked(std::unique_lock<std::mutex>& lock) {
  if (!has_error_.load(std::memory_order_relaxed)) return ONRT_OK;
  std::string message = std::move(error_);
  error_.clear();
  has_error_.store(false, std::memory_order_relaxed);
  return fail(ONRT_ERROR_EXECUTION_FAILED, std::move(message));
}

void Stream::log_failure(const std::string& error) const {
  // Outside mu_: the log sink may call into the embedding (Python logging).
  logf(ONRT_LOG_DEBUG, "neuron:%d stream %lld failed: %s", device_, static_cast<long long>(id_),
       error.c_str());
}

void Stream::record_error_locked(std::string error) {
  // Raised at the next synchronization.
  if (has_error_.load(std::memory_order_relaxed)) return;
  error_ = std::move(error);
  has_error_.store(true, std::memory_order_relaxed);
}

void Stream::destroy() {
  if (destroyed_.exchange(true)) return;
  wait_until(enqueued());
  std::thread worker;
  {
    // push() starts the worker under mu_, so take it under mu_ as well.
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    worker = std::move(worker_);
  }
  work_cv_.notify_one();
  if (worker.joinable()) worker.join();
  std::lock_guard<std::mutex> lock(mu_);
  // A push racing destroy() starts a fresh worker; its items must not vanish.
  if (queue_.empty()) queue_.release_storage();
}

void Stream::spin_for_work() {
  spin_until([&] { return queued_.load(std::memory_order_acquire) > 0; }, kWorkerSpin);
}

void Stream::worker_main() {
  {
    char name[16];
    snprintf(name, sizeof name, "onrt-n%d-s%lld", device_, static_cast<long long>(id_));
    pthread_setname_np(pthread_self(), name);
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() || busy_) {
      lock.unlock();
      spin_for_work();
      lock.lock();
      // Stop only with nothing queued: items queued behind an inline item that
      // is still running would otherwise never run, and their waiters hang.
      while (queue_.empty() ? !stop_ : busy_) {
        worker_sleeping_ = true;
        work_cv_.wait(lock);
        worker_sleeping_ = false;
      }
      if (queue_.empty()) return;  // stop_ with nothing left to do
    }
    WorkItem item = queue_.pop();
    queued_.store(queue_.size(), std::memory_order_release);
    busy_ = true;
    running_kind_ = item.kind;
    if (item.kind == WorkKind::kProgram) running_program_ = item.launch.program->name();
    const bool skip = has_error_.load(std::memory_order_relaxed);
    lock.unlock();

    std::string error;
    const bool ok = execute_item(*this, item, skip, &error);
    const uint64_t seq = item.seq;
    item = WorkItem();  // drop argument storage outside the lock

    if (!ok) log_failure(error);
    note_worker_progress();
    lock.lock();
    busy_ = false;
    if (!ok) record_error_locked(std::move(error));
    complete_locked(seq);
  }
}

}  // namespace openneuron::runtime
