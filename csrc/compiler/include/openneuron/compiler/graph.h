// The compiler's graph IR: a core-ATen-like op set over typed values.
//
// The same IR serves eager mode (a graph of one node per ATen op, built by the
// torch bridge) and compiled mode (a graph built from an FX graph). Shapes,
// dtypes and broadcasting are resolved by whoever builds the graph: every
// tensor operand already has its final sizes and strides (broadcast inputs are
// expanded views, stride 0), so lowering never re-derives PyTorch semantics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openneuron/kernels/types.h"

namespace openneuron::compiler {

// Semantics of each op, operand order "inputs -> outputs". Unless noted:
//  * tensor inputs of elementwise ops have the output's sizes (any strides);
//  * arithmetic inputs have the output dtype; comparisons take inputs of one
//    dtype and write Bool; half types compute in float32 and round once;
//  * any tensor input of a binary/ternary op may instead be a scalar value;
//  * `alpha`-style coefficients are scalar operands, not attributes, so one
//    program serves every value.
#define OPENNEURON_FOR_EACH_OP(_)                                                      \
  /* data movement and creation */                                                     \
  _(Copy)       /* in -> out: convert dtype, any strides (broadcast via stride 0) */     \
  _(Fill)       /* scalar -> out */                                                     \
  _(Arange)     /* start(scalar), step(scalar) -> out[i] = start + i*step (1-D) */      \
  _(Uniform)    /* seed(i), offset(i), low(f), high(f) -> out  (Philox4x32-10) */       \
  _(Normal)     /* seed(i), offset(i), mean(f), std(f) -> out */                        \
  _(Bernoulli)  /* seed(i), offset(i), p(f) -> out (0/1 in out's dtype) */              \
  _(RandInt)    /* seed(i), offset(i), low(i), high(i) -> out in [low, high) */         \
  /* unary elementwise: in -> out */                                                   \
  _(Neg) _(Abs) _(Exp) _(Log) _(Sqrt) _(Rsqrt) _(Reciprocal) _(Sin) _(Cos) _(Tanh)      \
  _(Sigmoid) _(Relu) _(Silu) _(Erf) _(Floor) _(Ceil) _(Round) _(Sign) _(LogicalNot)     \
  _(Gelu)       /* attr[0]: 0 = erf, 1 = tanh approximation */                          \
  /* binary elementwise: a, b -> out */                                                \
  _(Add)        /* a, b, alpha -> out = a + alpha*b */                                  \
  _(Sub)        /* a, b, alpha -> out = a - alpha*b */                                  \
  _(Mul) _(Div) _(Maximum) _(Minimum) _(Pow) _(Remainder) _(FloorDivide)               \
  _(DivTrunc) _(Atan2)                                                                  \
  _(Eq) _(Ne) _(Lt) _(Le) _(Gt) _(Ge) /* -> Bool */                                     \
  _(LogicalAnd) _(LogicalOr) _(BitwiseAnd) _(BitwiseOr) _(BitwiseXor)                  \
  /* elementwise backward */                                                           \
  _(ThresholdBackward) /* grad, self, threshold -> grad * (self > threshold) */         \
  _(GeluBackward)      /* grad, self -> ; attr[0] as Gelu */                            \
  _(SigmoidBackward)   /* grad, out -> grad * out * (1 - out) */                        \
  _(TanhBackward)      /* grad, out -> grad * (1 - out^2) */                            \
  _(SiluBackward)      /* grad, self -> */                                              \
  /* ternary elementwise */                                                            \
  _(Where)      /* cond(Bool), a, b -> out */                                           \
  _(Addcmul)    /* self, t1, t2, value -> self + value*t1*t2 */                         \
  _(Addcdiv)    /* self, t1, t2, value -> self + value*t1/t2 */                         \
  _(Lerp)       /* self, end, weight -> self + weight*(end-self) */                     \
  _(Clamp)      /* self, min, max -> out (min/max scalar or tensor) */                  \
  /* reductions: in -> out. out has in's ndim with reduced dims of size 1.  */          \
  /* attr[0]: bitmask of reduced dims. Float accumulation in >= float32.   */           \
  _(Sum) _(Mean) _(Prod) _(Amax) _(Amin)                                                \
  /* matrix engine (GEMM library) */                                                   \
  _(Mm)         /* a[M,K], b[K,N] -> out[M,N] */                                        \
  _(Addmm)      /* bias (expanded to [M,N]), a, b, beta, alpha -> out */               \
  _(Bmm)        /* a[B,M,K], b[B,K,N] -> out[B,M,N] */                                  \
  /* normalisation and losses */                                                       \
  _(Softmax) _(LogSoftmax)                  /* in -> out; attr[0] = dim */              \
  _(SoftmaxBackward) _(LogSoftmaxBackward)  /* grad_out, out -> grad_in; attr[0]=dim */ \
  _(NllLoss)         /* self[N,C]|[C], target(Int64), weight|none -> out, total_weight;  \
                        attr[0] = reduction (0 none, 1 mean, 2 sum), attr[1] = ignore */ \
  _(NllLossBackward) /* grad_out, self, target, weight|none, total_weight -> grad_in;   \
                        attrs as NllLoss */                                            \
  _(IndexSelect)     /* self, index(Int64|Int32) -> out; attr[0] = dim */               \
  _(EmbeddingBackward) /* grad[..., D], indices -> out[num_weights, D];               \
                          attr[0] = padding_idx (-1 none) */

enum class Op : uint16_t {
#define OPENNEURON_OP_ENUM(name) name,
  OPENNEURON_FOR_EACH_OP(OPENNEURON_OP_ENUM)
#undef OPENNEURON_OP_ENUM
};

const char* op_name(Op op);

enum class ValueKind : uint8_t {
  Tensor,
  ScalarInt,    // launch argument onrt_arg.i
  ScalarFloat,  // launch argument onrt_arg.f
  None,         // an absent optional operand (e.g. NllLoss weight)
};

struct ValueType {
  ValueKind kind = ValueKind::Tensor;
  TensorType tensor;  // meaningful for ValueKind::Tensor

  static ValueType of(const TensorType& t) { return {ValueKind::Tensor, t}; }
  static ValueType scalar_int() { return {ValueKind::ScalarInt, {}}; }
  static ValueType scalar_float() { return {ValueKind::ScalarFloat, {}}; }
  static ValueType none() { return {ValueKind::None, {}}; }
};

using ValueId = int32_t;

struct Node {
  Op op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<int64_t> attrs;
};

// Values are numbered in creation order. Graph inputs and outputs are the
// program's launch arguments, in this order: inputs, then outputs (then the
// scratch buffer, if the compiled program needs one). Values that are neither
// are intermediates, placed in the scratch buffer by the compiler.
class Graph {
 public:
  ValueId add_input(const ValueType& type);
  ValueId add_value(const ValueType& type);  // intermediate or output
  void add_node(Op op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                std::vector<int64_t> attrs = {});
  void mark_output(ValueId v);

  // One node whose operands are all launch arguments: operands[0..num_inputs)
  // are inputs, the rest outputs.
  static Graph single_op(Op op, const std::vector<ValueType>& operands, int num_inputs,
                         std::vector<int64_t> attrs = {});

  const std::vector<ValueType>& values() const { return values_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<Node>& nodes() const { return nodes_; }

  // Canonical byte encoding of everything that affects the compiled program;
  // the program cache key.
  std::string signature() const;

 private:
  std::vector<ValueType> values_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<Node> nodes_;
};

}  // namespace openneuron::compiler
