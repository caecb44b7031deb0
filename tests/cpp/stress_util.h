// Shared by the *_stress_test.cpp files: a fixed seed (printed with every
// failure, overridable to replay or vary a run), a time cap on top of each
// test's iteration count, and failures collected from any thread.
//
// OPENNEURON_STRESS_SEED=n   base seed (default 20240601); thread t uses seed + t
// OPENNEURON_STRESS_SECONDS=s time cap per test (default 3): a slow build (a
//                            sanitizer) runs fewer iterations instead of longer
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace ontest::stress {

inline uint64_t seed() {
  const char* v = std::getenv("OPENNEURON_STRESS_SEED");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : 20240601;
}

inline std::string seed_note() {
  return "seed " + std::to_string(seed()) +
         " (replay with OPENNEURON_STRESS_SEED=" + std::to_string(seed()) + ")";
}

// Stops loops after the time cap; each loop also has its own iteration bound.
class Deadline {
 public:
  Deadline() {
    const char* v = std::getenv("OPENNEURON_STRESS_SECONDS");
    const double secs = v != nullptr ? std::atof(v) : 3.0;
    end_ = std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(secs > 0 ? secs : 3.0));
  }
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }
  // For loops whose iterations are slow under a sanitizer: the first few always
  // run, so every kind of step is exercised however long setup took.
  bool passed_after(int iterations_done, int at_least = 3) const {
    return iterations_done >= at_least && passed();
  }

 private:
  std::chrono::steady_clock::time_point end_;
};

// The first few failures from any thread, reported by the main thread.
class Failures {
 public:
  void add(std::string what) {
    count_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.size() < 10) messages_.push_back(std::move(what));
  }
  int count() const { return count_.load(); }
  std::string summary() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = seed_note() + "\n";
    for (auto& m : messages_) out += m + "\n";
    return out;
  }

 private:
  std::atomic<int> count_{0};
  std::mutex mu_;
  std::vector<std::string> messages_;
};

}  // namespace ontest::stress
