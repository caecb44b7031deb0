// One entry of a stream's queue. Kept a flat value type so enqueueing a launch
// with few arguments costs no heap allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "openneuron/runtime.h"

namespace openneuron::runtime {

class Event;
class Program;
class Stream;

// Launches with at most this many arguments keep them inside the item.
inline constexpr int kInlineArgs = 16;

enum class WorkKind : uint8_t { kProgram, kCopy, kHostFn, kTimestamp, kWait };

struct LaunchWork {
  Program* program;  // holds a reference, dropped once the item has run
  int32_t nargs;
};
struct CopyWork {
  void* dst;
  const void* src;
  size_t bytes;
  onrt_copy_kind kind;
};
struct HostFnWork {
  onrt_host_fn fn;
  void* user_data;
};
struct TimestampWork {
  Event* event;  // holds a reference
  uint64_t generation;
};
struct WaitWork {
  Stream* stream;
  uint64_t seq;
};

struct WorkItem {
  WorkKind kind = WorkKind::kHostFn;
  uint64_t seq = 0;  // position in the stream, assigned when queued
  uint64_t correlation = 0;  // profiler correlation id of the queuing thread
  uint64_t call_id = 0;      // the launch or copy call that queued it, while tracing
  union {
    LaunchWork launch;
    CopyWork copy;
    HostFnWork host;
    TimestampWork timestamp;
    WaitWork wait;
  };
  onrt_arg inline_args[kInlineArgs] = {};
  std::unique_ptr<onrt_arg[]> heap_args;
  std::string name;  // host functions only

  WorkItem() : host{nullptr, nullptr} {}
  WorkItem(WorkItem&&) noexcept = default;
  WorkItem& operator=(WorkItem&&) noexcept = default;

  const onrt_arg* args() const { return heap_args ? heap_args.get() : inline_args; }
};

// Growable ring buffer: steady-state pushes and pops reuse the same slots.
class WorkQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  void push(WorkItem&& item);
  WorkItem pop();
  void release_storage();

 private:
  std::vector<WorkItem> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

// Runs the item of `stream` on the calling thread. With `skip` only the
// bookkeeping that others may be waiting on happens (timestamps, references).
// Returns false and fills *error (naming the operation) when the operation failed.
bool execute_item(const Stream& stream, WorkItem& item, bool skip, std::string* error);

}  // namespace openneuron::runtime
