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
//
// One X-macro per op family, in the order of the family headings used in
// kernels.h, lowering.h and lowering_table.cpp.

// creation and copy (lower_creation.cpp)
#define OPENNEURON_CREATION_OPS(_)                                                      \
  _(Copy)       /* in -> out: convert dtype, any strides (broadcast via stride 0) */    \
  _(Fill)       /* scalar -> out */                                                     \
  _(Arange)     /* start(scalar), step(scalar) -> out[i] = start + i*step (1-D) */

// rng (lower_rng.cpp). Random ops take seed(i), offset(i) first and draw
// Philox4x32-10 (kernels/rng.cpp).
#define OPENNEURON_RNG_OPS(_)                                                           \
  _(Uniform)    /* seed(i), offset(i), low(f), high(f) -> out  (Philox4x32-10) */       \
  _(Normal)     /* seed(i), offset(i), mean(f), std(f) -> out */                        \
  _(Bernoulli)  /* seed(i), offset(i), p(f) -> out (0/1 in out's dtype) */              \
  _(RandInt)    /* seed(i), offset(i), low(i), high(i) -> out in [low, high) */         \
  _(Dropout)    /* seed, offset, p(f), in -> out, mask(Bool): mask = (u >= p),          \
                   out = in * mask / (1 - p) */                                         \
  _(DropoutBackward) /* grad, mask(Bool), scale(f) -> grad * mask * scale */            \
  _(BernoulliTensor) /* seed, offset, p (float tensor, out's sizes) -> out (0/1) */     \
  _(Exponential) /* seed, offset, lambda(f) -> out = -log(1 - u) / lambda */            \
  _(Geometric)   /* seed, offset, p(f) -> out = ceil(log(1 - u) / log(1 - p)) */        \
  _(LogNormal)   /* seed, offset, mean(f), std(f) -> out = exp(mean + std * z) */       \
  _(Randperm)    /* seed, offset -> out[n] (1-d): a random permutation of 0..n-1 */     \
  _(Multinomial) /* seed, offset, probs[C] | [N, C] (float) -> out[S] | [N, S] Int64;   \
                    attr[0] = with replacement */

// elementwise (lower_elementwise.cpp)
#define OPENNEURON_ELEMENTWISE_OPS(_)                                                   \
  /* unary elementwise: in -> out */                                                    \
  _(Neg) _(Abs) _(Exp) _(Log) _(Sqrt) _(Rsqrt) _(Reciprocal) _(Sin) _(Cos) _(Tanh)      \
  _(Sigmoid) _(Relu) _(Silu) _(Erf) _(Floor) _(Ceil) _(Round) _(Sign) _(LogicalNot)     \
  _(Gelu)       /* attr[0]: 0 = erf, 1 = tanh approximation */                          \
  /* binary elementwise: a, b -> out */                                                 \
  _(Add)        /* a, b, alpha -> out = a + alpha*b */                                  \
  _(Sub)        /* a, b, alpha -> out = a - alpha*b */                                  \
  _(Mul) _(Div) _(Maximum) _(Minimum) _(Pow) _(Remainder) _(FloorDivide)                \
  _(DivTrunc) _(Atan2)                                                                  \
  _(Eq) _(Ne) _(Lt) _(Le) _(Gt) _(Ge) /* -> Bool */                                     \
  _(LogicalAnd) _(LogicalOr) _(BitwiseAnd) _(BitwiseOr) _(BitwiseXor)                   \
  /* ternary elementwise */                                                             \
  _(Where)      /* cond(Bool), a, b -> out */                                           \
  _(Addcmul)    /* self, t1, t2, value -> self + value*t1*t2 */                         \
  _(Addcdiv)    /* self, t1, t2, value -> self + value*t1/t2 */                         \
  _(Lerp)       /* self, end, weight -> self + weight*(end-self) */                     \
  _(Clamp)      /* self, min, max -> out (min/max scalar or tensor) */                  \
  /* elementwise backward */                                                            \
  _(ThresholdBackward) /* grad, self, threshold -> grad * (self > threshold) */         \
  _(GeluBackward)      /* grad, self -> ; attr[0] as Gelu */                            \
  _(SigmoidBackward)   /* grad, out -> grad * out * (1 - out) */                        \
  _(TanhBackward)      /* grad, out -> grad * (1 - out^2) */                            \
  _(SiluBackward)      /* grad, self -> */

