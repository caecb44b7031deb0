// Public stream entry points: creation, lookup by id, synchronisation.
#include "counters.h"
#include "state.h"
#include "status.h"
#include "stream.h"

using namespace openneuron::runtime;

extern "C" {

onrt_status onrt_stream_get_default(int device, onrt_stream_t* out) {
  if (out == nullptr) {
    return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_stream_get_default: out is NULL");
  }
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  *out = to_handle(dev->default_stream);
  return ONRT_OK;
}

onrt_status onrt_stream_create(int device, int priority, onrt_stream_t* out) {
  if (out == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_stream_create: out is NULL");
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  std::lock_guard<std::mutex> lock(dev->streams_mu);
  const auto id = static_cast<int64_t>(dev->streams.size());
  dev->streams.push_back(std::make_unique<Stream>(device, id, priority));
  *out = to_handle(dev->streams.back().get());
  return ONRT_OK;
}

onrt_status onrt_stream_destroy(onrt_stream_t stream) {
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_stream_destroy", &s));
  // The default stream lives for the process, as documented; destroying it is
  // a harmless no-op rather than a trap for bridge code.
  if (s->id() == 0) return ONRT_OK;
  s->destroy();
  return ONRT_OK;
}

onrt_status onrt_stream_synchronize(onrt_stream_t stream) {
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_stream_synchronize", &s));
  bump(counters().synchronizations);
  return s->synchronize();
}

onrt_status onrt_stream_query(onrt_stream_t stream) {
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_stream_query", &s));
  return s->query();
}

int onrt_stream_device(onrt_stream_t stream) {
  Stream* s = to_stream(stream);
  return s != nullptr && s->valid() ? s->device() : -1;
}

int64_t onrt_stream_id(onrt_stream_t stream) {
  Stream* s = to_stream(stream);
  return s != nullptr && s->valid() ? s->id() : -1;
}

onrt_status onrt_stream_from_id(int device, int64_t id, onrt_stream_t* out) {
  if (out == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_stream_from_id: out is NULL");
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  std::lock_guard<std::mutex> lock(dev->streams_mu);
  if (id < 0 || id >= static_cast<int64_t>(dev->streams.size()) || !dev->streams[id]->valid()) {
    return failf(ONRT_ERROR_INVALID_HANDLE, "neuron:%d has no stream with id %lld", device,
                 static_cast<long long>(id));
  }
  *out = to_handle(dev->streams[id].get());
  return ONRT_OK;
}

onrt_status onrt_launch_host_fn(onrt_stream_t stream, const char* name, onrt_host_fn fn,
                                void* user_data) {
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_launch_host_fn", &s));
  if (fn == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_launch_host_fn: fn is NULL");
  WorkItem item;
  item.kind = WorkKind::kHostFn;
  item.host = HostFnWork{fn, user_data};
  item.name = name != nullptr && name[0] != '\0' ? name : "host function";
  return s->submit(std::move(item), launch_blocking());
}

onrt_status onrt_device_synchronize(int device) {
  Device* dev;
  ONRT_RETURN_IF_ERROR(get_device(device, &dev));
  bump(counters().synchronizations);
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(dev->streams_mu);
    for (auto& s : dev->streams) {
      if (s->valid()) streams.push_back(s.get());
    }
  }
  onrt_status first = ONRT_OK;
  std::string first_message;
  for (Stream* s : streams) {
    onrt_status st = s->synchronize();
    // The wait itself ended: the other streams are not waited for either.
    if (st == ONRT_ERROR_INTERRUPTED || st == ONRT_ERROR_TIMEOUT) return st;
    if (st != ONRT_OK && first == ONRT_OK) {
      first = st;
      first_message = last_error_cstr();
    }
  }
  return first == ONRT_OK ? ONRT_OK : fail(first, std::move(first_message));
}

}  // extern "C"
