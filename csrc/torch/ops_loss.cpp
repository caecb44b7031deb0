// Losses: nll_loss (1-d and 2-d), mse, smooth_l1, huber and binary cross entropy,
// forward and backward, with PyTorch's reductions. Each launches a compiler op of the
// loss family (lower_loss.cpp).
#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// ------------------------------------------------------------ nll_loss

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, int64_t ignore_index) {
  const c10::Device device = common_device("nll_loss_forward", {&self, &target});
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const bool batched = self.dim() == 2;
  TORCH_CHECK(!batched || self.size(0) == target.size(0),
              "size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
  const int64_t classes = self.size(-1);
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->numel() == classes, "weight tensor should be defined either for all ",
                classes,
                " classes or no classes but got weight tensor of shape: ", weight->sizes());
  }
  at::Tensor out = reduction == 0 && batched
                       ? empty_device({self.size(0)}, self.scalar_type(), device)
                       : empty_device({}, self.scalar_type(), device);
  at::Tensor total_weight = empty_device({}, self.scalar_type(), device);
  launch(Op::NllLoss,
         {tensor_operand(self), tensor_operand(to_dtype_on_device(target, c10::kLong)),
          optional_operand(weight, self.scalar_type())},
         {tensor_operand(out), tensor_operand(total_weight)}, {reduction, ignore_index});
  return {out, total_weight};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  const c10::Device device =
      common_device("nll_loss_backward", {&grad_output, &self, &target, &total_weight});
  at::Tensor grad_input = empty_device(self.sizes(), self.scalar_type(), device);
  if (grad_input.numel() == 0) return grad_input;
  launch(Op::NllLossBackward,
         {tensor_operand(to_dtype_on_device(grad_output, self.scalar_type())), tensor_operand(self),
          tensor_operand(to_dtype_on_device(target, c10::kLong)),
          optional_operand(weight, self.scalar_type()),
          tensor_operand(to_dtype_on_device(total_weight, self.scalar_type()))},
         {tensor_operand(grad_input)}, {reduction, ignore_index});
  return grad_input;
}

// ------------------------------------------------------------ pointwise losses

enum : int64_t { kMse = 0, kL1 = 1, kSmoothL1 = 2, kHuber = 3, kBce = 4 };

const char* loss_name(int64_t kind) {
  switch (kind) {
    case kMse:
      return "mse_loss";
    case kL1:
      return "l1_loss";
    case kSmoothL1:
      return "smooth_l1_loss";
    case kHuber:
      return "huber_loss";
    default:
      return "binary_cross_entropy";
  }
}

void check_reduction(int64_t reduction) {
  TORCH_CHECK(reduction >= 0 && reduction <= 2, reduction, " is not a valid value for reduction");
}

at::Tensor& loss_forward_into(int64_t kind, const at::Tensor& self, const at::Tensor& target,
                              const std::optional<at::Tensor>& weight, int64_t reduction,
                              double param, at::Tensor& out) {
  const bool has_w = weight.has_value() && weight->defined();
  const c10::Device device =
      common_device(loss_name(kind), {&self, &target, has_w ? &*weight : &self});
  check_reduction(reduction);
  const auto dtype = kind == kBce ? self.scalar_type() : at::result_type(self, target);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(dtype), "neuron: ", loss_name(kind), " for dtype ",
                              dtype);
  at::DimVector shape;
  if (kind == kBce) {
    TORCH_CHECK(self.sizes() == target.sizes(), "Using a target size (", target.sizes(),
                ") that is different to the input size (", self.sizes(),
                ") is deprecated. "
                "Please ensure they have the same size.");
    shape.assign(self.sizes().begin(), self.sizes().end());
  } else {
    shape = at::infer_size_dimvector(self.sizes(), target.sizes());
  }
  if (reduction == 0)
    at::native::resize_output(out, shape);
  else
    at::native::resize_output(out, {});
  at::Tensor x = to_dtype_on_device(self, dtype).expand(shape);
  at::Tensor t = to_dtype_on_device(target, dtype).expand(shape);
  Operand w = none_operand();
  at::Tensor wt;
  if (has_w) {
    wt = to_dtype_on_device(*weight, dtype).expand(shape);
    w = tensor_operand(wt);
  }
  const bool direct = out.scalar_type() == dtype;
  at::Tensor target_out = direct ? out : empty_device(out.sizes(), dtype, device);
  launch(Op::PointwiseLoss, {tensor_operand(x), tensor_operand(t), w, float_operand(param)},
         {tensor_operand(target_out)}, {kind, reduction});
  if (!direct) out.copy_(target_out);
  return out;
}

