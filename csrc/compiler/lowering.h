// Internal interface between compile() and the per-op emitters.
#pragma once

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "openneuron/compiler/compiler.h"
#include "openneuron/compiler/graph.h"
#include "openneuron/kernels/kernels.h"
#include "openneuron/kernels/params.h"

namespace openneuron::compiler::detail {

using kernels::ScalarArg;
using kernels::TensorArg;

// Where an operand lives at launch. Tensors: launch argument `slot` plus
// `offset` bytes (intermediates and temporaries: the scratch slot). Scalars:
// launch argument `slot`, or an immediate when slot < 0.
struct Ref {
  ValueKind kind = ValueKind::None;
  int32_t slot = -1;
  int64_t offset = 0;
  TensorType type;  // tensors
  ScalarArg scalar;  // scalars (slot mirrored into scalar.slot)

  bool is_tensor() const { return kind == ValueKind::Tensor; }
  bool is_scalar() const { return kind == ValueKind::ScalarInt || kind == ValueKind::ScalarFloat; }
  bool is_none() const { return kind == ValueKind::None; }
  static Ref imm_int(int64_t v);
  static Ref imm_float(double v);
};

// Maps the launch slots an instruction uses to its own argument indices.
class ArgMap {
 public:
  int32_t local(int32_t launch_slot);
  TensorArg tensor(const Ref& r);
  ScalarArg scalar(const Ref& r);
  const std::vector<int32_t>& slots() const { return slots_; }

 private:
  std::vector<int32_t> slots_;
};

class LowerCtx {
 public:
  LowerCtx(const Graph& g, std::vector<Ref> refs, int32_t scratch_slot, uint64_t temp_base);

  // The node being lowered.
  void begin_node(int index);
  const Node& node() const { return *node_; }
  Op op() const { return node_->op; }
  int num_inputs() const { return static_cast<int>(node_->inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_->outputs.size()); }
  const Ref& in(int i) const { return refs_[node_->inputs[i]]; }
  const Ref& out(int i) const { return refs_[node_->outputs[i]]; }
  int64_t attr(int i, int64_t dflt) const {
    return i < static_cast<int>(node_->attrs.size()) ? node_->attrs[i] : dflt;
  }

  // A scratch tensor that lives until the end of the current node.
  Ref temp(const TensorType& t);
  // `r` converted to dtype `d` (a temporary) unless it already has it.
  Ref as_dtype(const Ref& r, DType d);
  // `r` if its layout is dense row-major, else a contiguous temporary copy.
  Ref contiguous(const Ref& r);

  // Appends an instruction.
  template <class P>
  void emit(const char* name, onrt_kernel_fn fn, const P& params, const ArgMap& args) {
    emit_raw(name, fn, &params, sizeof(P), args);
  }
  void emit_raw(const char* name, onrt_kernel_fn fn, const void* params, size_t size,
                const ArgMap& args);

  // Validation helpers: throw CompileError naming the op and operands.
  [[noreturn]] void fail(const std::string& what) const;
  void expect_counts(int nin, int nout) const;
  void expect_counts(int nin_min, int nin_max, int nout) const;
  void expect_tensor(const Ref& r, const char* what) const;
  void expect_same_sizes(const Ref& a, const TensorType& like, const char* what) const;
  // `dim` wrapped into [0, max(ndim, 1)) (negative dims count from the end).
  int wrap_dim(int64_t dim, int ndim) const;

  std::vector<Instruction>& instructions() { return instrs_; }
  uint64_t scratch_end() const { return temp_high_; }

