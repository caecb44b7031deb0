// 2-d pooling (max, average, adaptive average, adaptive max) and upsampling
// (nearest, bilinear), forward and backward. Lowering: lower_pool.cpp.
#include <ATen/native/Pool.h>
#include <ATen/native/UpSample.h>

#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ------------------------------------------------------------ pooling, upsampling

struct Pool2dArgs {
  int64_t kH, kW, dH, dW, padH, padW, dilH = 1, dilW = 1;
};

Pool2dArgs pool_args(const char* name, at::IntArrayRef k, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation) {
  TORCH_CHECK(k.size() == 1 || k.size() == 2, name,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, name,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, name,
              ": padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(dilation.empty() || dilation.size() == 1 || dilation.size() == 2, name,
              ": dilation must be either a single int, or a tuple of two ints");
  Pool2dArgs a;
  a.kH = k[0];
  a.kW = k.size() == 1 ? a.kH : k[1];
  a.dH = stride.empty() ? a.kH : stride[0];
  a.dW = stride.empty() ? a.kW : stride.size() == 1 ? a.dH : stride[1];
  a.padH = padding[0];
  a.padW = padding.size() == 1 ? a.padH : padding[1];
  if (!dilation.empty()) {
    a.dilH = dilation[0];
    a.dilW = dilation.size() == 1 ? a.dilH : dilation[1];
  }
  return a;
}

at::DimVector pool_out_shape(const at::Tensor& self, const Pool2dArgs& a, bool ceil_mode) {
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()), "neuron: pooling for dtype ",
                              self.scalar_type());
  TORCH_CHECK(
      self.dim() == 3 || self.dim() == 4,
      "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:",
      self.sizes());
  const int64_t ih = self.size(-2), iw = self.size(-1);
  const int64_t oh =
      at::native::pooling_output_shape<int64_t>(ih, a.kH, a.padH, a.dH, a.dilH, ceil_mode);
  const int64_t ow =
      at::native::pooling_output_shape<int64_t>(iw, a.kW, a.padW, a.dW, a.dilW, ceil_mode);
  at::native::pool2d_shape_check(self, a.kH, a.kW, a.dH, a.dW, a.padH, a.padW, a.dilH, a.dilW,
                                 self.size(-3), ih, iw, oh, ow, at::MemoryFormat::Contiguous);
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  shape[shape.size() - 2] = oh;
  shape[shape.size() - 1] = ow;
  return shape;
}

// A pooling result in the memory format of `like`, as the CPU's pooling kernels
// allocate theirs: a channels-last input gives channels-last outputs and gradients.
at::Tensor empty_pool_result(at::IntArrayRef shape, c10::ScalarType dtype, const at::Tensor& like) {
  return empty_in_format(shape, dtype, like.device(), like.suggest_memory_format());
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(
    const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode) {
  const Pool2dArgs a = pool_args("max_pool2d", k, stride, padding, dilation);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  at::Tensor out = empty_pool_result(shape, self.scalar_type(), self);
  at::Tensor idx = empty_pool_result(shape, c10::kLong, self);
  if (out.numel() == 0) return {out, idx};
  launch(Op::MaxPool2d, {tensor_operand(self)}, {tensor_operand(out), tensor_operand(idx)},
         {a.kH, a.kW, a.dH, a.dW, a.padH, a.padW, a.dilH, a.dilW});
  return {out, idx};
}

// Scatter of grad_output by indices (max_pool2d and adaptive_max_pool2d backward).
at::Tensor max_pool_backward_common(const at::Tensor& grad, const at::Tensor& self,
                                    const at::Tensor& indices) {
  common_device("max_pool2d_backward", {&grad, &self, &indices});
  TORCH_CHECK(grad.sizes() == indices.sizes(), "grad_output and indices must have the same shape");
  at::Tensor gi = empty_pool_result(self.sizes(), self.scalar_type(), self);
  if (gi.numel() == 0) return gi;
  launch(Op::MaxPool2dBackward,
         {tensor_operand(to_dtype_on_device(grad, self.scalar_type())), tensor_operand(indices)},
         {tensor_operand(gi)});
  return gi;
}

at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad, const at::Tensor& self,
                                            at::IntArrayRef k, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation,
                                            bool ceil_mode, const at::Tensor& indices) {
  const Pool2dArgs a = pool_args("max_pool2d", k, stride, padding, dilation);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(shape), "max_pool2d_backward: grad_output of shape ",
              grad.sizes(), " does not match the output shape ", at::IntArrayRef(shape));
  return max_pool_backward_common(grad, self, indices);
}

