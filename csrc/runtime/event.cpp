// Events (event.h) and the onrt_event_* / onrt_stream_wait_event entry points.
#include "event.h"

#include "counters.h"
#include "state.h"
#include "status.h"
#include "stream.h"

namespace openneuron::runtime {

void Event::record(Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  has_time_ = false;
  stream_ = stream;
  if (!timing()) {
    // Completion is just "the worker passed this position": no queue item needed.
    seq_ = stream->enqueued();
    return;
  }
  WorkItem item;
  item.kind = WorkKind::kTimestamp;
  item.timestamp = TimestampWork{this, generation_};
  retain();
  // The worker's stamp() takes mu_, so it simply waits until seq_ is set.
  seq_ = stream->push(std::move(item));
}

void Event::position(Stream** stream, uint64_t* seq) {
  std::lock_guard<std::mutex> lock(mu_);
  *stream = stream_;
  *seq = seq_;
}

bool Event::complete() {
  Stream* s;
  uint64_t seq;
  position(&s, &seq);
  return s == nullptr || s->reached(seq);
}

onrt_status Event::synchronize() {
  Stream* s;
  uint64_t seq;
  position(&s, &seq);
  return s != nullptr ? s->wait_until(seq, Stream::Waiter::kCaller) : ONRT_OK;
}

void Event::stamp(uint64_t generation) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (generation != generation_) return;  // re-recorded since; that record stamps
  time_ = now;
  has_time_ = true;
}

bool Event::timestamp(std::chrono::steady_clock::time_point* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_time_) return false;
  *out = time_;
  return true;
}

}  // namespace openneuron::runtime

using namespace openneuron::runtime;

namespace {

onrt_status check_event(onrt_event_t e, const char* what) {
  if (e == nullptr || !to_event(e)->valid()) {
    return failf(ONRT_ERROR_INVALID_HANDLE, "%s: invalid or destroyed event handle", what);
  }
  return ONRT_OK;
}

}  // namespace

extern "C" {

onrt_status onrt_event_create(unsigned flags, onrt_event_t* out) {
  if (out == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_event_create: out is NULL");
  if ((flags & ~static_cast<unsigned>(ONRT_EVENT_TIMING)) != 0) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT, "onrt_event_create: unknown flags 0x%x", flags);
  }
  *out = reinterpret_cast<onrt_event_t>(new Event(flags));
  return ONRT_OK;
}

onrt_status onrt_event_destroy(onrt_event_t event) {
  ONRT_RETURN_IF_ERROR(check_event(event, "onrt_event_destroy"));
  to_event(event)->release();
  return ONRT_OK;
}

onrt_status onrt_event_record(onrt_event_t event, onrt_stream_t stream) {
  ONRT_RETURN_IF_ERROR(check_event(event, "onrt_event_record"));
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_event_record", &s));
  to_event(event)->record(s);
  return ONRT_OK;
}

onrt_status onrt_stream_wait_event(onrt_stream_t stream, onrt_event_t event) {
  ONRT_RETURN_IF_ERROR(check_event(event, "onrt_stream_wait_event"));
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_stream_wait_event", &s));
  Stream* target;
  uint64_t seq;
  to_event(event)->position(&target, &seq);
  // Already complete (or never recorded): nothing to order against.
  if (target == nullptr || target->reached(seq)) return ONRT_OK;
  WorkItem item;
  item.kind = WorkKind::kWait;
  item.wait = WaitWork{target, seq};
  s->push(std::move(item));
  return ONRT_OK;
}

onrt_status onrt_event_query(onrt_event_t event) {
  ONRT_RETURN_IF_ERROR(check_event(event, "onrt_event_query"));
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  return to_event(event)->complete() ? ONRT_OK : ONRT_ERROR_NOT_READY;
}

onrt_status onrt_event_synchronize(onrt_event_t event) {
  ONRT_RETURN_IF_ERROR(check_event(event, "onrt_event_synchronize"));
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  bump(counters().synchronizations);
  return to_event(event)->synchronize();
}

onrt_status onrt_event_elapsed_ms(onrt_event_t start, onrt_event_t end, float* ms) {
  ONRT_RETURN_IF_ERROR(check_event(start, "onrt_event_elapsed_ms"));
  ONRT_RETURN_IF_ERROR(check_event(end, "onrt_event_elapsed_ms"));
  if (ms == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_event_elapsed_ms: ms is NULL");
  ONRT_RETURN_IF_ERROR(ensure_runtime());
  Event* events[2] = {to_event(start), to_event(end)};
  const char* names[2] = {"start", "end"};
  std::chrono::steady_clock::time_point times[2];
  for (int i = 0; i < 2; ++i) {
    if (!events[i]->timing()) {
      return failf(ONRT_ERROR_INVALID_ARGUMENT,
                   "onrt_event_elapsed_ms: the %s event was created without ONRT_EVENT_TIMING",
                   names[i]);
    }
    Stream* s;
    uint64_t seq;
    events[i]->position(&s, &seq);
    if (s == nullptr) {
      return failf(ONRT_ERROR_INVALID_ARGUMENT,
                   "onrt_event_elapsed_ms: the %s event was never recorded", names[i]);
    }
    if (!events[i]->complete() || !events[i]->timestamp(&times[i])) {
      return failf(ONRT_ERROR_NOT_READY,
                   "onrt_event_elapsed_ms: the %s event has not completed yet; synchronize it "
                   "first",
                   names[i]);
    }
  }
  *ms = std::chrono::duration<float, std::milli>(times[1] - times[0]).count();
  return ONRT_OK;
}

}  // extern "C"