// activation (lower_activation.cpp). Elementwise: tensor inputs have out's
// sizes (any strides), out has the input dtype (Bool for IsInf/IsFinite);
// half types compute in float32. Coefficients are scalars.
#define OPENNEURON_ACTIVATION_OPS(_)                                                    \
  _(Softplus)    /* in, beta, threshold -> out */                                       \
  _(Mish) _(Hardswish) _(Hardsigmoid) _(LogSigmoid) /* in -> out */                     \
  _(Elu)         /* in, alpha, scale, input_scale -> out */                             \
  _(LeakyRelu)   /* in, negative_slope -> out */                                        \
  _(Hardtanh)    /* in, min, max -> out (also integers) */                              \
  _(Exp2) _(Expm1) _(Log1p) _(Log2) _(Log10) _(Trunc) _(Frac) _(Tan) _(Asin) _(Acos)    \
  _(Atan) _(Sinh) _(Cosh) _(Asinh) _(Acosh) _(Atanh) /* in -> out (Trunc: integers) */  \
  _(IsInf) _(IsFinite) /* in (any real dtype) -> out(Bool) */                           \
  _(Fmod)        /* a, b (tensor or scalar) -> out; integers: b == 0 fails */           \
  _(SoftplusBackward) /* grad, self, beta, threshold -> grad_in */                      \
  _(MishBackward) _(HardswishBackward) _(HardsigmoidBackward)                           \
  _(LogSigmoidBackward) /* grad, self -> grad_in */                                     \
  _(EluBackward) /* grad, self (attr[0] = 0) or result (attr[0] = 1), alpha, scale,     \
                    input_scale -> grad_in */                                           \
  _(LeakyReluBackward) /* grad, self, negative_slope -> grad_in */                      \
  _(HardtanhBackward)  /* grad, self, min, max -> grad_in */

// reduce (lower_reduce.cpp)
#define OPENNEURON_REDUCE_OPS(_)                                               \
  /* reductions: in -> out. out has in's ndim with reduced dims of size 1.  */ \
  /* attr[0]: bitmask of reduced dims. Float accumulation in >= float32.   */  \
  /* Var: deviations d (float), divisor(f) -> sum(d * d) / divisor, summed */  \
  /* in double; Std: the same, square-rooted before it is narrowed.        */  \
  _(Sum) _(Mean) _(Prod) _(Amax) _(Amin) _(Var) _(Std)

// mm (lower_mm.cpp): the tensor engine's GEMM
#define OPENNEURON_MM_OPS(_)                                                            \
  _(Mm)         /* a[M,K], b[K,N] -> out[M,N] */                                        \
  _(Addmm)      /* bias (expanded to [M,N]), a, b, beta, alpha -> out */                \
  _(Bmm)        /* a[B,M,K], b[B,K,N] -> out[B,M,N] */

// norm (lower_norm.cpp). x/out/grad dtype Float32|BFloat16|Float16; statistics
// any float dtype.
#define OPENNEURON_NORM_OPS(_)                                                          \
  _(LayerNorm)  /* x, weight|none, bias|none, eps(f) -> out, mean[M], rstd[M];          \
                   attr[0] = axis: M = prod(sizes[:axis]), N = prod(sizes[axis:]) */    \
  _(LayerNormBackward) /* grad, x, mean, rstd, weight|none -> dx, dweight[N], dbias[N]; \
                   attr[0] = axis, attr[1] = mask (1 dx, 2 dweight, 4 dbias) */         \
  _(RmsNorm)    /* x, weight|none, eps(f) -> out, rstd[M]; attr[0] = axis */            \
  _(RmsNormBackward) /* grad, x, rstd, weight|none -> dx, dweight; attrs as above */    \
  _(GroupNorm)  /* x[N, C, *], weight|none, bias|none, eps(f) -> out, mean[N*G],        \
                   rstd[N*G]; attr[0] = G */                                            \
  _(GroupNormBackward) /* grad, x, mean, rstd, weight|none -> dx, dweight[C], dbias[C]; \
                   attr[0] = G, attr[1] = mask */                                       \
  _(BatchNorm)  /* x[N, C, *], weight|none, bias|none, running_mean|none,               \
                   running_var|none, momentum(f), eps(f) -> out, save_mean[C] (or empty), \
                   save_invstd[C] (or empty); attr[0] = training: batch statistics,     \
                   running stats updated IN PLACE; else running stats used */           \
  _(BatchNormBackward) /* grad, x, weight|none, running_mean|none, running_var|none,    \
                   save_mean|none, save_invstd|none, eps(f) -> dx, dweight[C], dbias[C]; \
                   attr[0] = training, attr[1] = mask */

