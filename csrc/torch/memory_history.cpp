// Device memory as PyTorch's tools see it: allocations reported to
// torch.profiler (profile_memory=True), and the memory history behind
// torch.neuron.memory._record_memory_history() / _snapshot(), in the structure
// of torch.cuda.memory._snapshot() so torch.cuda._memory_viz renders it.
//
// The runtime allocator tells one observer about every allocation, free and
// segment change, under its lock. Python stacks cannot be gathered there (that
// may need the GIL, which another thread could hold while it waits for the
// allocator), so the allocator front end (allocator.cpp) gathers the stack
// before calling the runtime and leaves it in a thread-local slot that the
// observer, running on the same thread, picks up.
#include <c10/core/Allocator.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bridge.h"
#include "python_frames.h"

namespace py = pybind11;

namespace openneuron::bridge {
namespace {

using Traceback = std::shared_ptr<torch::CapturedTraceback>;

struct Entry {
  onrt_memory_action action;
  int device;
  uintptr_t address;
  size_t size;
  size_t requested;
  int64_t stream;
  int64_t time_us;
  Traceback frames;
};

struct History {
  std::mutex mu;
  bool recording = false;
  size_t max_entries = 0;
  std::deque<Entry> entries;
  // Stacks of the live allocations, for the blocks of a snapshot.
  std::map<std::pair<int, uintptr_t>, Traceback> live;
};

History& history() {
  static History* h = new History();  // used by frees during interpreter exit
  return *h;
}

std::atomic<bool> recording{false};
thread_local Traceback pending_context;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void observe(const onrt_memory_event* e, void*) {
  // torch.profiler's memory events are thread-local to the profiled thread,
  // which is the thread that allocates or frees.
  if (e->action == ONRT_MEMORY_ALLOC || e->action == ONRT_MEMORY_FREE_REQUESTED) {
    const int64_t delta = static_cast<int64_t>(e->size);
    c10::reportMemoryUsageToProfiler(
        reinterpret_cast<void*>(e->address), e->action == ONRT_MEMORY_ALLOC ? delta : -delta,
        static_cast<size_t>(e->allocated_bytes), static_cast<size_t>(e->reserved_bytes),
        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(e->device)));
  }
  if (!recording.load(std::memory_order_relaxed)) return;
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.recording) return;
  Traceback frames;
  if (e->action == ONRT_MEMORY_ALLOC || e->action == ONRT_MEMORY_FREE_REQUESTED ||
      e->action == ONRT_MEMORY_SEGMENT_ALLOC) {
    frames = pending_context;
  }
  const auto key = std::make_pair(static_cast<int>(e->device), e->address);
  if (e->action == ONRT_MEMORY_ALLOC) h.live[key] = frames;
  if (e->action == ONRT_MEMORY_FREE_REQUESTED) h.live.erase(key);
  h.entries.push_back(Entry{e->action, e->device, e->address, e->size, e->requested, e->stream,
                            now_us(), std::move(frames)});
  while (h.entries.size() > h.max_entries) h.entries.pop_front();
}

const char* action_name(onrt_memory_action a) {
  switch (a) {
    case ONRT_MEMORY_ALLOC:
      return "alloc";
    case ONRT_MEMORY_FREE_REQUESTED:
      return "free_requested";
    case ONRT_MEMORY_FREE_COMPLETED:
      return "free_completed";
    case ONRT_MEMORY_SEGMENT_ALLOC:
      return "segment_alloc";
    case ONRT_MEMORY_SEGMENT_FREE:
      return "segment_free";
  }
  return "unknown";
}

const char* block_state(onrt_block_state s) {
  switch (s) {
    case ONRT_BLOCK_ALLOCATED:
      return "active_allocated";
    case ONRT_BLOCK_PENDING_FREE:
      return "active_pending_free";
    case ONRT_BLOCK_FREE:
      return "inactive";
  }
  return "inactive";
}

struct SegmentCopy {
  onrt_segment_info info;
  std::vector<onrt_block_info> blocks;
};

void keep_segment(const onrt_segment_info* s, void* user) {
  static_cast<std::vector<SegmentCopy>*>(user)->push_back(
      SegmentCopy{*s, std::vector<onrt_block_info>(s->blocks, s->blocks + s->num_blocks)});
}

