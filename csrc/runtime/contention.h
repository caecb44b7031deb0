// Whether the host's cores are oversubscribed (other processes, or more busy
// threads than cores), judged by how long stream workers wait for a core while
// they are runnable (the scheduler's run delay, /proc/thread-self/schedstat).
//
// While the host is contended, threads that would spin sleep at once instead of
// taking a core from the thread that gives them work, and a short launch onto
// an idle stream runs on the calling thread instead of being handed to the
// worker: a hand-off then costs a wake-up on a busy core, and eager mode shares
// the cores as CPU eager does. Running on the caller hides the contention from
// the workers, so a judgement holds for 250 ms and is then made afresh.
#pragma once

#include <chrono>
#include <cstdint>

namespace openneuron::runtime {

enum class ContentionMode : uint8_t { kAuto, kOff, kOn };  // OPENNEURON_CONTENTION

void set_contention_mode(ContentionMode mode);  // from the configuration, at init
// Called by a stream worker after each item: samples its run delay every few
// milliseconds.
void note_worker_progress();
bool host_contended();
// Whether a launch of a program whose last run took `last_run_ns` (0: never
// run) should run on the calling thread if its stream is idle.
bool launch_on_caller(int64_t last_run_ns);

// The clock of contention windows and program run times.
inline int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace openneuron::runtime
