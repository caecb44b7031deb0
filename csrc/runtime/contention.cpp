#include "contention.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>

#include "openneuron/host_contention.h"

namespace openneuron::runtime {
namespace {

// A worker that waited for a core this share of the time it was runnable,
// over a window of at least kWindowNs, finds the host contended. The kernel
// updates these times at scheduler ticks: a window spans a few.
constexpr double kWaitShare = 0.2;
constexpr int64_t kWindowNs = 10'000'000;
// A window in which the worker was runnable less than this says nothing.
constexpr int64_t kMinRunnableNs = 1'000'000;
constexpr int64_t kHoldNs = 250'000'000;
// Longer launches gain nothing from skipping the hand-off, and on the worker
// they stay interruptible (Ctrl-C, the watchdog).
constexpr int64_t kShortLaunchNs = 1'000'000;

std::atomic<ContentionMode> g_mode{ContentionMode::kAuto};
std::atomic<int64_t> g_contended_until{0};  // monotonic ns; the past: not contended

struct WorkerWindow {
  int fd = -2;  // -2: not opened yet, -1: no schedstat on this kernel
  int64_t start = 0, cpu = 0, wait = 0;
  ~WorkerWindow() {
    if (fd >= 0) close(fd);
  }
};

// This thread's CPU time and run delay in nanoseconds.
bool read_schedstat(WorkerWindow& w, int64_t* cpu, int64_t* wait) {
  if (w.fd == -2) w.fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (w.fd < 0) return false;
  char buf[96];
  const ssize_t n = pread(w.fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  return std::sscanf(buf, "%" SCNd64 " %" SCNd64, cpu, wait) == 2;
}

}  // namespace

void set_contention_mode(ContentionMode mode) { g_mode.store(mode, std::memory_order_relaxed); }

void note_worker_progress() {
  if (g_mode.load(std::memory_order_relaxed) != ContentionMode::kAuto) return;
  thread_local WorkerWindow w;
  const int64_t now = monotonic_ns();
  if (w.fd == -1 || now - w.start < kWindowNs) return;
  int64_t cpu, wait;
  if (!read_schedstat(w, &cpu, &wait)) {
    w.fd = -1;
    return;
  }
  const int64_t ran = cpu - w.cpu, waited = wait - w.wait;
  const bool first = w.start == 0;
  w.start = now;
  w.cpu = cpu;
  w.wait = wait;
  if (first || ran + waited < kMinRunnableNs) return;
  if (waited > kWaitShare * static_cast<double>(ran + waited)) {
    g_contended_until.store(now + kHoldNs, std::memory_order_relaxed);
  }
}

bool host_contended() {
  switch (g_mode.load(std::memory_order_relaxed)) {
    case ContentionMode::kOff:
      return false;
    case ContentionMode::kOn:
      return true;
    case ContentionMode::kAuto:
      break;
  }
  return monotonic_ns() < g_contended_until.load(std::memory_order_relaxed);
}

bool launch_on_caller(int64_t last_run_ns) {
  return last_run_ns > 0 && last_run_ns <= kShortLaunchNs && host_contended();
}

}  // namespace openneuron::runtime

extern "C" int onrt_host_contended(void) { return openneuron::runtime::host_contended() ? 1 : 0; }
