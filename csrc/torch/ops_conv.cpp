// Convolution, forward and backward (1-3 spatial dims, groups, transposed), through
// PyTorch's convolution_overrideable hooks; complex32 convolutions in complex64.
// Lowering: lower_conv.cpp.
#include <ATen/ops/conv1d_native.h>
#include <ATen/ops/conv2d_native.h>
#include <ATen/ops/conv3d_native.h>
#include <ATen/ops/conv_transpose1d_native.h>
#include <ATen/ops/conv_transpose2d_native.h>
#include <ATen/ops/conv_transpose3d_native.h>

#include "op_helpers.h"
#include "output_layout.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ------------------------------------------------------------ convolution

std::vector<int64_t> conv_attrs(int64_t nsp, at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, bool transposed,
                                at::IntArrayRef output_padding, int64_t groups) {
  auto at_or = [](at::IntArrayRef v, int64_t i, int64_t d) {
    if (v.empty()) return d;
    return v.size() == 1 ? v[0] : v[i];
  };
  std::vector<int64_t> a{transposed ? 1 : 0, groups};
  for (int64_t i = 0; i < nsp; ++i) a.push_back(at_or(stride, i, 1));
  for (int64_t i = 0; i < nsp; ++i) a.push_back(at_or(padding, i, 0));
  for (int64_t i = 0; i < nsp; ++i) a.push_back(at_or(dilation, i, 1));
  for (int64_t i = 0; i < nsp; ++i) a.push_back(at_or(output_padding, i, 0));
  return a;
}

void check_conv_dtypes(const at::Tensor& input, const at::Tensor& weight) {
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(input.scalar_type()),
                              "neuron: convolution for dtype ", input.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(input.dim() >= 3 && input.dim() <= 5, "neuron: convolution of ",
                              input.dim(), "-d input");
}

// PyTorch's CPU convolution returns channels_last results (output, grad_input and
// grad_weight) when its input or its weight is channels_last; so does neuron's, whose
// engine then reads and writes the activations in place.
c10::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  const c10::MemoryFormat cl = input.dim() == 4   ? c10::MemoryFormat::ChannelsLast
                               : input.dim() == 5 ? c10::MemoryFormat::ChannelsLast3d
                                                  : c10::MemoryFormat::Contiguous;
  if (cl == c10::MemoryFormat::Contiguous) return cl;
  return input.suggest_memory_format() == cl || weight.suggest_memory_format() == cl
             ? cl
             : c10::MemoryFormat::Contiguous;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::SymIntArrayRef stride_s, c10::SymIntArrayRef padding_s,
                                    c10::SymIntArrayRef dilation_s, bool transposed,
                                    c10::SymIntArrayRef output_padding_s, c10::SymInt groups_s) {
  const bool has_bias = bias.has_value() && bias->defined();
  const c10::Device device =
      common_device("convolution", {&input, &weight, has_bias ? &*bias : &input});
  check_conv_dtypes(input, weight);
  const auto stride = C10_AS_INTARRAYREF_SLOW(stride_s),
             padding = C10_AS_INTARRAYREF_SLOW(padding_s),
             dilation = C10_AS_INTARRAYREF_SLOW(dilation_s),
             output_padding = C10_AS_INTARRAYREF_SLOW(output_padding_s);
  const int64_t groups = groups_s.expect_int();
  const int64_t nsp = input.dim() - 2;
  auto attrs = conv_attrs(nsp, stride, padding, dilation, transposed, output_padding, groups);
  at::DimVector shape{input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t s = attrs[2 + i], p = attrs[2 + nsp + i], d = attrs[2 + 2 * nsp + i],
                  op = attrs[2 + 3 * nsp + i], k = weight.size(2 + i), in = input.size(2 + i);
    const int64_t o = transposed ? (in - 1) * s - 2 * p + d * (k - 1) + op + 1
                                 : (in + 2 * p - d * (k - 1) - 1) / s + 1;
    TORCH_CHECK(o > 0, "Given input size per channel: (", input.sizes().slice(2),
                "). Calculated output size per channel is too small");
    shape.push_back(o);
  }
  at::Tensor out =
      empty_in_format(shape, input.scalar_type(), device, conv_memory_format(input, weight));
  if (out.numel() == 0) return out;
  launch(
      Op::Convolution,
      {tensor_operand(input), tensor_operand(weight),
       has_bias ? tensor_operand(to_dtype_on_device(*bias, input.scalar_type())) : none_operand()},
      {tensor_operand(out)}, attrs);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride_s, c10::SymIntArrayRef padding_s, c10::SymIntArrayRef dilation_s,
    bool transposed, c10::SymIntArrayRef output_padding_s, c10::SymInt groups_s,
    std::array<bool, 3> output_mask) {
  const c10::Device device = common_device("convolution_backward", {&grad_output, &input, &weight});
  check_conv_dtypes(input, weight);
  const auto attrs =
      conv_attrs(input.dim() - 2, C10_AS_INTARRAYREF_SLOW(stride_s),
                 C10_AS_INTARRAYREF_SLOW(padding_s), C10_AS_INTARRAYREF_SLOW(dilation_s),
                 transposed, C10_AS_INTARRAYREF_SLOW(output_padding_s), groups_s.expect_int());
  const at::Tensor go = to_dtype_on_device(grad_output, input.scalar_type());
  const c10::MemoryFormat format = conv_memory_format(input, weight);
  at::Tensor gi, gw, gb;
  if (output_mask[0]) {
    gi = empty_in_format(input.sizes(), input.scalar_type(), device, format);
    if (gi.numel() > 0)
      launch(Op::ConvolutionBackwardInput, {tensor_operand(go), tensor_operand(weight)},
             {tensor_operand(gi)}, attrs);
  }
  if (output_mask[1]) {
    gw = empty_in_format(weight.sizes(), weight.scalar_type(), device, format);
    if (gw.numel() > 0)
      launch(Op::ConvolutionBackwardWeight, {tensor_operand(go), tensor_operand(input)},
             {tensor_operand(gw)}, attrs);
  }
  if (output_mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < go.dim(); ++d) dims.push_back(d);
    gb = at::sum(go, dims);
  }
  return {gi, gw, gb};
}

