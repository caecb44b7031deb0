// Device activity tracing (trace.h). Two independent users may be active at
// once: a profiler session keeping every record, and a report keeping only
// per-program totals. Records and totals are appended under one mutex: an
// activity is a kernel or a copy, microseconds at least, so one uncontended
// lock per activity is small beside it.
#include "trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "status.h"

namespace openneuron::runtime {
namespace trace_detail {
std::atomic<bool> records{false};
std::atomic<bool> totals{false};
}

namespace {

struct Record {
  std::string name;
  std::string program;
  onrt_activity_kind kind;
  ActivitySite site;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;
};

struct Total {
  int64_t count = 0;
  int64_t ns = 0;
};

struct Tracer {
  std::mutex mu;
  int record_users = 0;
  int total_users = 0;
  size_t max_records = 0;
  uint64_t dropped = 0;
  std::vector<Record> records;
  std::map<std::string, Total> totals;  // by program name, or copy direction
};

Tracer& tracer() {
  static Tracer* t = new Tracer();  // outlives worker threads at exit
  return *t;
}

thread_local std::vector<uint64_t> correlation_stack;

void update_users(const Tracer& t) {
  trace_detail::records.store(t.record_users > 0, std::memory_order_relaxed);
  trace_detail::totals.store(t.total_users > 0, std::memory_order_relaxed);
}

}  // namespace

uint64_t current_correlation() {
  return correlation_stack.empty() ? 0 : correlation_stack.back();
}

int64_t trace_now_ns() {
  // The realtime clock: PyTorch's profiler stamps host events on it too.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void record_activity(const ActivitySite& site, onrt_activity_kind kind, const std::string& name,
                     const std::string& program, int64_t start_ns, int64_t end_ns, uint64_t bytes) {
  Tracer& t = tracer();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.record_users == 0) return;
  if (t.records.size() >= t.max_records) {
    ++t.dropped;
    return;
  }
  t.records.push_back(Record{name, program, kind, site, start_ns, end_ns, bytes});
}

uint64_t next_call_id() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

RuntimeCallScope::RuntimeCallScope(const char* name, std::string program, int device,
                                   int64_t stream, uint64_t call_id)
    : name_(name),
      program_(std::move(program)),
      site_{device, stream, current_correlation(), call_id,
            static_cast<int32_t>(syscall(SYS_gettid))},
      start_ns_(trace_now_ns()) {}

RuntimeCallScope::~RuntimeCallScope() {
  record_activity(site_, ONRT_ACTIVITY_RUNTIME, name_, program_, start_ns_, trace_now_ns(), 0);
}

void add_total(const std::string& name, int64_t ns) {
  Tracer& t = tracer();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.total_users == 0) return;
  Total& tot = t.totals[name];
  tot.count += 1;
  tot.ns += ns;
}

}  // namespace openneuron::runtime

using namespace openneuron::runtime;

extern "C" onrt_status onrt_trace_enable(unsigned what, int enable, size_t max_records) {
  if (what != ONRT_TRACE_RECORDS && what != ONRT_TRACE_TOTALS) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT, "onrt_trace_enable: unknown trace kind %u", what);
  }
  Tracer& t = tracer();
  std::lock_guard<std::mutex> lock(t.mu);
  int& n = what == ONRT_TRACE_RECORDS ? t.record_users : t.total_users;
  if (enable) {
    if (what == ONRT_TRACE_RECORDS) {
      if (n == 0) {
        t.records.clear();
        t.dropped = 0;
      }
      t.max_records = max_records == 0 ? SIZE_MAX : max_records;
    } else if (n == 0) {
      t.totals.clear();
    }
    ++n;
  } else if (n > 0) {
    --n;
  }
  update_users(t);
  return ONRT_OK;
}

extern "C" void onrt_trace_push_correlation(uint64_t id) { correlation_stack.push_back(id); }

extern "C" void onrt_trace_pop_correlation(void) {
  if (!correlation_stack.empty()) correlation_stack.pop_back();
}

extern "C" uint64_t onrt_trace_collect(onrt_activity_visitor visit, void* user) {
  std::vector<Record> records;
  uint64_t dropped;
  {
    Tracer& t = tracer();
    std::lock_guard<std::mutex> lock(t.mu);
    records.swap(t.records);
    dropped = t.dropped;
    t.dropped = 0;
  }
  for (const Record& r : records) {
    onrt_activity a{};
    a.name = r.name.c_str();
    a.program = r.program.c_str();
    a.kind = r.kind;
    a.device = r.site.device;
    a.stream = r.site.stream;
    a.correlation_id = r.site.correlation;
    a.call_id = r.site.call_id;
    a.start_ns = r.start_ns;
    a.end_ns = r.end_ns;
    a.bytes = r.bytes;
    a.thread_id = r.site.thread_id;
    if (visit) visit(&a, user);
  }
  return dropped;
}

extern "C" void onrt_trace_totals(onrt_total_visitor visit, void* user) {
  std::map<std::string, Total> totals;
  {
    Tracer& t = tracer();
    std::lock_guard<std::mutex> lock(t.mu);
    totals = t.totals;
  }
  for (const auto& [name, tot] : totals) {
    if (visit) visit(name.c_str(), tot.count, tot.ns, user);
  }
}
