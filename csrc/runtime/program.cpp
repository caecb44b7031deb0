// Programs (program.h): instruction lists, their host execution, and the
// onrt_program_* entry points that build and release them.
#include "program.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "contention.h"
#include "counters.h"
#include "status.h"

namespace openneuron::runtime {

void AlignedDelete::operator()(void* p) const {
  ::operator delete(p, std::align_val_t(Program::kParamAlignment));
}

onrt_status Program::add_instruction(const char* name, onrt_kernel_fn fn, const void* params,
                                     size_t params_size, const int32_t* slots, int32_t num_slots) {
  const char* iname = name ? name : "";
  if (launched_.load(std::memory_order_relaxed)) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "program '%s': cannot add instruction '%s' after the program was launched",
                 name_.c_str(), iname);
  }
  if (fn == nullptr) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT, "program '%s': instruction '%s' has no kernel",
                 name_.c_str(), iname);
  }
  if (num_slots < 0 || (num_slots > 0 && slots == nullptr)) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "program '%s': instruction '%s' has an invalid argument slot list", name_.c_str(),
                 iname);
  }
  if (params_size > 0 && params == nullptr) {
    return failf(ONRT_ERROR_INVALID_ARGUMENT,
                 "program '%s': instruction '%s' has params_size %zu but no params", name_.c_str(),
                 iname, params_size);
  }
  Instruction ins;
  ins.name = iname;
  ins.fn = fn;
  int32_t needed = 0;
  for (int32_t k = 0; k < num_slots; ++k) {
    if (slots[k] < 0) {
      return failf(ONRT_ERROR_INVALID_ARGUMENT,
                   "program '%s': instruction '%s' argument %d names slot %d; slots must be >= 0",
                   name_.c_str(), iname, k, slots[k]);
    }
    if (slots[k] != k) ins.identity_slots = false;
    needed = std::max(needed, slots[k] + 1);
  }
  ins.slots.assign(slots, slots + num_slots);
  if (params_size > 0) {
    ins.params.reset(::operator new(params_size, std::align_val_t(kParamAlignment)));
    std::memcpy(ins.params.get(), params, params_size);
  }
  instructions_.push_back(std::move(ins));
  min_args_ = std::max(min_args_, needed);
  return ONRT_OK;
}

bool Program::run(const onrt_arg* args, std::string* error, const ActivitySite* site) const {
  // Small per-instruction argument arrays live on the stack: this is the
  // innermost loop of eager execution.
  constexpr int32_t kStackSlots = 32;
  onrt_arg local[kStackSlots];
  std::vector<onrt_arg> heap;
  char err[512];
  int64_t executed = 0;
  const int64_t started = monotonic_ns();
  for (const Instruction& ins : instructions_) {
    const onrt_arg* iargs = args;
    if (!ins.identity_slots) {
      const size_t n = ins.slots.size();
      onrt_arg* dst = local;
      if (n > static_cast<size_t>(kStackSlots)) {
        heap.resize(n);
        dst = heap.data();
      }
      for (size_t k = 0; k < n; ++k) dst[k] = args[ins.slots[k]];
      iargs = dst;
    }
    err[0] = '\0';
    const int64_t start = site ? trace_now_ns() : 0;
    int rc;
    // A kernel is C++ behind a C signature: an exception escaping it on a
    // worker thread would terminate the process. It becomes the stream's error.
    try {
      rc = ins.fn(ins.params.get(), iargs, err, sizeof err);
    } catch (const std::exception& e) {
      std::snprintf(err, sizeof err, "internal error (C++ exception): %s", e.what());
      rc = -1;
    } catch (...) {
      std::snprintf(err, sizeof err, "internal error (unknown C++ exception)");
      rc = -1;
    }
    if (site) {
      record_activity(*site, ONRT_ACTIVITY_KERNEL, ins.name, name_, start, trace_now_ns(), 0);
    }
    if (rc != 0) {
      err[sizeof err - 1] = '\0';
      std::string message = err[0] ? std::string(err) : strprintf("kernel returned error %d", rc);
      *error = name_ + "/" + ins.name + ": " + message;
      bump(counters().instructions_executed, executed);
      return false;
    }
    ++executed;
  }
  bump(counters().instructions_executed, executed);
  last_run_ns_.store(std::max<int64_t>(monotonic_ns() - started, 1), std::memory_order_relaxed);
  return true;
}

}  // namespace openneuron::runtime

using openneuron::runtime::fail;
using openneuron::runtime::Program;
using openneuron::runtime::to_program;

namespace {

onrt_status check_program(onrt_program_t handle, const char* what) {
  if (handle == nullptr || !to_program(handle)->valid()) {
    return openneuron::runtime::failf(ONRT_ERROR_INVALID_HANDLE, "%s: invalid program handle",
                                      what);
  }
  return ONRT_OK;
}

}  // namespace

extern "C" {

onrt_status onrt_program_create(const char* name, onrt_program_t* out) {
  if (out == nullptr) return fail(ONRT_ERROR_INVALID_ARGUMENT, "onrt_program_create: out is NULL");
  *out = reinterpret_cast<onrt_program_t>(new Program(name ? name : ""));
  return ONRT_OK;
}

onrt_status onrt_program_retain(onrt_program_t program) {
  ONRT_RETURN_IF_ERROR(check_program(program, "onrt_program_retain"));
  to_program(program)->retain();
  return ONRT_OK;
}

onrt_status onrt_program_release(onrt_program_t program) {
  ONRT_RETURN_IF_ERROR(check_program(program, "onrt_program_release"));
  to_program(program)->release();
  return ONRT_OK;
}

onrt_status onrt_program_add_instruction(onrt_program_t program, const char* name,
                                         onrt_kernel_fn fn, const void* params, size_t params_size,
                                         const int32_t* arg_slots, int32_t num_slots) {
  ONRT_RETURN_IF_ERROR(check_program(program, "onrt_program_add_instruction"));
  return to_program(program)->add_instruction(name, fn, params, params_size, arg_slots, num_slots);
}

int32_t onrt_program_num_instructions(onrt_program_t program) {
  if (check_program(program, "onrt_program_num_instructions") != ONRT_OK) return -1;
  return static_cast<int32_t>(to_program(program)->instructions().size());
}

const char* onrt_program_name(onrt_program_t program) {
  if (check_program(program, "onrt_program_name") != ONRT_OK) return "";
  return to_program(program)->name().c_str();
}

}  // extern "C"