std::vector<int64_t> avg_attrs(const Pool2dArgs& a, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, "divisor must be not zero");
  return {a.kH,
          a.kW,
          a.dH,
          a.dW,
          a.padH,
          a.padW,
          count_include_pad ? 1 : 0,
          divisor_override.value_or(0)};
}

at::Tensor avg_pool2d(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  const Pool2dArgs a = pool_args("avg_pool2d", k, stride, padding, {});
  const auto attrs = avg_attrs(a, count_include_pad, divisor_override);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  at::Tensor out = empty_pool_result(shape, self.scalar_type(), self);
  if (out.numel() == 0) return out;
  launch(Op::AvgPool2d, {tensor_operand(self)}, {tensor_operand(out)}, attrs);
  return out;
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  common_device("avg_pool2d_backward", {&grad, &self});
  const Pool2dArgs a = pool_args("avg_pool2d", k, stride, padding, {});
  const auto attrs = avg_attrs(a, count_include_pad, divisor_override);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(shape), "avg_pool2d_backward: grad_output of shape ",
              grad.sizes(), " does not match the output shape ", at::IntArrayRef(shape));
  at::Tensor gi = empty_pool_result(self.sizes(), self.scalar_type(), self);
  if (gi.numel() == 0) return gi;
  launch(Op::AvgPool2dBackward, {tensor_operand(to_dtype_on_device(grad, self.scalar_type()))},
         {tensor_operand(gi)}, attrs);
  return gi;
}

at::DimVector adaptive_shape(const char* name, const at::Tensor& self, at::IntArrayRef out_size) {
  TORCH_CHECK(out_size.size() == 2, name, ": output_size must be 2");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, name, "(): Expected 3D or 4D tensor, but got ",
              self.sizes());
  for (int64_t d = 1; d < self.dim(); ++d)
    TORCH_CHECK(self.size(d) > 0, name,
                "(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ",
                self.sizes(), " with dimension ", d, " being empty");
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()), "neuron: ", name, " for dtype ",
                              self.scalar_type());
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  shape[shape.size() - 2] = out_size[0];
  shape[shape.size() - 1] = out_size[1];
  return shape;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef out_size_s) {
  const auto shape =
      adaptive_shape("adaptive_avg_pool2d", self, C10_AS_INTARRAYREF_SLOW(out_size_s));
  at::Tensor out = empty_pool_result(shape, self.scalar_type(), self);
  if (out.numel() == 0) return out;
  launch(Op::AdaptiveAvgPool2d, {tensor_operand(self)}, {tensor_operand(out)});
  return out;
}

// The CPU's check of an adaptive pooling gradient: non-batch dims must not be empty.
void check_adaptive_grad(const char* name, const at::Tensor& grad) {
  for (int64_t d = 1; d < grad.dim(); ++d)
    TORCH_CHECK(grad.size(d) > 0, name,
                "(): Expected grad_output to have non-zero size for non-batch dimensions, but "
                "grad_output has sizes ",
                grad.sizes(), " with dimension ", d, " being empty");
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& self) {
  check_adaptive_grad("adaptive_avg_pool2d_backward", grad);
  common_device("adaptive_avg_pool2d_backward", {&grad, &self});
  TORCH_CHECK(grad.dim() == self.dim(),
              "adaptive_avg_pool2d_backward(): Expected grad_output to "
              "have the same dimensionality as input");
  at::Tensor gi = empty_pool_result(self.sizes(), self.scalar_type(), self);
  if (gi.numel() == 0) return gi;
  launch(Op::AdaptiveAvgPool2dBackward,
         {tensor_operand(to_dtype_on_device(grad, self.scalar_type()))}, {tensor_operand(gi)});
  return gi;
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& self,
                                                       at::IntArrayRef out_size) {
  const auto shape = adaptive_shape("adaptive_max_pool2d", self, out_size);
  at::Tensor out = empty_pool_result(shape, self.scalar_type(), self);
  at::Tensor idx = empty_pool_result(shape, c10::kLong, self);
  if (out.numel() == 0) return {out, idx};
  launch(Op::AdaptiveMaxPool2d, {tensor_operand(self)}, {tensor_operand(out), tensor_operand(idx)});
  return {out, idx};
}

at::Tensor adaptive_max_pool2d_backward(const at::Tensor& grad, const at::Tensor& self,
                                        const at::Tensor& indices) {
  check_adaptive_grad("adaptive_max_pool2d_backward", grad);
  return max_pool_backward_common(grad, self, indices);
}

