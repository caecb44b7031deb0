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
// operands have all-zero strides. Strides are in bytes. N operands at most.
template <int N>
struct BasicLoopPlan {
  int32_t ndim = 1;
  int32_t nops = 1;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};
using LoopPlan = BasicLoopPlan<kMaxOperands>;

// Builds a plan over `sizes` (the output's) for operands given by their types;
// a null type is a scalar operand (stride 0 everywhere). nops <= N.
template <int N>
BasicLoopPlan<N> make_basic_loop_plan(const TensorType* const* operand_types, int nops);
inline LoopPlan make_loop_plan(const TensorType* const* operand_types, int nops) {
  return make_basic_loop_plan<kMaxOperands>(operand_types, nops);
}

// An elementwise op of any family (copy, fill, elementwise, activation,
// DropoutBackward): out = ops[0], inputs = ops[1..]. `coef` holds op
// coefficients (alpha, value, threshold).
struct ElementwiseParams {
  uint16_t op = 0;
  uint8_t nin = 0;
  Operand ops[kMaxOperands];
  ScalarArg coef[2];
  LoopPlan plan;
};

// ------------------------------------------------------------ rnn

enum class RnnCellOp : uint8_t { LstmCell, LstmCellBackward, GruCell, GruCellBackward };

// One cell step over `batch` rows of `hidden` units (rnn.cpp). Operands as the
// compiler's LstmCell / LstmCellBackward / GruCell / GruCellBackward list them:
// in[0..4], out[0..2]; an absent optional operand has slot -1. All contiguous.
struct RnnCellParams {
  RnnCellOp op = RnnCellOp::LstmCell;
  DType dtype = DType::Float32;
  int64_t batch = 0, hidden = 0;
  TensorArg in[5], out[3];
};

// A whole LSTM layer's recurrence in one direction (rnn_sequence.cpp), Float32,
// all operands contiguous. The input projections of every step come in as one
// tensor (xw = x W_ih^T + b_ih + b_hh, one GEMM before); each step adds
// h_{t-1} W_hh^T and applies the cell. `reverse` runs t = T-1 .. 0; y[t] stays at
// its time position. cells and gates (the activated i, f, g, o) are what the
// backward reads; absent when no gradient is wanted.
struct LstmSequenceParams {
  int64_t steps = 0, batch = 0, hidden = 0;
  int32_t reverse = 0;
  TensorArg xw, w_hh, h0, c0;           // [T,B,4H], [4H,H], [B,H], [B,H]
  TensorArg y, h_n, c_n, cells, gates;  // [T,B,H], [B,H], [B,H], [T,B,H]|absent, [T,B,4H]|absent
};

// Its backward through time: the gradients of the gate pre-activations at every
// step (from which the caller forms the weight and input gradients with GEMMs over
// the whole sequence) and of the initial state. Absent output gradients are zeros.
struct LstmSequenceBackwardParams {
  int64_t steps = 0, batch = 0, hidden = 0;
  int32_t reverse = 0;
  TensorArg grad_y, grad_h_n, grad_c_n;    // [T,B,H]|absent, [B,H]|absent, [B,H]|absent
  TensorArg w_hh, c0, cells, gates;        // as saved by the forward
  TensorArg grad_gates, grad_h0, grad_c0;  // [T,B,4H], [B,H], [B,H]
};

// The same for a GRU layer. xw = x W_ih^T + b_ih; b_hh is added to the step's
// hidden gates (its n part inside r * (h W_hn^T + b_hn)). gates holds r, z, n and
// the hidden n gate h_n (with its bias) per step, for the backward.
struct GruSequenceParams {
  int64_t steps = 0, batch = 0, hidden = 0;
  int32_t reverse = 0;
  TensorArg xw, w_hh, b_hh, h0;  // [T,B,3H], [3H,H], [3H]|absent, [B,H]
  TensorArg y, h_n, gates;       // [T,B,H], [B,H], [T,B,4H]|absent
};

// Its backward through time: the gradients of the input gates (r, z, n) and of the
// hidden gates (r, z, and r times n's), per step, and of h0.
struct GruSequenceBackwardParams {
  int64_t steps = 0, batch = 0, hidden = 0;
  int32_t reverse = 0;
  TensorArg grad_y, grad_h_n;                              // [T,B,H]|absent, [B,H]|absent
  TensorArg w_hh, h0, y, gates;                            // as the forward's
  TensorArg grad_input_gates, grad_hidden_gates, grad_h0;  // [T,B,3H], [T,B,3H], [B,H]
};

