// Recording a compiled graph's first run as one program (compiler/capture.h):
// the hooks the eager path calls while a capture is active on this thread.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <optional>

namespace openneuron::compiler {
class CaptureBuilder;
}

namespace openneuron::bridge {

// The capture recording on this thread, or nullptr (the common case: one
// thread-local load).
compiler::CaptureBuilder* active_capture();
// The eager path did something a program cannot replay (a host read of device
// data, a CPU kernel, random numbers): the active capture, if any, fails with
// `what` and the graph keeps running op by op.
void capture_unsupported(const char* what);
// A random op's seed and offset, reserved from `gen` (std::nullopt: the device's
// default generator) for the launch that follows: a replay reserves again.
void capture_random_draw(const std::optional<at::Generator>& gen, c10::DeviceIndex device,
                         uint64_t increment, uint64_t seed, uint64_t offset);

}  // namespace openneuron::bridge
