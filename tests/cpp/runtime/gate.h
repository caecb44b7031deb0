// A host function that holds its stream until the test opens the gate: work
// queued behind it stays pending for as long as the test needs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

namespace ontest {

struct Gate {
  std::atomic<bool> open{false};
  static int wait(void* self, char*, size_t) {
    auto* g = static_cast<Gate*>(self);
    while (!g->open.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    return 0;
  }
};

}  // namespace ontest
