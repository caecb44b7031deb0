// Events: a recorded position in a stream. Reference counted because a timing
// event's queued timestamp item may outlive onrt_event_destroy.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "openneuron/runtime.h"

namespace openneuron::runtime {

class Stream;

class Event {
 public:
  static constexpr uint32_t kMagic = 0x4f4e4556;  // "ONEV"

  explicit Event(unsigned flags) : flags_(flags) {}
  ~Event() { magic_ = 0; }

  bool valid() const { return magic_ == kMagic; }
  bool timing() const { return (flags_ & ONRT_EVENT_TIMING) != 0; }

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void record(Stream* stream);
  // Position this event stands for; stream == nullptr if never recorded.
  void position(Stream** stream, uint64_t* seq);
  bool complete();
  onrt_status synchronize();  // a caller's wait: may be interrupted (Stream::wait_until)
  // Called by the worker when it reaches a timestamp item of `generation`.
  void stamp(uint64_t generation);
  // Timestamp of the latest record, if it has been reached.
  bool timestamp(std::chrono::steady_clock::time_point* out);

 private:
  uint32_t magic_ = kMagic;
  const unsigned flags_;
  std::atomic<int> refs_{1};
  std::mutex mu_;
  Stream* stream_ = nullptr;
  uint64_t seq_ = 0;
  uint64_t generation_ = 0;  // distinguishes re-records for in-flight stamps
  bool has_time_ = false;
  std::chrono::steady_clock::time_point time_;
};

inline Event* to_event(onrt_event_t e) { return reinterpret_cast<Event*>(e); }

}  // namespace openneuron::runtime