py::dict snapshot() {
  const int devices = onrt_is_initialized() ? device_count() : 0;
  std::vector<std::vector<SegmentCopy>> segments(devices);
  for (int d = 0; d < devices; ++d)
    ONRT_CHECK(onrt_memory_snapshot(d, &keep_segment, &segments[d]));
  std::vector<Entry> entries;
  std::map<std::pair<int, uintptr_t>, Traceback> live;
  {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mu);
    entries.assign(h.entries.begin(), h.entries.end());
    live = h.live;
  }
  PythonFrames frames;
  std::vector<size_t> entry_frames;
  for (const Entry& e : entries) entry_frames.push_back(frames.add(e.frames));
  std::map<std::pair<int, uintptr_t>, size_t> block_frames;
  for (const auto& [key, tb] : live) block_frames[key] = frames.add(tb);
  frames.symbolize();

  py::list segment_list;
  for (int d = 0; d < devices; ++d) {
    for (const SegmentCopy& s : segments[d]) {
      py::list blocks;
      size_t allocated = 0, active = 0, requested = 0;
      for (const onrt_block_info& b : s.blocks) {
        py::dict block;
        block["address"] = b.address;
        block["size"] = b.size;
        block["requested_size"] = b.requested;
        block["state"] = block_state(b.state);
        auto it = block_frames.find({d, b.address});
        block["frames"] = b.state != ONRT_BLOCK_FREE && it != block_frames.end()
                              ? frames.get(it->second)
                              : py::list();
        blocks.append(block);
        if (b.state == ONRT_BLOCK_ALLOCATED) allocated += b.size;
        if (b.state != ONRT_BLOCK_FREE) {
          active += b.size;
          requested += b.requested;
        }
      }
      py::dict seg;
      seg["device"] = d;
      seg["address"] = s.info.address;
      seg["total_size"] = s.info.size;
      seg["allocated_size"] = allocated;
      seg["active_size"] = active;
      seg["requested_size"] = requested;
      seg["stream"] = s.info.stream;
      seg["segment_type"] = s.info.pool == ONRT_POOL_SMALL ? "small" : "large";
      seg["segment_pool_id"] = py::make_tuple(0, 0);
      seg["is_expandable"] = false;
      seg["frames"] = py::list();
      seg["blocks"] = blocks;
      segment_list.append(seg);
    }
  }
  std::vector<py::list> traces(std::max(devices, 1));
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    py::dict t;
    t["action"] = action_name(e.action);
    t["addr"] = e.address;
    t["size"] = e.size;
    t["requested_size"] = e.requested;
    t["stream"] = e.stream;
    t["time_us"] = e.time_us;
    t["frames"] = frames.get(entry_frames[i]);
    if (e.device >= 0 && static_cast<size_t>(e.device) < traces.size()) traces[e.device].append(t);
  }
  py::dict out;
  out["segments"] = segment_list;
  out["device_traces"] = py::cast(traces);
  py::dict settings;
  settings["PYTORCH_NEURON_ALLOC_CONF"] = "";
  out["allocator_settings"] = settings;
  return out;
}

void record_history(bool enabled, size_t max_entries) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  h.recording = enabled;
  h.max_entries = max_entries;
  if (!enabled) {
    h.entries.clear();
    h.live.clear();
  }
  while (h.entries.size() > h.max_entries) h.entries.pop_front();
  recording.store(enabled, std::memory_order_relaxed);
}

// Installed at load: the observer also feeds torch.profiler's memory events.
const bool observer_installed = [] {
  onrt_memory_set_observer(&observe, nullptr);
  return true;
}();

}  // namespace

MemoryContextScope::MemoryContextScope() {
  if (!recording.load(std::memory_order_relaxed)) return;
  pending_context = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false,
                                                     /*cpp=*/false);
  active_ = true;
}

MemoryContextScope::~MemoryContextScope() {
  if (active_) pending_context.reset();
}

void bind_memory_history(py::module_& m) {
  m.def("_memory_record_history", &record_history, py::arg("enabled"), py::arg("max_entries"));
  m.def("_memory_snapshot", &snapshot);
}

}  // namespace openneuron::bridge
