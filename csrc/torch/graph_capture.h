// Recording a compiled graph's first run as one program (compiler/capture.h):
// the hooks the eager path calls while a capture is active on this thread.
#pragma once

#include <cstdint>

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

}  // namespace openneuron::bridge