double scale_or_zero(std::optional<double> s) { return s.has_value() && *s > 0 ? *s : 0.0; }

template <Op kOp>
at::Tensor upsample2d(const at::Tensor& self, at::IntArrayRef out_size, std::optional<double> sh,
                      std::optional<double> sw, std::vector<int64_t> attrs) {
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()), "neuron: ", op_name(kOp),
                              " for dtype ", self.scalar_type());
  TORCH_CHECK(self.dim() == 4, "Non-empty 4D data tensor expected but got a tensor with sizes ",
              self.sizes());
  const auto full = at::native::upsample_2d_common_check(self.sizes(), out_size);
  at::Tensor out =
      empty_pool_result({full[0], full[1], full[2], full[3]}, self.scalar_type(), self);
  if (out.numel() == 0) return out;
  launch(kOp,
         {tensor_operand(self), float_operand(scale_or_zero(sh)), float_operand(scale_or_zero(sw))},
         {tensor_operand(out)}, std::move(attrs));
  return out;
}

template <Op kOp>
at::Tensor upsample2d_backward(const at::Tensor& grad, at::IntArrayRef out_size,
                               at::IntArrayRef in_size, std::optional<double> sh,
                               std::optional<double> sw, std::vector<int64_t> attrs) {
  TORCH_CHECK(in_size.size() == 4, "It is expected input_size equals to 4, but got size ",
              in_size.size());
  TORCH_CHECK(out_size.size() == 2, "It is expected output_size equals to 2, but got size ",
              out_size.size());
  TORCH_CHECK(grad.dim() == 4 && grad.size(2) == out_size[0] && grad.size(3) == out_size[1],
              "Expected grad_output to have the output size ", out_size, ", got ", grad.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(grad.scalar_type()), "neuron: ", op_name(kOp),
                              " for dtype ", grad.scalar_type());
  at::Tensor gi = empty_pool_result(in_size, grad.scalar_type(), grad);
  if (gi.numel() == 0) return gi;
  launch(kOp,
         {tensor_operand(grad), float_operand(scale_or_zero(sh)), float_operand(scale_or_zero(sw))},
         {tensor_operand(gi)}, std::move(attrs));
  return gi;
}

at::Tensor upsample_nearest2d(const at::Tensor& self, c10::SymIntArrayRef out_size,
                              std::optional<double> sh, std::optional<double> sw) {
  return upsample2d<Op::UpsampleNearest2d>(self, C10_AS_INTARRAYREF_SLOW(out_size), sh, sw, {});
}
at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, c10::SymIntArrayRef out_size,
                                       c10::SymIntArrayRef in_size, std::optional<double> sh,
                                       std::optional<double> sw) {
  return upsample2d_backward<Op::UpsampleNearest2dBackward>(
      grad, C10_AS_INTARRAYREF_SLOW(out_size), C10_AS_INTARRAYREF_SLOW(in_size), sh, sw, {});
}
at::Tensor upsample_bilinear2d(const at::Tensor& self, c10::SymIntArrayRef out_size,
                               bool align_corners, std::optional<double> sh,
                               std::optional<double> sw) {
  return upsample2d<Op::UpsampleBilinear2d>(self, C10_AS_INTARRAYREF_SLOW(out_size), sh, sw,
                                            {align_corners ? 1 : 0});
}
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad, c10::SymIntArrayRef out_size,
                                        c10::SymIntArrayRef in_size, bool align_corners,
                                        std::optional<double> sh, std::optional<double> sw) {
  return upsample2d_backward<Op::UpsampleBilinear2dBackward>(
      grad, C10_AS_INTARRAYREF_SLOW(out_size), C10_AS_INTARRAYREF_SLOW(in_size), sh, sw,
      {align_corners ? 1 : 0});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices_backward", max_pool2d_with_indices_backward);
  m.impl("avg_pool2d", avg_pool2d);
  m.impl("avg_pool2d_backward", avg_pool2d_backward);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
  m.impl("adaptive_max_pool2d", adaptive_max_pool2d);
  m.impl("adaptive_max_pool2d_backward", adaptive_max_pool2d_backward);
  m.impl("upsample_nearest2d", upsample_nearest2d);
  m.impl("upsample_nearest2d_backward", upsample_nearest2d_backward);
  m.impl("upsample_bilinear2d", upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", upsample_bilinear2d_backward);
}

}  // namespace openneuron::bridge