// ------------------------------------------------------------ fused elementwise

// A chain of elementwise ops run as one pass over cache-sized tiles
// (fused_elementwise.cpp): each step computes exactly as its op's own kernel
// (the same formula in float, half-type results rounded as a stored result
// would be), so the chain's results equal the unfused ops' bit for bit.
enum class FusedOp : uint8_t {
  Copy,  // a -> a in the step's dtype (a conversion)
  Neg, Abs, Exp, Sqrt, Rsqrt, Reciprocal, Tanh, Sigmoid, Relu, Silu, Erf, GeluErf, GeluTanh,
  Add, Sub,  // a + coef * b, a - coef * b
  Mul, Div, Maximum, Minimum,
  ThresholdBackward,  // coef = threshold
  GeluErfBackward, GeluTanhBackward, SigmoidBackward, TanhBackward, SiluBackward,
};

inline constexpr int kMaxFusedOperands = 12;  // tensors loaded or stored
inline constexpr int kMaxFusedSteps = 32;
inline constexpr int kMaxFusedScalars = 8;
using FusedLoopPlan = BasicLoopPlan<kMaxFusedOperands>;

// Registers: [0, nin) hold the loaded tensor inputs, nin + i the result of step i.
// A source s >= 0 is register s; s < 0 is scalar -1 - s.
struct FusedStep {
  FusedOp op = FusedOp::Copy;
  DType dtype = DType::Float32;  // the result's: Float32, BFloat16 or Float16
  int8_t a = 0, b = 0;           // b unused by one-operand ops
  int8_t coef = -1;              // scalar index of alpha/threshold; -1: 1
};

struct FusedElementwiseParams {
  uint8_t nout = 0, nin = 0, nsteps = 0, nscalars = 0;
  // Tensor operands, outputs first: [0, nout) stored, [nout, nout + nin) loaded.
  Operand tensors[kMaxFusedOperands];
  int8_t out_reg[kMaxFusedOperands] = {};  // the register output k stores
  ScalarArg scalars[kMaxFusedScalars];
  FusedStep steps[kMaxFusedSteps];
  FusedLoopPlan plan;  // over `tensors`, in their order
};

// ------------------------------------------------------------ creation and copy

struct ArangeParams {
  ScalarArg start, step;
  TensorArg out;
};

// ------------------------------------------------------------ rng

enum class RandomOp : uint16_t { Uniform, Normal, Bernoulli, RandInt };

// Element e of `out` (row-major logical order) takes Philox4x32-10 output
// block (offset + e / per_block), lane e % per_block, under key `seed`.
struct RandomParams {
  RandomOp op = RandomOp::Uniform;
  ScalarArg seed, offset, a, b;
  TensorArg out;
};

// Dropout, BernoulliTensor, Exponential, Geometric, LogNormal, Randperm,
// Multinomial (RandomExtraOp). Contiguous operands; Philox draws as RandomParams.
enum class RandomExtraOp : uint16_t {
  Dropout, BernoulliTensor, Exponential, Geometric, LogNormal, Randperm, Multinomial,
};
struct RandomExtraParams {
  RandomExtraOp op = RandomExtraOp::Dropout;
  int32_t replacement = 0;  // Multinomial
  ScalarArg seed, offset, a, b;
  TensorArg in, out, mask;  // in: Dropout input, BernoulliTensor p, Multinomial probs
};

// ------------------------------------------------------------ elementwise

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

// ------------------------------------------------------------ activation

