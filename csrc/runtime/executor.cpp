// What a worker does with one queue item. Shared by the worker threads and by
// the inline (idle stream / launch-blocking) path so both behave identically.
#include <cstring>

#include "dma.h"
#include "event.h"
#include "program.h"
#include "protect.h"
#include "status.h"
#include "stream.h"
#include "trace.h"
#include "work_item.h"

namespace openneuron::runtime {
namespace {

const char* copy_kind_name(onrt_copy_kind kind) {
  switch (kind) {
    case ONRT_COPY_HOST_TO_DEVICE:
      return "host-to-device";
    case ONRT_COPY_DEVICE_TO_HOST:
      return "device-to-host";
    case ONRT_COPY_DEVICE_TO_DEVICE:
      return "device-to-device";
  }
  return "unknown";
}

}  // namespace

bool execute_item(const Stream& stream, WorkItem& item, bool skip, std::string* error) {
  const DeviceAccess access;  // runtime work: device memory is open to this thread
  switch (item.kind) {
    case WorkKind::kProgram: {
      Program* p = item.launch.program;
      item.launch.program = nullptr;
      bool ok = true;
      if (!skip) {
        const bool totals = tracing_totals();
        const ActivitySite site{stream.device(), stream.id(), item.correlation, item.call_id};
        const int64_t start = totals ? trace_now_ns() : 0;
        ok = p->run(item.args(), error, tracing_records() ? &site : nullptr);
        if (totals) add_total(p->name(), trace_now_ns() - start);
      }
      p->release();
      return ok;
    }
    case WorkKind::kCopy: {
      if (skip) return true;
      const CopyWork& c = item.copy;
      if (c.dst == nullptr || c.src == nullptr) {
        *error = strprintf("memcpy %s: null pointer (dst=%p, src=%p, %zu bytes)",
                           copy_kind_name(c.kind), c.dst, c.src, c.bytes);
        return false;
      }
      const bool traced = tracing_records() || tracing_totals();
      const int64_t start = traced ? trace_now_ns() : 0;
      dma_copy(c.dst, c.src, c.bytes);
      if (traced) {
        const std::string name = std::string("memcpy ") + copy_kind_name(c.kind);
        const int64_t end = trace_now_ns();
        record_activity(ActivitySite{stream.device(), stream.id(), item.correlation, item.call_id},
                        ONRT_ACTIVITY_COPY, name, "", start, end, c.bytes);
        add_total(name, end - start);
      }
      return true;
    }
    case WorkKind::kHostFn: {
      if (skip) return true;
      char err[512];
      err[0] = '\0';
      int rc = item.host.fn(item.host.user_data, err, sizeof err);
      if (rc == 0) return true;
      err[sizeof err - 1] = '\0';
      *error = item.name + ": " + (err[0] ? std::string(err) : strprintf("returned %d", rc));
      return false;
    }
    case WorkKind::kTimestamp: {
      // Never skipped: whoever waits on or times this event must not hang.
      Event* e = item.timestamp.event;
      item.timestamp.event = nullptr;
      e->stamp(item.timestamp.generation);
      e->release();
      return true;
    }
    case WorkKind::kWait:
      if (!skip) item.wait.stream->wait_until(item.wait.seq);
      return true;
  }
  return true;
}

}  // namespace openneuron::runtime