// softmax (lower_softmax.cpp)
#define OPENNEURON_SOFTMAX_OPS(_)                                                       \
  _(Softmax) _(LogSoftmax)                  /* in -> out; attr[0] = dim */              \
  _(SoftmaxBackward) _(LogSoftmaxBackward)  /* grad_out, out -> grad_in; attr[0]=dim */

// loss (lower_loss.cpp)
#define OPENNEURON_LOSS_OPS(_)                                                          \
  _(NllLoss)         /* self[N,C]|[C], target(Int64), weight|none -> out, total_weight; \
                        attr[0] = reduction (0 none, 1 mean, 2 sum), attr[1] = ignore */ \
  _(NllLossBackward) /* grad_out, self, target, weight|none, total_weight -> grad_in;   \
                        attrs as NllLoss */                                             \
  /* losses. attr[0] = kind: 0 mse, 1 l1, 2 smooth_l1 (param = beta), 3 huber (param    \
     = delta), 4 binary cross entropy (weight optional); attr[1] = reduction (0 none,   \
     1 mean, 2 sum). self, target (and weight) have out's (reduction none) sizes */     \
  _(PointwiseLoss)         /* self, target, weight|none, param(f) -> out */             \
  _(PointwiseLossBackward) /* grad_out (self's sizes, or 1 elem when reduced), self,    \
                              target, weight|none, param(f) -> grad_in */

// gather and index (lower_gather.cpp). Gather/scatter: any strides, index
// Int64|Int32, out may alias self.
#define OPENNEURON_GATHER_OPS(_)                                                        \
  _(Gather)     /* self, index -> out (index's sizes); attr[0] = dim */                 \
  _(Scatter)    /* self, index, src (tensor in self's dtype, or a scalar) -> out        \
                   (self's sizes); attr[0] = dim, attr[1] = reduce: 0 assign, 1 add,    \
                   2 prod, 3 amax, 4 amin, 5 mean; attr[2] = include_self */            \
  _(IndexAdd)   /* self, index[n], src, alpha(scalar) -> out; attr[0] = dim */          \
  _(IndexCopy)  /* self, index[n], src -> out; attr[0] = dim */                         \
  _(Index)      /* self, indices[m, count] (Int64, dense; negative wrap) -> out: self's \
                   sizes with dims [p, p+m) replaced by [count]; attr[0] = p */         \
  _(IndexPut)   /* self, indices[m, count], values (Index's out sizes, any strides)     \
                   -> out (self with the values put; may alias self); attr[0] = p,      \
                   attr[1] = accumulate */                                              \
  _(IndexSelect)     /* self, index(Int64|Int32) -> out; attr[0] = dim */               \
  _(EmbeddingBackward) /* grad[..., D], indices -> out[num_weights, D];                 \
                          attr[0] = padding_idx (-1 none) */                            \
  _(Sort)       /* in -> values, indices(Int64): the first k (values' size at dim) of   \
                   the stable sort along dim, NaN largest; attr[0] = dim,               \
                   attr[1] = descending */                                              \
  _(Nonzero)    /* in -> out[n, ndim] Int64 (n = number of nonzeros, known) */          \
  _(Isin)       /* elements, test (one dtype) -> out(Bool); attr[0] = invert */

// select (lower_select.cpp): index patterns, arg reductions, scans (any strides)
#define OPENNEURON_SELECT_OPS(_)                                                        \
  _(Tril) _(Triu) /* in -> out (same dtype; in-place allowed); attr[0] = diagonal */    \
  _(ArgMax) _(ArgMin) /* in -> indices(Int64) [, values(in's dtype)]; outputs keep dim  \
                   as size 1; attr[0] = dim. NaN wins; first index on ties */           \
  _(Cumsum) _(Cumprod) /* in -> out (in converted to out's dtype); attr[0] = dim */

