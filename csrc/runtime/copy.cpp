// Copies between host memory and device memory (which is host memory too, but
// only reachable through the runtime).
#include "allocator.h"
#include "counters.h"
#include "state.h"
#include "status.h"
#include "stream.h"

using namespace openneuron::runtime;

namespace {

// Catches the common bugs (stale pointer, wrong direction, overrun) at the
// call instead of as silent corruption on the worker.
onrt_status check_device_range(const void* p, size_t bytes, const char* role, const char* what) {
  CachingAllocator* a = CachingAllocator::owner_of(p);
  if (a == nullptr || !a->contains(p, bytes)) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "%s: %s %p (+%zu bytes) is not inside a live neuron allocation", what, role, p,
                 bytes);
  }
  return ONRT_OK;
}

onrt_status prepare_copy(void* dst, const void* src, size_t bytes, onrt_copy_kind kind,
                         onrt_stream_t stream, const char* what, Stream** s, WorkItem* item) {
  ONRT_RETURN_IF_ERROR(get_stream(stream, what, s));
  if (kind != ONRT_COPY_HOST_TO_DEVICE && kind != ONRT_COPY_DEVICE_TO_HOST &&
      kind != ONRT_COPY_DEVICE_TO_DEVICE) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT, "%s: unknown copy kind %d", what,
                 static_cast<int>(kind));
  }
  if (bytes == 0) return ONRT_OK;
  if (dst == nullptr || src == nullptr) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT, "%s: null %s pointer", what,
                 dst == nullptr ? "destination" : "source");
  }
  if (kind != ONRT_COPY_HOST_TO_DEVICE) {
    ONRT_RETURN_IF_ERROR(check_device_range(src, bytes, "source", what));
  }
  if (kind != ONRT_COPY_DEVICE_TO_HOST) {
    ONRT_RETURN_IF_ERROR(check_device_range(dst, bytes, "destination", what));
  }
  item->kind = WorkKind::kCopy;
  item->copy = CopyWork{dst, src, bytes, kind};
  return ONRT_OK;
}

}  // namespace

extern "C" {

onrt_status onrt_memcpy_async(void* dst, const void* src, size_t bytes, onrt_copy_kind kind,
                              onrt_stream_t stream) {
  Stream* s;
  WorkItem item;
  ONRT_RETURN_IF_ERROR(prepare_copy(dst, src, bytes, kind, stream, "onrt_memcpy_async", &s, &item));
  if (bytes == 0) return ONRT_OK;
  bump(counters().copies);
  return s->submit(std::move(item), launch_blocking());
}

onrt_status onrt_memcpy(void* dst, const void* src, size_t bytes, onrt_copy_kind kind,
                        onrt_stream_t stream) {
  Stream* s;
  WorkItem item;
  ONRT_RETURN_IF_ERROR(prepare_copy(dst, src, bytes, kind, stream, "onrt_memcpy", &s, &item));
  if (bytes == 0) return ONRT_OK;
  bump(counters().copies);
  bump(counters().synchronizations);
  // Runs on this thread when the stream is idle: the common .item() case
  // then costs a memcpy, not a round trip through the worker.
  return s->submit(std::move(item), /*blocking=*/true);
}

}  // extern "C"