// Elementwise activations and math not in UnaryOp, through the elementwise
// engine (ElementwiseParams; coef[0], coef[1] are op parameters). Inputs are
// in0 (and in1, in2) in the order given; backward ops take in0 = grad.
enum class ActOp : uint16_t {
  Softplus,     // in0 = self; coef0 = beta, coef1 = threshold
  Mish, Hardswish, Hardsigmoid, LogSigmoid,
  Elu,          // in0 = self, in1 = input_scale (scalar); coef0 = alpha, coef1 = scale
  LeakyRelu,    // coef0 = negative_slope
  Hardtanh,     // coef0 = min, coef1 = max (clamp: NaN propagates)
  Exp2, Expm1, Log1p, Log2, Log10, Trunc, Frac, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh,
  Acosh, Atanh,
  IsInf, IsFinite,  // out Bool
  Fmod,         // in0 = a, in1 = b; integer division by zero fails (ZeroDivisionError)
  // backward: in0 = grad, in1 = self (coefficients as the forward op)
  SoftplusBackward, MishBackward, HardswishBackward, HardsigmoidBackward, LogSigmoidBackward,
  EluBackward,        // in2 = input_scale (scalar)
  EluBackwardResult,  // in1 = the forward result instead of self
  LeakyReluBackward, HardtanhBackward,
};

// ------------------------------------------------------------ reduce

// Var and Std take deviations from the mean: sum(d * d) / divisor, squared
// and summed in double (Std: its square root, taken before narrowing).
enum class ReduceOp : uint16_t { Sum, Mean, Prod, Amax, Amin, Var, Std };

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
  ScalarArg divisor;  // Var, Std
};

// ------------------------------------------------------------ mm

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

// ------------------------------------------------------------ norm

// Norms. All tensors dense row-major. x/y/grad/dx: Float32, BFloat16 or
// Float16; weight, bias, statistics and running stats: Float32 (the compiler
// converts other dtypes through temporaries).
enum class NormOp : uint16_t {
  LayerNorm,          // x[rows, cols] -> y, mean[rows] (not for rms), rstd[rows]
  LayerNormBackward,  // grad, x, mean, rstd, weight -> dx, dweight[cols], dbias[cols]
  GroupNorm,          // x[n, c, hw] -> y, mean[n, groups], rstd[n, groups]
  GroupNormBackward,  // grad, x, mean, rstd, weight -> dx, dweight[c], dbias[c]
  BatchNorm,          // x[n, c, hw] -> y, mean[c], invstd[c]; updates running stats
  BatchNormBackward,  // grad, x, weight, running stats or saved stats -> dx, dweight, dbias
};
struct NormParams {
  NormOp op = NormOp::LayerNorm;
  uint8_t rms = 0;       // LayerNorm*: RMS norm (no mean subtraction, no bias)
  uint8_t training = 0;  // BatchNorm*: batch statistics (else running statistics)
  uint8_t mask = 7;      // backward: bit 0 dx, bit 1 dweight, bit 2 dbias
  uint8_t channels_last = 0;  // BatchNorm/GroupNorm forward: x, y [N, C, HW] stored [N, HW, C]
  int64_t rows = 0, cols = 0;       // LayerNorm*
  int64_t n = 0, c = 0, hw = 0, groups = 1;  // GroupNorm*, BatchNorm*
  ScalarArg eps, momentum;
  TensorArg x, grad, weight, bias, mean, rstd, running_mean, running_var;
  TensorArg y, out_mean, out_rstd;  // forward outputs
  TensorArg dx, dweight, dbias;     // backward outputs
};

// ------------------------------------------------------------ softmax

enum class SoftmaxOp : uint16_t { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };

// Softmax family over one dim. Forward: in0 = input. Backward: in0 = grad_out,
// in1 = forward output.
struct SoftmaxParams {
  SoftmaxOp op = SoftmaxOp::Softmax;
  int32_t dim = 0;
  TensorArg in0, in1, out;
};

// ------------------------------------------------------------ loss

struct NllLossParams {
  int32_t reduction = 1;  // 0 none, 1 mean, 2 sum
  int64_t ignore_index = -100;
  TensorArg self, target, weight, out, total_weight;
  TensorArg grad_out, grad_in;  // backward only (out unused there)
};

// PointwiseLoss(+Backward), contiguous operands. Forward writes `out`;
// backward reads grad_out and writes grad_in.
enum class LossKind : int32_t { Mse, L1, SmoothL1, Huber, BinaryCrossEntropy };
struct PointwiseLossParams {
  LossKind kind = LossKind::Mse;
  int32_t reduction = 1;  // 0 none, 1 mean, 2 sum
  int64_t numel = 0;
  TensorArg self, target, weight, out, grad_out, grad_in;
  ScalarArg param;  // beta / delta
};

// ------------------------------------------------------------ gather and index