// optim (lower_optim.cpp). Optimizer ops update state in place: each output may
// alias the input it replaces (element i of an output depends only on element
// i of the inputs).
#define OPENNEURON_OPTIM_OPS(_)                                                         \
  /* optimizers (all tensors contiguous, one float dtype, param's sizes) */             \
  _(FusedAdam)  /* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|none, step(1 elem), \
                   lr(f | 1-elem tensor), beta1, beta2, weight_decay, eps (f),          \
                   grad_scale|none, found_inf|none (1-elem Float32)                     \
                   -> param', grad', exp_avg', exp_avg_sq'[, max_exp_avg_sq'];          \
                   attr[0] bits: 1 amsgrad, 2 maximize, 4 AdamW decay. Nothing is       \
                   written when found_inf == 1; grad' = grad / grad_scale if given */   \
  _(FusedSgd)   /* param, grad, momentum_buffer|none, lr(f | 1-elem tensor),            \
                   weight_decay, momentum, dampening (f), grad_scale|none,              \
                   found_inf|none -> param', grad'[, buf']; attr[0] bits: 1 nesterov,   \
                   2 maximize, 4 first step (buf' = grad) */                            \
  _(NormAll)    /* in (any strides), ord(f) -> out (1 elem): the ord-norm of all of in; \
                   ord = +-inf, 0 (count nonzero), p > 0; accumulates in double */

// conv (lower_conv.cpp)
#define OPENNEURON_CONV_OPS(_)                                                          \
  /* tensor engine: convolution (oneDNN). in[N, C, *sp], weight [O, C/g, *k] (transposed: \
     [C, O/g, *k]), 1-3 spatial dims. attrs: transposed, groups, stride[nsp],           \
     padding[nsp], dilation[nsp], output_padding[nsp] (symmetric padding) */            \
  _(Convolution)               /* in, weight, bias|none -> out */                       \
  _(ConvolutionBackwardInput)  /* grad_out, weight -> grad_in; attrs as Convolution */  \
  _(ConvolutionBackwardWeight) /* grad_out, in -> grad_weight; attrs as Convolution */

// pool and upsample (lower_pool.cpp)
#define OPENNEURON_POOL_OPS(_)                                                          \
  /* pooling over the last two dims of [N, C, H, W] or [C, H, W] */                     \
  _(MaxPool2d)   /* in -> out, indices(Int64, flat h*W+w); attrs kH, kW, sH, sW, pH, pW, \
                    dH, dW (out sizes given, so ceil_mode is implied) */                \
  _(AvgPool2d)   /* in -> out; attrs kH, kW, sH, sW, pH, pW, count_include_pad,         \
                    divisor_override (0 none) */                                        \
  _(AvgPool2dBackward) /* grad_out -> grad_in; attrs as AvgPool2d */                    \
  _(AdaptiveAvgPool2d) /* in -> out; windows from in/out sizes */                       \
  _(AdaptiveAvgPool2dBackward) /* grad_out -> grad_in */                                \
  _(AdaptiveMaxPool2d) /* in -> out, indices(Int64) */                                  \
  _(MaxPool2dBackward) /* grad_out, indices -> grad_in (scatter-add by index) */        \
  /* upsampling of the last two dims; scales (f) are the user's scale factors or 0      \
     (then in/out sizes) */                                                             \
  _(UpsampleNearest2d)         /* in, scale_h, scale_w -> out */                        \
  _(UpsampleNearest2dBackward) /* grad_out, scale_h, scale_w -> grad_in */              \
  _(UpsampleBilinear2d)        /* in, scale_h, scale_w -> out; attr[0] align_corners */ \
  _(UpsampleBilinear2dBackward) /* grad_out, scale_h, scale_w -> grad_in; attr[0] as fwd */

