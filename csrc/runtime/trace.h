// Device activity tracing for profilers (onrt_trace_* in openneuron/runtime.h).
// While a user is active, the thread running a stream's work records each
// kernel and copy with the wall-clock interval it ran in; the correlation id
// is the one current on the thread that queued the work, so a profiler can
// link the device activity to the host op that caused it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "openneuron/runtime.h"

namespace openneuron::runtime {

namespace trace_detail {
extern std::atomic<bool> records;
extern std::atomic<bool> totals;
}

// One relaxed load each: the only cost on the execution path when nobody traces.
inline bool tracing_records() { return trace_detail::records.load(std::memory_order_relaxed); }
inline bool tracing_totals() { return trace_detail::totals.load(std::memory_order_relaxed); }

// Correlation id current on the calling thread (0 when none).
uint64_t current_correlation();

int64_t trace_now_ns();

struct ActivitySite {
  int device;
  int64_t stream;
  uint64_t correlation;
  uint64_t call_id;
  int32_t thread_id = 0;  // runtime calls only
};

// A fresh id for a launch or copy call (onrt_activity.call_id).
uint64_t next_call_id();

// One kernel or copy, for the record users.
void record_activity(const ActivitySite& site, onrt_activity_kind kind, const std::string& name,
                     const std::string& program, int64_t start_ns, int64_t end_ns, uint64_t bytes);
// Records a launch or copy call, from construction to destruction, on the
// calling thread: the host side of a device activity.
class RuntimeCallScope {
 public:
  RuntimeCallScope(const char* name, std::string program, int device, int64_t stream,
                   uint64_t call_id);
  ~RuntimeCallScope();
  RuntimeCallScope(const RuntimeCallScope&) = delete;
  RuntimeCallScope& operator=(const RuntimeCallScope&) = delete;

 private:
  const char* name_;
  std::string program_;
  ActivitySite site_;
  int64_t start_ns_;
};

// One whole program run or copy, for the totals users.
void add_total(const std::string& name, int64_t ns);

}  // namespace openneuron::runtime