// Scatter/gather along one dim. All tensors any strides; index Int64; out has
// self's sizes (Gather: index's sizes). `out` may be `self` (in place);
// otherwise self is copied into out first.
enum class ScatterOp : uint16_t {
  Gather,        // out[...i...] = self[...index[...i...]...]
  Scatter,       // out = self; out[...index...] = src (src tensor or scalar `value`)
  ScatterAdd,    // out = self; out[...index...] += src
  ScatterProd, ScatterAmax, ScatterAmin, ScatterMean,  // scatter_reduce (include_self)
  IndexAdd,      // out = self; out.select(dim, index[i]) += value * src.select(dim, i)
  IndexCopy,     // out = self; out.select(dim, index[i]) = src.select(dim, i)
};
struct ScatterParams {
  ScatterOp op = ScatterOp::Gather;
  int32_t dim = 0;
  uint8_t include_self = 1;
  TensorArg self, index, src, out;  // src absent: scalar `value`
  ScalarArg value;                  // scalar src, or alpha for IndexAdd
};

// Advanced indexing with m index tensors on consecutive dims: self viewed as
// [pre, d_0.., d_{m-1}, post] (any strides), indices [m, count] Int64 dense
// (negative values wrap). Index: out[pre, count, post] dense. IndexPut:
// out (= self, updated in place; any strides) [...] (+)= values[pre, count, post]
// (any strides, broadcast allowed); self is copied into out first unless it
// is out.
struct IndexParams {
  uint8_t put = 0;
  uint8_t accumulate = 0;
  int32_t nidx = 0;
  int32_t pos = 0;  // first indexed dim of self
  TensorArg self, indices, values, out;
};

struct IndexSelectParams {
  int32_t dim = 0;
  TensorArg self, index, out;
};

struct EmbeddingBackwardParams {
  int64_t padding_idx = -1;
  TensorArg grad, indices, out;  // out: float32 or the grad's dtype
};

// Stable sort along `dim` (NaN sorts as the largest value); values and Int64
// indices of the first `k` positions (k = size for sort; topk: k largest or
// smallest, ties by lower index). in any strides; values/indices any strides.
struct SortParams {
  int32_t dim = 0;
  uint8_t descending = 0;
  uint8_t stable = 0;  // 0: the CPU's std::sort tie order (at::sort's default), 1: stable
  int64_t k = 0;
  TensorArg in, values, indices;
};

// Nonzero: out[n, ndim] Int64 (dense) = coordinates of the nonzero elements of
// `in` (any strides) in row-major order; n must equal their count.
struct NonzeroParams {
  TensorArg in, out;
};

// Isin: out[i] = elements[i] in test (one dtype; any strides) xor invert.
struct IsinParams {
  uint8_t invert = 0;
  TensorArg elements, test, out;  // out Bool, elements' sizes
};

// ------------------------------------------------------------ select

// Index-driven and ordering ops over one dim. Tensors are dense row-major
// unless noted; `dim` is the normalised dim.
enum class TriOp : uint16_t { Tril, Triu };
struct TriParams {  // keeps (i, j) of the last two dims where j - i <= k (tril) / >= k (triu)
  TriOp op = TriOp::Tril;
  int64_t diagonal = 0;
  TensorArg in, out;  // same dtype, same sizes, any strides
};

enum class ArgReduceOp : uint16_t { Max, Min };
// values/indices over `dim` of `in` (any strides); NaN wins, first index on ties.
struct ArgReduceParams {
  ArgReduceOp op = ArgReduceOp::Max;
  int32_t dim = 0;
  TensorArg in, values, indices;  // values optional; indices Int64. Outputs keep dim as size 1.
};

enum class ScanOp : uint16_t { Cumsum, Cumprod };
struct ScanParams {
  ScanOp op = ScanOp::Cumsum;
  int32_t dim = 0;
  TensorArg in, out;  // in any strides (dtype converted by the compiler to out's)
};

// ------------------------------------------------------------ optim

