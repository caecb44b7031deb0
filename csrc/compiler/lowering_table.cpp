// The lowering table: one line per op, naming the emitter that turns a node of
// that op into engine instructions, grouped by op family in graph.h's order.
// An op missing here fails to compile with a CompileError naming it.
#include <array>

#include "lowering.h"

namespace openneuron::compiler::detail {
namespace {

struct Entry {
  Op op;
  Emitter emit;
};

constexpr Entry kTable[] = {
    // creation and copy
    {Op::Copy, lower_copy},
    {Op::Fill, lower_fill},
    {Op::Arange, lower_arange},
    // rng
    {Op::Uniform, lower_random},
    {Op::Normal, lower_random},
    {Op::Bernoulli, lower_random},
    {Op::RandInt, lower_random},
    {Op::Dropout, lower_random_extra},
    {Op::DropoutBackward, lower_dropout_backward},
    {Op::BernoulliTensor, lower_random_extra},
    {Op::Exponential, lower_random_extra},
    {Op::Geometric, lower_random_extra},
    {Op::LogNormal, lower_random_extra},
    {Op::Randperm, lower_random_extra},
    {Op::Multinomial, lower_random_extra},
    // elementwise
    {Op::Neg, lower_unary},
    {Op::Abs, lower_unary},
    {Op::Exp, lower_unary},
    {Op::Log, lower_unary},
    {Op::Sqrt, lower_unary},
    {Op::Rsqrt, lower_unary},
    {Op::Reciprocal, lower_unary},
    {Op::Sin, lower_unary},
    {Op::Cos, lower_unary},
    {Op::Tanh, lower_unary},
    {Op::Sigmoid, lower_unary},
    {Op::Relu, lower_unary},
    {Op::Silu, lower_unary},
    {Op::Erf, lower_unary},
    {Op::Floor, lower_unary},
    {Op::Ceil, lower_unary},
    {Op::Round, lower_unary},
    {Op::Sign, lower_unary},
    {Op::LogicalNot, lower_unary},
    {Op::Gelu, lower_unary},
    {Op::Add, lower_binary},
    {Op::Sub, lower_binary},
    {Op::Mul, lower_binary},
    {Op::Div, lower_binary},
    {Op::Maximum, lower_binary},
    {Op::Minimum, lower_binary},
    {Op::Pow, lower_binary},
    {Op::Remainder, lower_binary},
    {Op::FloorDivide, lower_binary},
    {Op::DivTrunc, lower_binary},
    {Op::Atan2, lower_binary},
    {Op::Eq, lower_compare},
    {Op::Ne, lower_compare},
    {Op::Lt, lower_compare},
    {Op::Le, lower_compare},
    {Op::Gt, lower_compare},
    {Op::Ge, lower_compare},
    {Op::LogicalAnd, lower_compare},
    {Op::LogicalOr, lower_compare},
    {Op::BitwiseAnd, lower_bitwise},
    {Op::BitwiseOr, lower_bitwise},
    {Op::BitwiseXor, lower_bitwise},
    {Op::Where, lower_where},
    {Op::Addcmul, lower_pointwise3},
    {Op::Addcdiv, lower_pointwise3},
    {Op::Lerp, lower_pointwise3},
    {Op::Clamp, lower_clamp},
    {Op::ThresholdBackward, lower_backward_binary},
    {Op::GeluBackward, lower_backward_binary},
    {Op::SigmoidBackward, lower_backward_binary},
    {Op::TanhBackward, lower_backward_binary},
    {Op::SiluBackward, lower_backward_binary},
    // activation
    {Op::Softplus, lower_activation},
    {Op::Mish, lower_activation},
    {Op::Hardswish, lower_activation},
    {Op::Hardsigmoid, lower_activation},
    {Op::LogSigmoid, lower_activation},
    {Op::Elu, lower_activation},
    {Op::LeakyRelu, lower_activation},
    {Op::Hardtanh, lower_activation},
    {Op::Exp2, lower_activation},
    {Op::Expm1, lower_activation},
    {Op::Log1p, lower_activation},
    {Op::Log2, lower_activation},
    {Op::Log10, lower_activation},
    {Op::Trunc, lower_activation},
    {Op::Frac, lower_activation},
    {Op::Tan, lower_activation},
    {Op::Asin, lower_activation},
    {Op::Acos, lower_activation},
    {Op::Atan, lower_activation},
    {Op::Sinh, lower_activation},
    {Op::Cosh, lower_activation},
    {Op::Asinh, lower_activation},
    {Op::Acosh, lower_activation},
    {Op::Atanh, lower_activation},
    {Op::IsInf, lower_activation},
    {Op::IsFinite, lower_activation},
    {Op::Fmod, lower_activation},
    {Op::SoftplusBackward, lower_activation},
    {Op::MishBackward, lower_activation},
    {Op::HardswishBackward, lower_activation},
    {Op::HardsigmoidBackward, lower_activation},
    {Op::LogSigmoidBackward, lower_activation},
    {Op::EluBackward, lower_activation},
    {Op::LeakyReluBackward, lower_activation},
    {Op::HardtanhBackward, lower_activation},
    // reduce
    {Op::Sum, lower_reduce},
    {Op::Mean, lower_reduce},
    {Op::Prod, lower_reduce},
    {Op::Amax, lower_reduce},
    {Op::Amin, lower_reduce},
    {Op::Var, lower_reduce},
    {Op::Std, lower_reduce},
    // mm
    {Op::Mm, lower_mm},
    {Op::Addmm, lower_mm},
    {Op::Bmm, lower_mm},
    // norm
    {Op::LayerNorm, lower_layer_norm},
    {Op::LayerNormBackward, lower_layer_norm_backward},
    {Op::RmsNorm, lower_layer_norm},
    {Op::RmsNormBackward, lower_layer_norm_backward},
    {Op::GroupNorm, lower_group_norm},
    {Op::GroupNormBackward, lower_group_norm_backward},
    {Op::BatchNorm, lower_batch_norm},
    {Op::BatchNormBackward, lower_batch_norm_backward},
    // softmax
    {Op::Softmax, lower_softmax},
    {Op::LogSoftmax, lower_softmax},
    {Op::SoftmaxBackward, lower_softmax},
    {Op::LogSoftmaxBackward, lower_softmax},
    // loss
    {Op::NllLoss, lower_nll_loss},
    {Op::NllLossBackward, lower_nll_loss_backward},
    {Op::PointwiseLoss, lower_pointwise_loss},
    {Op::PointwiseLossBackward, lower_pointwise_loss},
    // gather and index
    {Op::Gather, lower_scatter},
    {Op::Scatter, lower_scatter},
    {Op::IndexAdd, lower_scatter},
    {Op::IndexCopy, lower_scatter},
    {Op::Index, lower_index},
    {Op::IndexPut, lower_index},
    {Op::IndexSelect, lower_index_select},
    {Op::EmbeddingBackward, lower_embedding_backward},
    {Op::Sort, lower_sort},
    {Op::Nonzero, lower_nonzero},
    {Op::Isin, lower_isin},
    // select
    {Op::Tril, lower_tri},
    {Op::Triu, lower_tri},
    {Op::ArgMax, lower_argreduce},
    {Op::ArgMin, lower_argreduce},
    {Op::Cumsum, lower_scan},
    {Op::Cumprod, lower_scan},
    // optim
    {Op::FusedAdam, lower_fused_adam},
    {Op::FusedSgd, lower_fused_sgd},
    {Op::NormAll, lower_norm_all},
    // conv
    {Op::Convolution, lower_conv},
    {Op::ConvolutionBackwardInput, lower_conv},
    {Op::ConvolutionBackwardWeight, lower_conv},
    // pool and upsample
    {Op::MaxPool2d, lower_pool2d},
    {Op::AvgPool2d, lower_pool2d},
    {Op::AvgPool2dBackward, lower_pool2d},
    {Op::AdaptiveAvgPool2d, lower_pool2d},
    {Op::AdaptiveAvgPool2dBackward, lower_pool2d},
    {Op::AdaptiveMaxPool2d, lower_pool2d},
    {Op::MaxPool2dBackward, lower_pool2d},
    {Op::UpsampleNearest2d, lower_pool2d},
    {Op::UpsampleNearest2dBackward, lower_pool2d},
    {Op::UpsampleBilinear2d, lower_pool2d},
    {Op::UpsampleBilinear2dBackward, lower_pool2d},
    // attention
    {Op::Attention, lower_attention},
    {Op::AttentionBackward, lower_attention},
    // rnn
    {Op::LstmCell, lower_rnn_cell},
    {Op::LstmCellBackward, lower_rnn_cell},
    {Op::GruCell, lower_rnn_cell},
    {Op::GruCellBackward, lower_rnn_cell},
    {Op::LstmSequence, lower_lstm_sequence},
    {Op::LstmSequenceBackward, lower_lstm_sequence_backward},
    {Op::GruSequence, lower_gru_sequence},
    {Op::GruSequenceBackward, lower_gru_sequence_backward},
    // fused
    {Op::FusedElementwise, lower_fused_elementwise},
};

constexpr size_t kNumOps = 0
#define OPENNEURON_COUNT_OP(name) +1
    OPENNEURON_FOR_EACH_OP(OPENNEURON_COUNT_OP)
#undef OPENNEURON_COUNT_OP
    ;

// Indexed by Op for O(1) lookup on the eager path.
constexpr std::array<Emitter, kNumOps> make_index() {
  std::array<Emitter, kNumOps> a{};
  for (const Entry& e : kTable) a[static_cast<size_t>(e.op)] = e.emit;
  return a;
}
constexpr std::array<Emitter, kNumOps> kIndex = make_index();

}  // namespace

Emitter find_emitter(Op op) {
  const size_t i = static_cast<size_t>(op);
  return i < kIndex.size() ? kIndex[i] : nullptr;
}

}  // namespace openneuron::compiler::detail
