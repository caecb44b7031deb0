// Parameter blobs of the engine entry points. The compiler fills them at
// compile time (layouts, loop plans, op selection); the kernels read them at
// launch. Plain trivially-copyable structs: the runtime copies them as bytes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "openneuron/kernels/types.h"
#include "openneuron/runtime.h"

namespace openneuron::kernels {

// Where a tensor lives at launch: args[slot].ptr + byte_offset. `slot` indexes
// the instruction's own arguments (see onrt_program_add_instruction). Graph
// intermediates share the scratch slot at different offsets.
struct TensorArg {
  int32_t slot = -1;  // -1: absent optional operand
  int32_t reserved = 0;
  int64_t byte_offset = 0;
  TensorType type;

  bool present() const { return slot >= 0; }
  char* resolve(const onrt_arg* args) const {
    return static_cast<char*>(args[slot].ptr) + byte_offset;
  }
};

// A scalar operand: read from args[slot].i / .f, or an immediate baked into the
// params by the compiler (slot == -1).
struct ScalarArg {
  int32_t slot = -1;
  uint8_t is_float = 0;
  int64_t imm_i = 0;
  double imm_f = 0;

  static ScalarArg imm_int(int64_t v) { ScalarArg s; s.imm_i = v; return s; }
  static ScalarArg imm_float(double v) { ScalarArg s; s.is_float = 1; s.imm_f = v; return s; }
  double as_double(const onrt_arg* args) const {
    if (slot < 0) return is_float ? imm_f : static_cast<double>(imm_i);
    return is_float ? args[slot].f : static_cast<double>(args[slot].i);
  }
  int64_t as_int(const onrt_arg* args) const {
    if (slot < 0) return is_float ? static_cast<int64_t>(imm_f) : imm_i;
    return is_float ? static_cast<int64_t>(args[slot].f) : args[slot].i;
  }
};

// An elementwise operand: a tensor in memory or a scalar.
struct Operand {
  enum Kind : uint8_t { Absent = 0, Tensor = 1, Scalar = 2 };
  Kind kind = Absent;
  DType dtype = DType::Float32;  // tensors: element type in memory
  int32_t slot = -1;             // tensors
  int64_t byte_offset = 0;       // tensors
  ScalarArg scalar;              // scalars
};

inline constexpr int kMaxOperands = 5;  // output + up to 4 inputs

// Iteration plan of an elementwise op, computed at compile time: size-1 dims
// dropped, dims ordered innermost-first by the output's strides, and adjacent
// dims merged where every operand allows it. Operand 0 is the output; scalar
// operands have all-zero strides. Strides are in bytes.
struct LoopPlan {
  int32_t ndim = 1;
  int32_t nops = 1;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxOperands][kMaxDims] = {};
};

// Builds a plan over `sizes` (the output's) for operands given by their types;
// a null type is a scalar operand (stride 0 everywhere).
LoopPlan make_loop_plan(const TensorType* const* operand_types, int nops);

// ------------------------------------------------------------ op selectors

enum class UnaryOp : uint16_t {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Reciprocal, Sin, Cos, Tanh, Sigmoid, Relu, Silu, Erf,
  Floor, Ceil, Round, Sign, LogicalNot, GeluErf, GeluTanh,
};

enum class BinaryOp : uint16_t {
  Add, Sub, Mul, Div, Maximum, Minimum, Pow, Remainder, FloorDivide, DivTrunc, Atan2,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, BitwiseAnd, BitwiseOr, BitwiseXor,
  ThresholdBackward, GeluErfBackward, GeluTanhBackward, SigmoidBackward, TanhBackward,
  SiluBackward,
};

enum class TernaryOp : uint16_t { Where, Addcmul, Addcdiv, Lerp, Clamp };

enum class ReduceOp : uint16_t { Sum, Mean, Prod, Amax, Amin };

enum class RandomOp : uint16_t { Uniform, Normal, Bernoulli, RandInt };

enum class SoftmaxOp : uint16_t { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };

// ------------------------------------------------------------ param blobs

// Copy, fill, unary, binary and ternary elementwise ops. out = ops[0],
// inputs = ops[1..]. `coef` holds op coefficients (alpha, value, threshold).
struct ElementwiseParams {
  uint16_t op = 0;
  uint8_t nin = 0;
  Operand ops[kMaxOperands];
  ScalarArg coef[2];
  LoopPlan plan;
};

struct ArangeParams {
  ScalarArg start, step;
  TensorArg out;
};

// Element e of `out` (row-major logical order) takes Philox4x32-10 output
// block (offset + e / per_block), lane e % per_block, under key `seed`.
struct RandomParams {
  RandomOp op = RandomOp::Uniform;
  ScalarArg seed, offset, a, b;
  TensorArg out;
};

// Dims of `in` reordered innermost-first and merged; reduced dims flagged.
struct ReducePlan {
  int32_t ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};   // elements
  int64_t out_strides[kMaxDims] = {};  // elements; 0 on reduced dims
  uint32_t reduced_mask = 0;           // bit d: plan dim d is reduced
  int64_t out_numel = 0;
  int64_t reduce_numel = 0;
};
ReducePlan make_reduce_plan(const TensorType& in, const TensorType& out, uint32_t dim_mask);

struct ReduceParams {
  ReduceOp op = ReduceOp::Sum;
  DType in_dtype = DType::Float32, out_dtype = DType::Float32;
  TensorArg in, out;
  ReducePlan plan;
};

// C[b] = alpha * A[b] @ B[b] + beta * C[b] with A [M,K], B [K,N], C [M,N].
// Each operand's last two dims are row- or column-major (the compiler copies
// other layouts first); batch strides are free (0 = broadcast).
struct GemmParams {
  DType dtype = DType::Float32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t a_strides[3] = {}, b_strides[3] = {}, c_strides[3] = {};  // batch, row, col
  TensorArg a, b, c;
  ScalarArg alpha = ScalarArg::imm_float(1.0);
  ScalarArg beta = ScalarArg::imm_float(0.0);  // C is read only when beta != 0
};

// Softmax family over one dim. Forward: in0 = input. Backward: in0 = grad_out,
// in1 = forward output.
struct SoftmaxParams {
  SoftmaxOp op = SoftmaxOp::Softmax;
  int32_t dim = 0;
  TensorArg in0, in1, out;
};

struct NllLossParams {
  int32_t reduction = 1;  // 0 none, 1 mean, 2 sum
  int64_t ignore_index = -100;
  TensorArg self, target, weight, out, total_weight;
  TensorArg grad_out, grad_in;  // backward only (out unused there)
};

struct IndexSelectParams {
  int32_t dim = 0;
  TensorArg self, index, out;
};

struct EmbeddingBackwardParams {
  int64_t padding_idx = -1;
  TensorArg grad, indices, out;  // out: float32 or the grad's dtype
};

static_assert(std::is_trivially_copyable_v<ElementwiseParams>);
static_assert(std::is_trivially_copyable_v<GemmParams>);

}  // namespace openneuron::kernels