at::Tensor loss_forward(int64_t kind, const at::Tensor& self, const at::Tensor& target,
                        const std::optional<at::Tensor>& weight, int64_t reduction, double param) {
  const auto dtype = kind == kBce ? self.scalar_type() : at::result_type(self, target);
  const c10::Device device = self.is_cpu() ? target.device() : self.device();
  // reduction='none' is elementwise: the result takes the CPU's layout.
  at::Tensor out = reduction == 0
                       ? empty_elementwise(at::infer_size_dimvector(self.sizes(), target.sizes()),
                                           dtype, device, {&self, &target})
                       : empty_device({0}, dtype, device);
  return loss_forward_into(kind, self, target, weight, reduction, param, out);
}

at::Tensor& loss_backward_into(int64_t kind, const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, double param, at::Tensor& grad_input) {
  const bool has_w = weight.has_value() && weight->defined();
  const c10::Device device =
      common_device(loss_name(kind), {&grad, &self, &target, has_w ? &*weight : &self});
  check_reduction(reduction);
  const auto dtype = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(dtype), "neuron: ", loss_name(kind),
                              "_backward for dtype ", dtype);
  const at::IntArrayRef shape = self.sizes();
  at::native::resize_output(grad_input, shape);
  if (self.numel() == 0) return grad_input;
  at::Tensor t = to_dtype_on_device(target, dtype).expand(shape);
  at::Tensor g = to_dtype_on_device(grad.is_cpu() ? grad.to(device) : grad, dtype);
  // A reduced loss has a 1-element grad; an unreduced one is expanded to self.
  const int64_t red = reduction != 0 && g.numel() == 1 ? reduction : 0;
  if (red == 0) g = g.expand(shape);
  Operand w = none_operand();
  at::Tensor wt;
  if (has_w) {
    wt = to_dtype_on_device(*weight, dtype).expand(shape);
    w = tensor_operand(wt);
  }
  const bool direct = grad_input.scalar_type() == dtype &&
                      at::has_internal_overlap(grad_input) != at::MemOverlap::Yes;
  at::Tensor target_out = direct ? grad_input : empty_device(shape, dtype, device);
  launch(Op::PointwiseLossBackward,
         {tensor_operand(g), tensor_operand(self), tensor_operand(t), w, float_operand(param)},
         {tensor_operand(target_out)}, {kind, red == 0 ? 0 : reduction});
  if (!direct) grad_input.copy_(target_out);
  return grad_input;
}

at::Tensor loss_backward(int64_t kind, const at::Tensor& grad, const at::Tensor& self,
                         const at::Tensor& target, const std::optional<at::Tensor>& weight,
                         int64_t reduction, double param) {
  at::Tensor gi = empty_device(self.sizes(), self.scalar_type(), self.device());
  return loss_backward_into(kind, grad, self, target, weight, reduction, param, gi);
}

