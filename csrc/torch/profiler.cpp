// torch.profiler device events for neuron: a Kineto activity profiler
// registered through PyTorch's PrivateUse1 extension point
// (REGISTER_PRIVATEUSE1_PROFILER). With ProfilerActivity.PrivateUse1 active,
// the runtime records every kernel and copy a stream runs, timed by the thread
// that ran it (so intervals are right under asynchronous execution), stamped
// with the correlation id of the ATen op that queued it. At the end of the
// trace the records become Kineto activities on one track per device and
// stream, linked to their CPU op by a flow, so export_chrome_trace and
// key_averages() show them as PyTorch shows CUDA kernels.
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "openneuron/runtime.h"

namespace openneuron::bridge {
namespace {

// Bounded so a forgotten profiler cannot grow without limit (about 200 MB);
// drops are reported in the trace's errors.
constexpr size_t kMaxRecords = 1 << 21;

struct Activity {
  std::string name;
  std::string program;
  onrt_activity_kind kind;
  int32_t device;
  int64_t stream;
  uint64_t correlation;
  uint64_t call_id;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes;
  int32_t thread_id;
};

void keep_activity(const onrt_activity* a, void* user) {
  static_cast<std::vector<Activity>*>(user)->push_back(Activity{
      a->name, a->program, a->kind, a->device, a->stream, a->correlation_id, a->call_id, a->start_ns,
      a->end_ns, a->bytes, a->thread_id});
}

// Kineto draws one process row per device id and one thread row per resource;
// streams of different devices get distinct resource ids.
int32_t resource_id(int32_t device, int64_t stream) {
  return static_cast<int32_t>(device * 1000 + stream);
}

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    if (onrt_trace_enable(ONRT_TRACE_RECORDS, 1, kMaxRecords) != ONRT_OK) {
      errors_.push_back(std::string("neuron: tracing not started: ") + onrt_last_error());
      return;
    }
    enabled_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!enabled_) return;
    onrt_trace_enable(ONRT_TRACE_RECORDS, 0, 0);
    enabled_ = false;
    const uint64_t dropped = onrt_trace_collect(&keep_activity, &records_);
    if (dropped > 0) {
      errors_.push_back("neuron: " + std::to_string(dropped) +
                        " device activities were not recorded (more than " +
                        std::to_string(kMaxRecords) + " in one trace)");
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t window_start,
                    int64_t window_end) override {
    for (const Activity& r : records_) {
      if (window_end > window_start && (r.end_ns < window_start || r.start_ns > window_end)) {
        continue;
      }
      const bool host = r.kind == ONRT_ACTIVITY_RUNTIME;
      const auto type = host                           ? libkineto::ActivityType::PRIVATEUSE1_RUNTIME
                        : r.kind == ONRT_ACTIVITY_COPY ? libkineto::ActivityType::GPU_MEMCPY
                                                       : libkineto::ActivityType::CONCURRENT_KERNEL;
      buffer_.emplace_activity(buffer_.span, type, r.name);
      auto& act = libkineto::CpuTraceBuffer::toRef(buffer_.activities.back());
      act.startTime = r.start_ns;
      act.endTime = r.end_ns;
      // Host calls sit on their thread's row in the process, as CUDA runtime
      // calls do; the flow starts there and ends at the device activity.
      act.device = host ? static_cast<int32_t>(getpid()) : r.device;
      act.resource = host ? r.thread_id : resource_id(r.device, r.stream);
      act.threadId = host ? r.thread_id : 0;
      // As CUDA's: the correlation (and the flow) is the runtime call's own,
      // the op that made the call is the linked activity (its External id).
      act.id = static_cast<int32_t>(r.call_id);
      act.flow.id = static_cast<uint32_t>(r.call_id);
      act.flow.type = libkineto::kLinkAsyncCpuGpu;
      act.flow.start = host;
      if (linked && r.correlation != 0) act.linked = linked(static_cast<int32_t>(r.correlation));
      act.addMetadata("device", r.device);
      act.addMetadata("stream", r.stream);
      act.addMetadata("correlation", r.call_id);
      if (r.kind == ONRT_ACTIVITY_COPY) {
        act.addMetadata("bytes", r.bytes);
      } else if (!r.program.empty()) {
        act.addMetadataQuoted("program", r.program);
      }
      if (!host) resources_.insert({r.device, r.stream});
      act.log(logger);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(0, 0, "neuron", "neuron");
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : resources_) {
      out.push_back(libkineto::ResourceInfo{
          resource_id(device, stream), resource_id(device, stream), device,
          "neuron:" + std::to_string(device) + " stream " + std::to_string(stream)});
    }
    return out;
  }

  // Kineto keeps pointers to the logged activities: it takes the buffer.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  // Called on the thread entering each profiled op; the runtime stamps the id
  // on work that thread queues.
  void pushCorrelationId(uint64_t id) override { onrt_trace_push_correlation(id); }
  void popCorrelationId() override { onrt_trace_pop_correlation(); }

  ~NeuronProfilerSession() override {
    if (enabled_) onrt_trace_enable(ONRT_TRACE_RECORDS, 0, 0);
  }

 private:
  bool enabled_ = false;
  std::vector<Activity> records_;
  std::vector<std::string> errors_;
  std::set<std::pair<int32_t, int64_t>> resources_;
  libkineto::CpuTraceBuffer buffer_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    for (libkineto::ActivityType t : types) {
      if (activities_.count(t)) return std::make_unique<NeuronProfilerSession>();
    }
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                libkineto::ActivityType::GPU_MEMCPY,
                                                libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace openneuron::bridge