 private:
  const Graph& g_;
  std::vector<Ref> refs_;
  const Node* node_ = nullptr;
  int32_t scratch_slot_;
  uint64_t temp_base_, temp_cur_, temp_high_;
  std::vector<Instruction> instrs_;
};

std::string describe(const TensorType& t);
std::string describe(const Ref& r);
TensorType contiguous_type(DType dtype, int ndim, const int64_t* sizes);
bool same_sizes(const TensorType& a, const TensorType& b);
uint64_t storage_bytes(const TensorType& t);

// ---- shared emitters

// out = fn(ins...) through ElementwiseParams. Tensor inputs must have out's
// sizes; scalars are passed as scalar operands. (lower_elementwise.cpp)
void emit_elementwise(LowerCtx& ctx, const char* name, onrt_kernel_fn fn, uint16_t op,
                      const Ref& out, const std::vector<Ref>& ins,
                      const std::vector<Ref>& coefs = {});
// dst = src converted to dst's dtype; dst = value. (lower_creation.cpp)
void emit_copy(LowerCtx& ctx, const Ref& dst, const Ref& src);
void emit_fill(LowerCtx& ctx, const Ref& dst, const Ref& value);

// Copies from engine-layout temporaries into the real outputs, emitted after
// the engine instruction that writes the temporaries.
struct Writeback {
  std::vector<std::pair<Ref, Ref>> copies;  // (dst, src)
  void flush(LowerCtx& ctx) {
    for (auto& [dst, src] : copies) emit_copy(ctx, dst, src);
  }
};

// `r` as a scalar argument of the instruction; fails naming `what` unless r
// is a scalar. (lower_ctx.cpp)
ScalarArg scalar_arg(LowerCtx& ctx, ArgMap& am, const Ref& r, const char* what);

// ---- the lowering table (lowering_table.cpp)

using Emitter = void (*)(LowerCtx&);
Emitter find_emitter(Op op);

// ---- memory plan (memory_plan.cpp)

struct MemoryPlan {
  std::vector<int64_t> offset;  // per value; -1 unless an intermediate tensor
  uint64_t bytes = 0;
};
// `is_launch[v]`: v is a graph input or output.
MemoryPlan plan_memory(const Graph& g, const std::vector<char>& is_launch);

inline constexpr uint64_t kAlign = 64;
inline uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// ---- emitters, by op family in graph.h's order (lowering_table.cpp maps each
// op to one)

// --- creation and copy (lower_creation.cpp)
void lower_copy(LowerCtx&);
void lower_fill(LowerCtx&);
void lower_arange(LowerCtx&);

// --- rng (lower_rng.cpp)
void lower_random(LowerCtx&);
void lower_random_extra(LowerCtx&);
void lower_dropout_backward(LowerCtx&);

// --- elementwise (lower_elementwise.cpp)
void lower_unary(LowerCtx&);
void lower_binary(LowerCtx&);
void lower_compare(LowerCtx&);
void lower_bitwise(LowerCtx&);
void lower_where(LowerCtx&);
void lower_pointwise3(LowerCtx&);
void lower_clamp(LowerCtx&);
void lower_backward_binary(LowerCtx&);

// --- activation (lower_activation.cpp)
void lower_activation(LowerCtx&);

// --- reduce (lower_reduce.cpp)
void lower_reduce(LowerCtx&);

// --- mm (lower_mm.cpp)
void lower_mm(LowerCtx&);

// --- norm (lower_norm.cpp)
void lower_layer_norm(LowerCtx&);
void lower_layer_norm_backward(LowerCtx&);
void lower_group_norm(LowerCtx&);
void lower_group_norm_backward(LowerCtx&);
void lower_batch_norm(LowerCtx&);
void lower_batch_norm_backward(LowerCtx&);

// --- softmax (lower_softmax.cpp)
void lower_softmax(LowerCtx&);

// --- loss (lower_loss.cpp)
void lower_nll_loss(LowerCtx&);
void lower_nll_loss_backward(LowerCtx&);
void lower_pointwise_loss(LowerCtx&);

// --- gather and index (lower_gather.cpp)
void lower_scatter(LowerCtx&);
void lower_index(LowerCtx&);
void lower_index_select(LowerCtx&);
void lower_embedding_backward(LowerCtx&);
void lower_sort(LowerCtx&);
void lower_nonzero(LowerCtx&);
void lower_isin(LowerCtx&);

// --- select (lower_select.cpp)
void lower_tri(LowerCtx&);
void lower_argreduce(LowerCtx&);
void lower_scan(LowerCtx&);

// --- optim (lower_optim.cpp)
void lower_fused_adam(LowerCtx&);
void lower_fused_sgd(LowerCtx&);
void lower_norm_all(LowerCtx&);

// --- conv (lower_conv.cpp)
void lower_conv(LowerCtx&);

// --- pool and upsample (lower_pool.cpp)
void lower_pool2d(LowerCtx&);

// --- attention (lower_attention.cpp)
void lower_attention(LowerCtx&);

// --- rnn (lower_rnn.cpp)
void lower_rnn_cell(LowerCtx&);
void lower_lstm_sequence(LowerCtx&);
void lower_lstm_sequence_backward(LowerCtx&);
void lower_gru_sequence(LowerCtx&);
void lower_gru_sequence_backward(LowerCtx&);

// --- fused (lower_fused.cpp)
void lower_fused_elementwise(LowerCtx&);

// ---- passes

// Runs of consecutive elementwise nodes become FusedElementwise nodes (*groups
// counts them) and runs whose results nobody reads are dropped; nullopt when
// nothing changed. (fuse.cpp)
std::optional<Graph> fuse_elementwise(const Graph& graph, int* groups);

}  // namespace openneuron::compiler::detail
