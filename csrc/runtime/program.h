// Programs: immutable instruction lists shared between the compiler's cache
// and queued launches, hence reference counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "openneuron/runtime.h"
#include "trace.h"

namespace openneuron::runtime {

struct AlignedDelete {
  void operator()(void* p) const;
};

struct Instruction {
  std::string name;
  onrt_kernel_fn fn = nullptr;
  // Kernels cast this to their parameter struct, so it must be suitably aligned.
  std::unique_ptr<void, AlignedDelete> params;
  std::vector<int32_t> slots;
  // Slots 0..n-1 in order: the launch arguments can be passed straight through.
  bool identity_slots = true;
};

class Program {
 public:
  static constexpr uint32_t kMagic = 0x4f4e5047;  // "ONPG"
  static constexpr size_t kParamAlignment = 16;

  explicit Program(std::string name) : name_(std::move(name)) {}
  ~Program() { magic_ = 0; }

  bool valid() const { return magic_ == kMagic; }
  const std::string& name() const { return name_; }
  const std::vector<Instruction>& instructions() const { return instructions_; }
  // Launches must pass at least this many arguments.
  int32_t min_args() const { return min_args_; }

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  onrt_status add_instruction(const char* name, onrt_kernel_fn fn, const void* params,
                              size_t params_size, const int32_t* slots, int32_t num_slots);
  void mark_launched() { launched_.store(true, std::memory_order_relaxed); }

  // Runs every instruction over `args`; on failure fills *error with
  // "<program>/<instruction>: <kernel message>".
  // With `site`, each instruction is recorded as a traced kernel activity.
  bool run(const onrt_arg* args, std::string* error, const ActivitySite* site = nullptr) const;
  // How long the last run took (0: never run): a short program may run on its
  // caller when the host is contended (contention.h).
  int64_t last_run_ns() const { return last_run_ns_.load(std::memory_order_relaxed); }

 private:
  uint32_t magic_ = kMagic;
  std::string name_;
  std::vector<Instruction> instructions_;
  int32_t min_args_ = 0;
  std::atomic<int> refs_{1};
  std::atomic<bool> launched_{false};
  mutable std::atomic<int64_t> last_run_ns_{0};
};

inline Program* to_program(onrt_program_t p) { return reinterpret_cast<Program*>(p); }

}  // namespace openneuron::runtime
