// Graph -> runtime program, and the program cache.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "openneuron/compiler/graph.h"
#include "openneuron/runtime.h"

namespace openneuron::compiler {

// Raised when a graph cannot be lowered (unsupported op/dtype/layout). The
// message names the op and the operand types. Never a crash.
class CompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One engine instruction, as handed to onrt_program_add_instruction.
struct Instruction {
  std::string name;
  onrt_kernel_fn fn = nullptr;
  std::vector<uint64_t> params;  // the params blob (8-byte aligned storage)
  size_t params_size = 0;        // bytes
  std::vector<int32_t> arg_slots;
};

// An executable program plus what launching it needs. Immutable; shared.
struct Program {
  onrt_program_t handle = nullptr;
  int32_t num_args = 0;       // inputs + outputs (+1 if scratch_bytes > 0)
  uint64_t scratch_bytes = 0; // device scratch the caller allocates and passes last
  std::string name;
  int32_t fused_groups = 0;  // runs of elementwise nodes the fusion pass fused
  // Host-side copy of the instructions in `handle` (debugging, host execution).
  std::vector<Instruction> instructions;

  ~Program();  // releases handle
};

// Runs the program's instructions synchronously on the calling thread, with
// `args` laid out as for onrt_program_launch. For host memory only (tests,
// debugging): it bypasses the runtime's streams. Returns false and sets
// *error (naming the instruction) when an instruction fails.
bool run_on_host(const Program& program, const onrt_arg* args, int32_t nargs,
                 std::string* error);

// Philox counters (blocks of four 32-bit draws) one launch of the random op `op`
// consumes, so the caller reserves exactly that range on its generator and no two
// launches share numbers. `dims` by op:
//   Uniform, Normal, Bernoulli, RandInt, Dropout, BernoulliTensor, Exponential,
//   Geometric, LogNormal: {output elements}; Randperm: {n};
//   Multinomial: {rows, categories, samples}; Attention (dropout): {B, H, L, S}.
// Throws CompileError for any other op.
int64_t philox_offset_increment(Op op, std::initializer_list<int64_t> dims);

struct CompileOptions {
  // Fuse runs of elementwise ops (fuse.cpp). Results stay bit-equal to the
  // unfused ops.
  bool fuse = true;
};

// The options of this process: OPENNEURON_FUSION=0 in the environment turns
// fusion off. What the program cache and whole-graph programs compile with.
const CompileOptions& process_compile_options();

// Lowers a graph. Throws CompileError.
std::shared_ptr<const Program> compile(const Graph& graph, const CompileOptions& options = {});

// The graph as compile() lowers it: after the passes `options` turns on (fusion). For
// debug dumps of a graph compile() accepted.
Graph after_passes(const Graph& graph, const CompileOptions& options = {});

// Readable listings (debug dumps): every value with its type (views with their
// base and offset) and every node; every instruction with its argument slots.
std::string to_text(const Graph& graph);
std::string to_text(const Program& program);

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;      // = compilations
  int64_t entries = 0;
  int64_t capacity = 0;        // entries kept at most (OPENNEURON_PROGRAM_CACHE_ENTRIES)
  int64_t evictions = 0;       // least recently used programs dropped to stay within it
  double compile_seconds = 0;  // total time spent compiling
};

// Process-wide cache keyed by Graph::signature(), compiling with
// process_compile_options(), keeping the most recently used programs. Thread-safe.
// A failed compilation is not cached (the next call retries and raises again).
class ProgramCache {
 public:
  static ProgramCache& global();
  std::shared_ptr<const Program> get_or_compile(const Graph& graph);
  CacheStats stats() const;
  void clear();  // drops every program and resets the stats

 private:
  struct Impl;
  ProgramCache();
  std::unique_ptr<Impl> impl_;
};

}  // namespace openneuron::compiler
