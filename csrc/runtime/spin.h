// Brief polling before a thread sleeps on a condition variable: work that
// arrives within the budget skips a futex wake-up (tens of microseconds). On a
// contended host there is no polling: the core goes to a thread with work.
#pragma once

#include <chrono>
#include <thread>

#include "contention.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ONRT_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define ONRT_CPU_RELAX() asm volatile("yield")
#else
#define ONRT_CPU_RELAX() std::this_thread::yield()
#endif

namespace openneuron::runtime {

// Polls `done` until it holds or `budget` has passed; returns its last value.
template <typename Done>
bool spin_until(Done done, std::chrono::microseconds budget) {
  if (host_contended()) return done();
  auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      ONRT_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace openneuron::runtime