// ------------------------------------------------- complex32 convolutions

// ATen's conv1d .. conv_transpose3d split a complex convolution into three real ones
// (Gauss's trick: re = ac - bd, im = (a+b)(c+d) - ac - bd). In complex32 each real one
// is rounded to half before they are subtracted, and the cancellation leaves errors of
// several units in the last place, forward and backward (PyTorch's parity test expects
// complex32 convolutions to fail on CUDA). On neuron they run in complex64 and round
// once; autograd differentiates through the two casts. Other dtypes: ATen's composite.
template <auto composite, typename... Rest>
at::Tensor conv_complex32_in_complex64(const at::Tensor& input, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias, Rest... rest) {
  if (input.scalar_type() != at::kComplexHalf || weight.scalar_type() != at::kComplexHalf) {
    return composite(input, weight, bias, rest...);
  }
  std::optional<at::Tensor> wide_bias;
  if (bias.has_value() && bias->defined()) wide_bias = bias->to(at::kComplexFloat);
  return composite(input.to(at::kComplexFloat), weight.to(at::kComplexFloat), wide_bias, rest...)
      .to(at::kComplexHalf);
}

using SymInts = c10::SymIntArrayRef;

// Both keys: AutogradPrivateUse1 in grad mode, PrivateUse1 under inference_mode (which
// skips the autograd keys).
void register_complex32_convolutions(torch::Library& m) {
  m.impl("conv1d", conv_complex32_in_complex64<at::native::conv1d_symint, SymInts, SymInts, SymInts,
                                               c10::SymInt>);
  m.impl("conv2d", conv_complex32_in_complex64<at::native::conv2d_symint, SymInts, SymInts, SymInts,
                                               c10::SymInt>);
  m.impl("conv3d", conv_complex32_in_complex64<at::native::conv3d_symint, SymInts, SymInts, SymInts,
                                               c10::SymInt>);
  m.impl("conv1d.padding", conv_complex32_in_complex64<at::native::conv1d_padding_symint, SymInts,
                                                       c10::string_view, SymInts, c10::SymInt>);
  m.impl("conv2d.padding", conv_complex32_in_complex64<at::native::conv2d_padding_symint, SymInts,
                                                       c10::string_view, SymInts, c10::SymInt>);
  m.impl("conv3d.padding", conv_complex32_in_complex64<at::native::conv3d_padding_symint, SymInts,
                                                       c10::string_view, SymInts, c10::SymInt>);
  m.impl("conv_transpose1d.input",
         conv_complex32_in_complex64<at::native::conv_transpose1d_symint, SymInts, SymInts, SymInts,
                                     c10::SymInt, SymInts>);
  m.impl("conv_transpose2d.input",
         conv_complex32_in_complex64<at::native::conv_transpose2d_symint, SymInts, SymInts, SymInts,
                                     c10::SymInt, SymInts>);
  m.impl("conv_transpose3d.input",
         conv_complex32_in_complex64<at::native::conv_transpose3d_symint, SymInts, SymInts, SymInts,
                                     c10::SymInt, SymInts>);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { register_complex32_convolutions(m); }
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { register_complex32_convolutions(m); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace openneuron::bridge
