// onrt_program_launch: the hot path from the Python thread. Validation is a
// couple of compares; arguments are copied into the queue item itself.
#include <algorithm>
#include <cstring>

#include "counters.h"
#include "program.h"
#include "state.h"
#include "status.h"
#include "stream.h"

using namespace openneuron::runtime;

namespace {

onrt_status report_missing_args(const Program& p, int32_t nargs) {
  for (const Instruction& ins : p.instructions()) {
    for (size_t k = 0; k < ins.slots.size(); ++k) {
      if (ins.slots[k] >= nargs) {
        return failf(ONRT_ERROR_INVALID_ARGUMENT,
                     "program '%s', instruction '%s': argument %zu uses launch slot %d but only "
                     "%d arguments were passed",
                     p.name().c_str(), ins.name.c_str(), k, ins.slots[k], nargs);
      }
    }
  }
  return fail(ONRT_ERROR_INVALID_ARGUMENT, "program '" + p.name() + "': too few arguments");
}

}  // namespace

extern "C" onrt_status onrt_program_launch(onrt_stream_t stream, onrt_program_t program,
                                           const onrt_arg* args, int32_t nargs) {
  Stream* s;
  ONRT_RETURN_IF_ERROR(get_stream(stream, "onrt_program_launch", &s));
  Program* p = to_program(program);
  if (p == nullptr || !p->valid()) {
    return fail(ONRT_ERROR_INVALID_HANDLE, "onrt_program_launch: invalid program handle");
  }
  if (nargs < 0 || (nargs > 0 && args == nullptr)) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "onrt_program_launch: program '%s' launched with %d arguments at %p",
                 p->name().c_str(), nargs, static_cast<const void*>(args));
  }
  if (nargs < p->min_args()) return report_missing_args(*p, nargs);

  WorkItem item;
  item.kind = WorkKind::kProgram;
  item.launch = LaunchWork{p, nargs};
  if (nargs > kInlineArgs) {
    item.heap_args.reset(new onrt_arg[nargs]);
    std::memcpy(item.heap_args.get(), args, sizeof(onrt_arg) * nargs);
  } else if (nargs > 0) {
    std::memcpy(item.inline_args, args, sizeof(onrt_arg) * nargs);
  }
  p->mark_launched();
  p->retain();
  bump(counters().launches);
  return s->submit(std::move(item), launch_blocking());
}