// Mean reduction with a per-element grad (the reduction none path) has norm 1;
// PointwiseLossBackward's reduction attr carries the norm only for 1-element grads.
at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  return loss_forward(kMse, self, target, std::nullopt, reduction, 0);
}
at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out) {
  return loss_forward_into(kMse, self, target, std::nullopt, reduction, 0, out);
}
at::Tensor mse_loss_backward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction) {
  return loss_backward(kMse, grad, self, target, std::nullopt, reduction, 0);
}
at::Tensor& mse_loss_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                  const at::Tensor& target, int64_t reduction, at::Tensor& gi) {
  return loss_backward_into(kMse, grad, self, target, std::nullopt, reduction, 0, gi);
}
at::Tensor smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                          double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return loss_forward(kSmoothL1, self, target, std::nullopt, reduction, beta);
}
at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                               double beta, at::Tensor& out) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return loss_forward_into(kSmoothL1, self, target, std::nullopt, reduction, beta, out);
}
at::Tensor smooth_l1_loss_backward(const at::Tensor& grad, const at::Tensor& self,
                                   const at::Tensor& target, int64_t reduction, double beta) {
  return loss_backward(kSmoothL1, grad, self, target, std::nullopt, reduction, beta);
}
at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction, double beta,
                                        at::Tensor& gi) {
  return loss_backward_into(kSmoothL1, grad, self, target, std::nullopt, reduction, beta, gi);
}
at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                      double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return loss_forward(kHuber, self, target, std::nullopt, reduction, delta);
}
at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                           double delta, at::Tensor& out) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return loss_forward_into(kHuber, self, target, std::nullopt, reduction, delta, out);
}
at::Tensor huber_loss_backward(const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, int64_t reduction, double delta) {
  return loss_backward(kHuber, grad, self, target, std::nullopt, reduction, delta);
}
at::Tensor& huber_loss_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                    const at::Tensor& target, int64_t reduction, double delta,
                                    at::Tensor& gi) {
  return loss_backward_into(kHuber, grad, self, target, std::nullopt, reduction, delta, gi);
}
at::Tensor bce(const at::Tensor& self, const at::Tensor& target,
               const std::optional<at::Tensor>& weight, int64_t reduction) {
  return loss_forward(kBce, self, target, weight, reduction, 0);
}
at::Tensor& bce_out(const at::Tensor& self, const at::Tensor& target,
                    const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out) {
  return loss_forward_into(kBce, self, target, weight, reduction, 0, out);
}
at::Tensor bce_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                        const std::optional<at::Tensor>& weight, int64_t reduction) {
  return loss_backward(kBce, grad, self, target, weight, reduction, 0);
}
at::Tensor& bce_backward_out(const at::Tensor& grad, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, at::Tensor& gi) {
  return loss_backward_into(kBce, grad, self, target, weight, reduction, 0, gi);
}

// nll_loss2d: [N, C, *] input as [N*H*W, C] rows (a channels-last copy), through NllLoss.
void check_nll2d(const at::Tensor& self, const at::Tensor& target,
                 const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got "
              "targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), but got "
              "input of dimension: ",
              self.dim());
  TORCH_CHECK(!weight.has_value() || !weight->defined() || weight->numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
                  self.size(3) == target.size(2),
              "input and target batch or spatial sizes don't match: target ", target.sizes(),
              ", input ", self.sizes());
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self,
                                                      const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight,
                                                      int64_t reduction, int64_t ignore_index) {
  check_nll2d(self, target, weight);
  const int64_t C = self.size(1);
  at::Tensor rows = self.permute({0, 2, 3, 1}).reshape({-1, C});
  at::Tensor t = target.reshape({-1});
  auto [out, tw] = at::nll_loss_forward(rows, t, weight, reduction, ignore_index);
  if (reduction == 0) out = out.view(target.sizes());
  return {out, tw};
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  check_nll2d(self, target, weight);
  const int64_t C = self.size(1);
  at::Tensor rows = self.permute({0, 2, 3, 1}).reshape({-1, C});
  at::Tensor g = reduction == 0 ? grad.reshape({-1}) : grad;
  at::Tensor gi = at::nll_loss_backward(g, rows, target.reshape({-1}), weight, reduction,
                                        ignore_index, total_weight);
  // [N*H*W, C] -> [N, H, W, C] -> NCHW (contiguous).
  return gi.view({self.size(0), self.size(2), self.size(3), C}).permute({0, 3, 1, 2}).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("nll_loss_forward", nll_loss_forward);
  m.impl("nll_loss_backward", nll_loss_backward);
  m.impl("mse_loss", mse_loss);
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward", mse_loss_backward);
  m.impl("mse_loss_backward.grad_input", mse_loss_backward_out);
  m.impl("smooth_l1_loss", smooth_l1_loss);
  m.impl("smooth_l1_loss.out", smooth_l1_loss_out);
  m.impl("smooth_l1_loss_backward", smooth_l1_loss_backward);
  m.impl("smooth_l1_loss_backward.grad_input", smooth_l1_loss_backward_out);
  m.impl("huber_loss", huber_loss);
  m.impl("huber_loss.out", huber_loss_out);
  m.impl("huber_loss_backward", huber_loss_backward);
  m.impl("huber_loss_backward.out", huber_loss_backward_out);
  m.impl("binary_cross_entropy", bce);
  m.impl("binary_cross_entropy.out", bce_out);
  m.impl("binary_cross_entropy_backward", bce_backward);
  m.impl("binary_cross_entropy_backward.grad_input", bce_backward_out);
  m.impl("nll_loss2d_forward", nll_loss2d_forward);
  m.impl("nll_loss2d_backward", nll_loss2d_backward);
}

}  // namespace openneuron::bridge
