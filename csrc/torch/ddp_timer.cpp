// DistributedDataParallel's timer for neuron (c10d's TimerRegistry): the
// forward, backward-compute and communication times of DDP's logging data
// (`_get_ddp_logging_data()`, TORCH_DISTRIBUTED_DEBUG) come from timing events
// on the device stream, as CUDA's timer does. Without one DDP warns once per
// model that time stats are collected for CPU and CUDA only.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <array>
#include <optional>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace {

class NeuronTimer final : public c10d::Timer {
 public:
  explicit NeuronTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    Timer::record(event);  // the host time, which DDP also reads
    const c10::impl::VirtualGuardImpl guard(device_.type());
    event_of(event).record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& from = event_of(start);
    c10::Event& to = event_of(end);
    // Events of a phase that did not run (no backward, no_sync) were never recorded.
    if (!from.was_marked_for_recording() || !to.was_marked_for_recording()) return std::nullopt;
    // DDP asks at the start of a forward, when the last iteration's work is done.
    from.synchronize();
    to.synchronize();
    const double ms = from.elapsedTime(to);
    // An end recorded before its start (a phase skipped this iteration) says nothing.
    if (ms < 0) return std::nullopt;
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  c10::Event& event_of(Event event) { return events_.at(static_cast<size_t>(event)); }

  c10::Device device_;
  std::array<c10::Event, 5> events_{
      c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT)};
};

}  // namespace

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, NeuronTimer);
}  // namespace c10d
