// The neuron device allocator: PyTorch's view of the runtime's per-core caching
// allocator. Registered for PrivateUse1 so that tensors, storages and
// torch.accelerator.memory_* all reach the runtime.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include "bridge.h"
#include "graph_capture.h"
#include "openneuron/compiler/capture.h"

namespace openneuron::bridge {
namespace {

void free_block(void* ptr) {
  if (compiler::CaptureBuilder* capture = active_capture()) capture->on_free(ptr);
  MemoryContextScope context;
  // Deleters must not throw; a failed free can only mean a corrupted pointer.
  if (onrt_free(ptr) != ONRT_OK) {
    TORCH_WARN("neuron: freeing ", ptr, " failed: ", onrt_last_error());
  }
}

c10::CachingDeviceAllocator::Stat to_stat(const onrt_stat& s) {
  c10::CachingDeviceAllocator::Stat out;
  out.current = s.current;
  out.peak = s.peak;
  out.allocated = s.allocated;
  out.freed = s.freed;
  return out;
}

void to_stat_array(const onrt_stat (&in)[ONRT_POOL_COUNT],
                   c10::CachingDeviceAllocator::StatArray& out) {
  // Both use the order aggregate, small pool, large pool.
  for (int i = 0; i < ONRT_POOL_COUNT; ++i) out[i] = to_stat(in[i]);
}

class NeuronAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    ensure_initialized();
    const c10::DeviceIndex dev = current_device();
    void* ptr = nullptr;
    if (nbytes > 0) {
      MemoryContextScope context;
      ONRT_CHECK(onrt_malloc(dev, nbytes, current_runtime_stream(dev), &ptr));
      if (compiler::CaptureBuilder* capture = active_capture()) capture->on_alloc(ptr, nbytes);
    }
    return {ptr, ptr, &free_block, c10::Device(c10::DeviceType::PrivateUse1, dev)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    capture_unsupported("a storage copy");
    ONRT_CHECK(onrt_memcpy(dest, src, count, ONRT_COPY_DEVICE_TO_DEVICE,
                           current_runtime_stream(current_device())));
  }

  bool initialized() override { return onrt_is_initialized(); }

  void emptyCache(c10::MempoolId_t) override {
    if (!onrt_is_initialized()) return;
    for (int d = 0; d < device_count(); ++d) ONRT_CHECK(onrt_empty_cache(d));
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get()) ONRT_CHECK(onrt_record_stream(ptr.get(), runtime_stream(stream)));
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    c10::CachingDeviceAllocator::DeviceStats out;
    if (!onrt_is_initialized()) return out;  // nothing allocated yet
    onrt_memory_stats s{};
    ONRT_CHECK(onrt_memory_get_stats(device, &s));
    to_stat_array(s.allocation, out.allocation);
    to_stat_array(s.segment, out.segment);
    to_stat_array(s.active, out.active);
    to_stat_array(s.inactive_split, out.inactive_split);
    to_stat_array(s.allocated_bytes, out.allocated_bytes);
    to_stat_array(s.reserved_bytes, out.reserved_bytes);
    to_stat_array(s.active_bytes, out.active_bytes);
    to_stat_array(s.inactive_split_bytes, out.inactive_split_bytes);
    to_stat_array(s.requested_bytes, out.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    out.max_split_size = s.max_split_size;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    if (onrt_is_initialized()) ONRT_CHECK(onrt_memory_reset_accumulated(device));
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    if (onrt_is_initialized()) ONRT_CHECK(onrt_memory_reset_peak(device));
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    ensure_initialized();
    uint64_t free_bytes = 0, total = 0;
    ONRT_CHECK(onrt_memory_get_info(device, &free_bytes, &total));
    return {free_bytes, total};
  }
};

NeuronAllocator allocator;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

}  // namespace openneuron::bridge