// attention (lower_attention.cpp). Fused scaled dot-product attention
// (memory-efficient: scores are never materialised). q[B, H, L, E],
// k[B, Hk, S, E], v[B, Hk, S, Ev] of one dtype Float32|BFloat16|Float16,
// H % Hk == 0; mask: Bool (true = keep) or an additive float tensor with
// [B, H, L, S] sizes (broadcast dims stride 0), or none. attr[0] = causal
// (top-left: query i sees keys j <= i), attr[1] = dropout (seed, offset draw
// Philox as AttentionParams). A row with every key masked outputs 0 and lse
// +inf.
#define OPENNEURON_ATTENTION_OPS(_)                                                     \
  _(Attention)  /* q, k, v, mask|none, scale(f), dropout_p(f), seed(i), offset(i)       \
                   -> out[B, H, L, Ev] (q's dtype), lse[B, H, L] (Float32) */           \
  _(AttentionBackward) /* grad_out, q, k, v, out, lse, mask|none, scale(f),             \
                   dropout_p(f), seed(i), offset(i) -> grad_q, grad_k, grad_v (the      \
                   sizes of q, k, v; q's dtype); attrs as Attention */

// rnn (lower_rnn.cpp): the pointwise part of one LSTM or GRU cell step (the GEMMs
// are Mm nodes before it). Tensors contiguous, one dtype Float32|BFloat16|Float16,
// computed in float with one rounding per output. Gate order i, f, g, o (LSTM) and
// r, z, n (GRU), as PyTorch's weights are laid out.
#define OPENNEURON_RNN_OPS(_)                                                           \
  _(LstmCell)   /* input_gates[B,4H], hidden_gates[B,4H], cx[B,H], input_bias[4H]|none, \
                   hidden_bias[4H]|none -> hy[B,H], cy[B,H], workspace[B,4H] (the       \
                   activated gates) */                                                  \
  _(LstmCellBackward) /* grad_hy|none, grad_cy|none, cx, cy, workspace                 \
                   -> grad_gates[B,4H], grad_cx[B,H] */                                 \
  _(GruCell)    /* input_gates[B,3H], hidden_gates[B,3H], hx[B,H], input_bias[3H]|none, \
                   hidden_bias[3H]|none -> hy[B,H], workspace[B,5H] (r, z, n, hx,       \
                   hidden n gate + bias) */                                             \
  _(GruCellBackward) /* grad_hy, workspace -> grad_input_gates[B,3H],                   \
                   grad_hidden_gates[B,3H], grad_hx[B,H] */

// An LSTM or GRU layer's recurrence in one direction, Float32 only: the step GEMMs
// run inside; the input projections and the weight gradients are Mm nodes around it.
#define OPENNEURON_RNN_SEQUENCE_OPS(_)                                                       \
  _(LstmSequence)         /* xw[T,B,4H] (the input projections, biases added), w_hh[4H,H],   \
                             h0[B,H], c0[B,H] -> y[T,B,H], h_n[B,H], c_n[B,H], and for a     \
                             backward cells[T,B,H], gates[T,B,4H]; attrs: reverse */         \
  _(LstmSequenceBackward) /* grad_y|none, grad_h_n|none, grad_c_n|none, w_hh, c0,            \
                             cells, gates -> grad_gates[T,B,4H] (of the                      \
                             pre-activations), grad_h0[B,H], grad_c0[B,H]; attrs: reverse */ \
  _(GruSequence)          /* xw[T,B,3H] (x W_ih^T + b_ih), w_hh[3H,H], b_hh[3H]|none,        \
                             h0[B,H] -> y[T,B,H], h_n[B,H], and for a backward               \
                             gates[T,B,4H] (r, z, n, h_n); attrs: reverse */                 \
  _(GruSequenceBackward)  /* grad_y|none, grad_h_n|none, w_hh, h0, y, gates                  \
                             -> grad_input_gates[T,B,3H], grad_hidden_gates[T,B,3H],         \
                             grad_h0[B,H]; attrs: reverse */

// fused (fuse.cpp, lower_fused.cpp): made by the compiler's passes, never by the
// torch bridge.
#define OPENNEURON_FUSED_OPS(_)                                                         \
  _(FusedElementwise) /* loaded tensors..., scalars... -> stored tensors...: a chain    \
                         of elementwise steps (attrs: see fuse.cpp) */

