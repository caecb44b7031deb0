// Public memory entry points over the per-core caching allocators, including the
// handles of shareable memory (openneuron/ipc.h).
#include "allocator.h"
#include "openneuron/ipc.h"
#include "state.h"
#include "status.h"
#include "stream.h"

using namespace openneuron::runtime;

namespace {

onrt_status allocator_of(int device, CachingAllocator** out) {
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  *out = dev->allocator.get();
  return ONRT_OK;
}

}  // namespace

extern "C" {

onrt_status onrt_malloc(int device, size_t bytes, onrt_stream_t stream, void** ptr) {
  if (ptr == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_malloc: ptr is NULL");
  *ptr = nullptr;
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  Stream* s = dev->default_stream;
  if (stream != nullptr) {
    ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_malloc", &s));
    if (s->device() != device) {
      return failf(ONRT_ERROR_INVALID_ARGUMENT,
                   "onrt_malloc: allocating on neuron:%d with a stream of neuron:%d", device,
                   s->device());
    }
  }
  return dev->allocator->malloc(bytes, s, ptr);
}

onrt_status onrt_free(void* ptr) {
  if (ptr == nullptr) return ONRT_OK;
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  CachingAllocator* a = CachingAllocator::owner_of(ptr);
  if (a == nullptr) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_free: %p was not allocated by the neuron runtime", ptr);
  }
  return a->free(ptr);
}

onrt_status onrt_record_stream(void* ptr, onrt_stream_t stream) {
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_record_stream", &s));
  CachingAllocator* a = CachingAllocator::owner_of(ptr);
  if (a == nullptr) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_record_stream: %p was not allocated by the neuron runtime", ptr);
  }
  return a->record_stream(ptr, s);
}

onrt_status onrt_pointer_get_device(const void* ptr, int* device) {
  if (device == nullptr) {
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_pointer_get_device: device is NULL");
  }
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  CachingAllocator* a = CachingAllocator::owner_of(ptr);
  if (a == nullptr || !a->contains(ptr, 1)) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_pointer_get_device: %p is not inside a live neuron allocation", ptr);
  }
  *device = a->device();
  return ONRT_OK;
}

onrt_status onrt_empty_cache(int device) {
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  a->empty_cache();
  return ONRT_OK;
}

onrt_status onrt_memory_get_stats(int device, onrt_memory_stats* out) {
  if (out == nullptr)
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_memory_get_stats: out is NULL");
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  *out = a->stats();
  return ONRT_OK;
}

void onrt_memory_set_observer(onrt_memory_observer fn, void* user) {
  openneuron::runtime::set_memory_observer(fn, user);
}

onrt_status onrt_memory_snapshot(int device, onrt_segment_visitor visit, void* user) {
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  std::vector<std::vector<onrt_block_info>> blocks;
  std::vector<onrt_segment_info> segments = a->snapshot(&blocks);
  for (size_t i = 0; i < segments.size(); ++i) {
    segments[i].blocks = blocks[i].data();
    segments[i].num_blocks = blocks[i].size();
    if (visit) visit(&segments[i], user);
  }
  return ONRT_OK;
}

onrt_status onrt_memory_reset_peak(int device) {
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  a->reset_peak();
  return ONRT_OK;
}

onrt_status onrt_memory_reset_accumulated(int device) {
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  a->reset_accumulated();
  return ONRT_OK;
}

onrt_status onrt_memory_get_info(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_memory_get_info: output pointer is NULL");
  }
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  const uint64_t reserved = a->reserved();
  *total_bytes = a->capacity();
  *free_bytes = a->capacity() > reserved ? a->capacity() - reserved : 0;
  return ONRT_OK;
}

onrt_status onrt_ipc_enable(int device) {
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  if (runtime().config.sharing == SharingMode::kOff) {
    return fail(ONRT_ERROR_UNSUPPORTED,
                "shareable device memory is off (OPENNEURON_SHAREABLE_MEMORY=off)");
  }
  return a->enable_ipc();
}

onrt_status onrt_ipc_range_handle(int device, onrt_ipc_handle* out) {
  if (out == nullptr)
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_ipc_range_handle: out is NULL");
  CachingAllocator* a;
  ONRT_RETURN_IF_ERROR(onrt_ipc_enable(device));
  ONRT_RETURN_IF_ERROR(allocator_of(device, &a));
  a->ipc_handle(nullptr, out);
  return ONRT_OK;
}

onrt_status onrt_ipc_get_handle(const void* ptr, onrt_ipc_handle* out) {
  if (out == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_ipc_get_handle: out is NULL");
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  CachingAllocator* a = CachingAllocator::owner_of(ptr);
  if (a == nullptr || !a->ipc_handle(ptr, out)) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_ipc_get_handle: %p is not in shareable device memory", ptr);
  }
  return ONRT_OK;
}

}  // extern "C"
