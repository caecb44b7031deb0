// Engine entry points. Each lookup returns the onrt_kernel_fn specialised for
// the given op and dtypes, or nullptr when the combination is unsupported (the
// compiler turns that into a CompileError). The matching params blob is in
// params.h. Grouped by op family in graph.h's order; each heading names the
// files under csrc/kernels that implement the family.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openneuron/kernels/params.h"
#include "openneuron/kernels/types.h"
#include "openneuron/runtime.h"

namespace openneuron::kernels {

// --- creation and copy (creation.cpp)
// ElementwiseParams, nin = 1: out = convert(in). Any pair among Bool..Float32;
// Complex64 only to itself; Float8 to/from the other non-complex types.
onrt_kernel_fn copy_kernel(DType out, DType in);
// ElementwiseParams, nin = 1 with ops[1] a scalar.
onrt_kernel_fn fill_kernel(DType out);
// ArangeParams.
onrt_kernel_fn arange_kernel(DType out);

// --- rng (rng.cpp)
// RandomParams. Uniform/Normal: float types; Bernoulli/RandInt: any real type.
onrt_kernel_fn random_kernel(RandomOp op, DType out);
// Philox blocks consumed by a random op over `numel` elements: the caller
// advances its offset by this much so the next call draws fresh numbers.
int64_t random_offset_increment(RandomOp op, DType out, int64_t numel);
// RandomExtraParams; `in` is the dtype of the input tensor (or of out).
onrt_kernel_fn random_extra_kernel(RandomExtraOp op, DType out, DType in);
// Philox blocks a RandomExtraOp consumes for `numel` output elements.
int64_t random_extra_offset_increment(RandomExtraOp op, int64_t numel);
// ElementwiseParams: DropoutBackward (grad, mask(Bool), coef[0] = scale).
onrt_kernel_fn dropout_backward_kernel(DType out);

// --- elementwise (elementwise_*.cpp)
// ElementwiseParams. `in` is the dtype of the tensor inputs (all equal).
onrt_kernel_fn unary_kernel(UnaryOp op, DType out, DType in);
onrt_kernel_fn binary_kernel(BinaryOp op, DType out, DType in);
// For Where, `in` is the dtype of the value operands (cond is Bool).
onrt_kernel_fn ternary_kernel(TernaryOp op, DType out, DType in);

// --- rnn (rnn.cpp)
// RnnCellParams for Float32, BFloat16 and Float16; nullptr for other dtypes.
onrt_kernel_fn rnn_cell_kernel(RnnCellOp op, DType dtype);
// --- rnn_sequence.cpp: LstmSequenceParams / LstmSequenceBackwardParams and the GRU's
// (Float32).
int lstm_sequence(const void* params, const onrt_arg* args, char* err, size_t errlen);
int lstm_sequence_backward(const void* params, const onrt_arg* args, char* err, size_t errlen);
int gru_sequence(const void* params, const onrt_arg* args, char* err, size_t errlen);
int gru_sequence_backward(const void* params, const onrt_arg* args, char* err, size_t errlen);

// --- fused elementwise (fused_elementwise.cpp)
// FusedElementwiseParams: a chain of elementwise steps, one pass over tiles.
int fused_elementwise(const void* params, const onrt_arg* args, char* err, size_t errlen);

// --- activation (activation.cpp)
// ElementwiseParams for an ActOp. `in` is the dtype of the tensor inputs; out
// equals in except IsInf/IsFinite (Bool). Transcendentals: Float32/BFloat16/
// Float16; Hardtanh, Trunc, Fmod also integers; IsInf/IsFinite any real type.
onrt_kernel_fn activation_kernel(ActOp op, DType out, DType in);

// --- reduce (reduce.cpp)
// ReduceParams.
onrt_kernel_fn reduce_kernel(ReduceOp op, DType out, DType in);

// --- mm (gemm.cpp, gemm_blis.cpp)
// GemmParams: Float32, BFloat16, Float16 (BLIS for float32 in row- or
// column-major layouts, oneDNN for the rest).
onrt_kernel_fn gemm_kernel(DType dtype);
// Whether oneDNN has a matmul for this dtype on this CPU; when it does not,
// the compiler computes in Float32 (products of half types are exact there)
// and rounds once.
bool gemm_native(DType dtype);

// --- norm (norm.cpp)
// NormParams; dtype is that of x/y/grad/dx (Float32, BFloat16, Float16).
onrt_kernel_fn norm_kernel(DType dtype);

// --- softmax (softmax.cpp)
// SoftmaxParams. `out` may be Float32 for half inputs (half_to_float).
onrt_kernel_fn softmax_kernel(SoftmaxOp op, DType out, DType in);

// --- loss (loss.cpp)
// NllLossParams: forward writes out + total_weight; backward writes grad_in.
onrt_kernel_fn nll_loss_kernel(DType self);
onrt_kernel_fn nll_loss_backward_kernel(DType self);
// PointwiseLossParams: Float32/BFloat16/Float16.
onrt_kernel_fn pointwise_loss_kernel(DType dtype, bool backward);

// --- gather and index (gather.cpp, gather_index_select.cpp)
// ScatterParams (the op is in the params), SortParams, NonzeroParams,
// IsinParams: the nine real types. IndexParams: get any element type
// (bytewise), put (IndexPut, accumulate) the nine real types.
onrt_kernel_fn scatter_kernel(DType dtype);
onrt_kernel_fn sort_kernel(DType dtype);
onrt_kernel_fn nonzero_kernel(DType dtype);
onrt_kernel_fn isin_kernel(DType dtype);
onrt_kernel_fn index_kernel(bool put, DType dtype);
// IndexSelectParams: any element type; index Int64 or Int32.
onrt_kernel_fn index_select_kernel(DType self, DType index);
// EmbeddingBackwardParams: zeroes out and sums grad rows into it.
onrt_kernel_fn embedding_backward_kernel(DType out, DType grad, DType index);

// --- select (select.cpp)
// TriParams: any element type (copied bytewise).
onrt_kernel_fn tri_kernel(DType dtype);
// ArgReduceParams over the nine real types.
onrt_kernel_fn argreduce_kernel(ArgReduceOp op, DType in);
// ScanParams: in and out of `dtype` (integers accumulate in Int64, floats in double).
onrt_kernel_fn scan_kernel(ScanOp op, DType dtype);

// --- optim (optim.cpp)
// FusedOptimParams: params of `param` dtype (Float32/BFloat16/Float16).
onrt_kernel_fn fused_adam_kernel(DType param);
onrt_kernel_fn fused_sgd_kernel(DType param);
// NormAllParams: float in, float out.
onrt_kernel_fn norm_all_kernel(DType out, DType in);

// --- conv (conv.cpp)
// ConvParams: Float32 and BFloat16. conv_native: whether a case runs in its own dtype
// (op as ConvParams::op; reduced_channels: the channels per group its sums run over);
// the lowering converts other cases to Float32.
onrt_kernel_fn conv_kernel(DType dtype);
bool conv_native(DType dtype, int32_t op, int64_t reduced_channels);

// --- pool and upsample (pool.cpp)
// Pool2dParams.
onrt_kernel_fn pool2d_kernel(Pool2dKind kind, DType dtype);

// --- attention (attention.cpp)
// AttentionParams: q/k/v of `dtype` (Float32, BFloat16, Float16).
onrt_kernel_fn attention_kernel(DType dtype, bool backward);
// Philox blocks the dropout of an attention over [b, h, l, s] consumes.
int64_t attention_offset_increment(int64_t b, int64_t h, int64_t l, int64_t s);

// --- collectives (reduce_buffers.cpp): plain host calls, not kernels; the
// shared-memory collectives reduce and copy their staging buffers with them.
enum class BufferReduce : uint8_t { Sum, Product, Min, Max, BitAnd, BitOr, BitXor };
// dst[i] = srcs[0][i] op srcs[1][i] op ... for i < count; dst may alias any
// source. Bool..Float32 and Float64; Float16/BFloat16 accumulate in float over
// all sources and round once; integer Sum/Product wrap; Min/Max propagate NaN.
// Bit ops on integral types and Bool (Bool: Sum/Max/BitOr are or,
// Product/Min/BitAnd are and). Throws std::invalid_argument otherwise.
// copy_to, if given, receives the result too: each tile is copied while it is
// in cache, instead of a second pass over dst (it may alias a source, as dst may).
void reduce_buffers(DType dtype, BufferReduce op, void* dst, const void* const* srcs, int nsrcs,
                    size_t count, void* copy_to = nullptr);
// memcpy split over the pool when large.
void copy_buffer(void* dst, const void* src, size_t bytes);

// Intra-op thread pool shared by all kernels (parallel.cpp). Defaults to
// std::thread::hardware_concurrency(), or OPENNEURON_INTRAOP_THREADS.
int num_threads();
void set_num_threads(int n);  // for later parallel regions; n <= 0 restores the default

}  // namespace openneuron::kernels