// FusedAdam / FusedSgd over one contiguous tensor of `numel` elements; the
// out_* operands may alias the inputs they replace. FusedSgd: exp_avg is the
// momentum buffer, beta1 = momentum, beta2 = dampening.
struct FusedOptimParams {
  uint32_t flags = 0;  // FusedAdam: 1 amsgrad, 2 maximize, 4 AdamW; FusedSgd: 1 nesterov,
                       // 2 maximize, 4 first step
  int64_t numel = 0;
  TensorArg param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  TensorArg out_param, out_grad, out_exp_avg, out_exp_avg_sq, out_max_exp_avg_sq;
  TensorArg step, lr_tensor, grad_scale, found_inf;  // 1-element tensors, optional
  ScalarArg lr, beta1, beta2, weight_decay, eps;
};

// NormAll: `in` contiguous; out one element.
struct NormAllParams {
  TensorArg in, out;
  ScalarArg ord;
};

// ------------------------------------------------------------ conv

// Convolution through oneDNN; operands contiguous (NC[D]HW, OI[D]HW) or channels_last.
// op: 0 forward (src, weights, bias -> dst), 1 backward data (dst holds
// grad_out, writes src), 2 backward weights (dst = grad_out, src -> weights).
struct ConvParams {
  DType dtype = DType::Float32;
  int32_t op = 0, nsp = 2, transposed = 0, groups = 1;
  // Operands stored in channels_last order (TensorType::is_channels_last) instead of
  // contiguous: src and dst of the conv view, and the weights ([Co, *k, Ci]; groups 1).
  int32_t src_channels_last = 0, dst_channels_last = 0, wei_channels_last = 0;
  int64_t src_dims[5] = {}, wei_dims[6] = {}, dst_dims[5] = {};  // grouped weights: G first
  int64_t stride[3] = {}, pad_l[3] = {}, pad_r[3] = {}, dilation[3] = {};  // oneDNN dilation
  TensorArg src, weights, bias, dst;
};

// ------------------------------------------------------------ pool and upsample

// Pooling and upsampling over the last two dims; contiguous operands viewed
// as [planes, H, W]. Backward ops read `out` (grad_out) and write `in`
// (grad_in). Pool2dKind selects the op.
enum class Pool2dKind : int32_t {
  MaxPool, AvgPool, AvgPoolBackward, AdaptiveAvg, AdaptiveAvgBackward, AdaptiveMax,
  MaxPoolBackward, UpsampleNearest, UpsampleNearestBackward, UpsampleBilinear,
  UpsampleBilinearBackward,
};
struct Pool2dParams {
  Pool2dKind kind = Pool2dKind::MaxPool;
  DType dtype = DType::Float32;
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int32_t count_include_pad = 1, align_corners = 0;
  int64_t divisor_override = 0;
  int64_t channels_last = 0;  // MaxPool: operands [N, H, W, C] with C channels, planes = N
  TensorArg in, out, indices;
  ScalarArg scale_h, scale_w;
};

// ------------------------------------------------------------ attention

// Memory-efficient attention (online softmax over key blocks of block_k,
// query blocks of block_q). q[B, H, L, E], k[B, Hk, S, E], v[B, Hk, S, Ev],
// out[B, H, L, Ev] (q's dtype), lse[B, H, L] Float32; H % Hk == 0 (GQA: query
// head h reads kv head h / (H / Hk)). q/k/v/out/grad tensors: any strides with
// unit stride in the last dim. mask: optional, Bool (true = keep) or additive
// float, any strides over [B, H, L, S] (broadcast dims stride 0). Causal is
// top-left aligned (query i sees keys j <= i). Dropout (has_dropout and p > 0):
// element (b, h, i, j) is kept when lane e % 4 of Philox block offset + e / 4
// (e its row-major index in [B, H, L, S]) is below 1 - p.
// Backward reads q, k, v, out, lse, grad_out, mask and writes grad_q (dense
// Float32, zeroed and accumulated by the kernel), grad_k and grad_v (q's dtype).
struct AttentionParams {
  uint8_t causal = 0;
  uint8_t backward = 0;
  uint8_t has_dropout = 0;
  int64_t b = 0, h = 0, hk = 0, l = 0, s = 0, e = 0, ev = 0;
  int64_t block_q = 64, block_k = 256;
  ScalarArg scale, dropout_p, seed, offset;
  TensorArg q, k, v, mask, out, lse;
  TensorArg grad_out, grad_q, grad_k, grad_v;
};

static_assert(std::is_trivially_copyable_v<ElementwiseParams>);
static_assert(std::is_trivially_copyable_v<GemmParams>);

}  // namespace openneuron::kernels