#define OPENNEURON_FOR_EACH_OP(_) \
  OPENNEURON_CREATION_OPS(_)      \
  OPENNEURON_RNG_OPS(_)           \
  OPENNEURON_ELEMENTWISE_OPS(_)   \
  OPENNEURON_ACTIVATION_OPS(_)    \
  OPENNEURON_REDUCE_OPS(_)        \
  OPENNEURON_MM_OPS(_)            \
  OPENNEURON_NORM_OPS(_)          \
  OPENNEURON_SOFTMAX_OPS(_)       \
  OPENNEURON_LOSS_OPS(_)          \
  OPENNEURON_GATHER_OPS(_)        \
  OPENNEURON_SELECT_OPS(_)        \
  OPENNEURON_OPTIM_OPS(_)         \
  OPENNEURON_CONV_OPS(_)          \
  OPENNEURON_POOL_OPS(_)          \
  OPENNEURON_ATTENTION_OPS(_)     \
  OPENNEURON_RNN_OPS(_)           \
  OPENNEURON_RNN_SEQUENCE_OPS(_)  \
  OPENNEURON_FUSED_OPS(_)

enum class Op : uint16_t {
#define OPENNEURON_OP_ENUM(name) name,
  OPENNEURON_FOR_EACH_OP(OPENNEURON_OP_ENUM)
#undef OPENNEURON_OP_ENUM
};

const char* op_name(Op op);
// A hash of the op names in enum order. Graphs as bytes (graph_io.h) name ops
// by number, so the on-disk cache keys its entries by this: an op added or
// moved makes older entries miss instead of decoding as other ops.
uint64_t op_table_fingerprint();

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

// Where a view value's elements live: `offset` bytes into the storage of `base`.
struct ViewOf {
  ValueId base = -1;  // -1: not a view
  int64_t offset = 0;
};

// Values are numbered in creation order. Graph inputs and outputs are the
// program's launch arguments, in this order: inputs, then outputs (then the
// scratch buffer, if the compiled program needs one). Values that are neither
// are intermediates, placed in the scratch buffer by the compiler.
//
// A view is a tensor value with its own sizes and strides over the memory of a
// base value (a launch argument or an intermediate, never another view). Nodes
// read and write a base through its views in node order, so one base may be
// written by several nodes: this is how a captured eager program (in-place ops,
// outputs written into slices of one buffer) is expressed. A base's memory is
// live from the first node that touches it or one of its views to the last.
class Graph {
 public:
  ValueId add_input(const ValueType& type);
  ValueId add_value(const ValueType& type);  // intermediate or output
  ValueId add_view(ValueId base, const TensorType& type, int64_t byte_offset);
  void add_node(Op op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                std::vector<int64_t> attrs = {});
  void mark_output(ValueId v);
  // The same values, inputs, outputs and views with other nodes (a pass's result).
  Graph with_nodes(std::vector<Node> nodes) const;
  // A graph from its parts (graph_io.cpp reading bytes). Throws std::invalid_argument
  // when an id is out of range or a view's base is not a tensor that is not a view.
  static Graph assemble(std::vector<ValueType> values, std::vector<ValueId> inputs,
                        std::vector<ValueId> outputs, std::vector<ViewOf> views,
                        std::vector<Node> nodes);

  // One node whose operands are all launch arguments: operands[0..num_inputs)
  // are inputs, the rest outputs.
  static Graph single_op(Op op, const std::vector<ValueType>& operands, int num_inputs,
                         std::vector<int64_t> attrs = {});

  const std::vector<ValueType>& values() const { return values_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // views()[v].base >= 0 for views; empty when the graph has none.
  const std::vector<ViewOf>& views() const { return views_; }
  bool is_view(ValueId v) const {
    return static_cast<size_t>(v) < views_.size() && views_[v].base >= 0;
  }
  // The value holding v's memory: its base for a view, else v.
  ValueId storage_of(ValueId v) const { return is_view(v) ? views_[v].base : v; }

  // Canonical byte encoding of everything that affects the compiled program;
  // the program cache key.
  std::string signature() const;

  // The graph split in two (graph_fields.cpp): every integer that may follow the
  // sizes (tensor sizes and strides, view offsets, node attributes), in a fixed
  // order, and everything else. Two graphs with equal structure() differ only in
  // int_fields(); with_int_fields() puts other values in their place.
  std::vector<int64_t> int_fields() const;
  std::string structure() const;
  Graph with_int_fields(const std::vector<int64_t>& fields) const;

 private:
  std::vector<ValueType> values_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<Node> nodes_;
  std::vector<ViewOf> views_;
};

}  // namespace openneuron::compiler
