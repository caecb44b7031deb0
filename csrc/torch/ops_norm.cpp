// Normalisation layers: layer norm, RMS norm, group norm and batch norm (training
// and inference, with running statistics), forward and backward. Each launches one
// compiler op of the norm family (lower_norm.cpp).
#include "op_helpers.h"
#include "output_layout.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// The device of a tensor and optional tensors; a mix raises PyTorch's device-mismatch error.
c10::Device common_device_opt(const char* method, const at::Tensor& first,
                              std::initializer_list<const OptTensor*> opts) {
  std::optional<c10::Device> device;
  c10::impl::check_and_update_common_device(device, first, method, "argument");
  for (const OptTensor* t : opts) {
    c10::impl::check_and_update_common_device(device, *t, method, "argument");
  }
  return *device;
}

Tensor dummy(c10::Device device) { return empty_device({0}, c10::kFloat, device); }

// Statistics dtype of the norms (PyTorch's param_scalar_type): float for
// reduced-float inputs with float parameters, else the input's dtype.
c10::ScalarType stats_dtype(const Tensor& input, std::initializer_list<const Tensor*> params) {
  if (at::isReducedFloatingType(input.scalar_type())) {
    for (const Tensor* p : params)
      if (p->defined() && p->scalar_type() == c10::kFloat) return c10::kFloat;
  }
  return input.scalar_type();
}

void check_norm_dtype(const char* name, const Tensor& input) {
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "\"", name, "\" not implemented for '",
              c10::toString(input.scalar_type()), "'");
}

// ------------------------------------------------------------ layer norm / rms norm

int64_t check_layer_norm(const Tensor& input, at::IntArrayRef ns, const Tensor& weight,
                         const Tensor& bias) {
  const int64_t nd = static_cast<int64_t>(ns.size());
  TORCH_CHECK(nd >= 1,
              "Expected normalized_shape to be at least 1-dimensional, i.e., containing "
              "at least one element, but got normalized_shape = ",
              ns);
  TORCH_CHECK(!weight.defined() || weight.sizes().equals(ns),
              "Expected weight to be of same shape as normalized_shape, but got weight of shape ",
              weight.sizes(), " and normalized_shape = ", ns);
  TORCH_CHECK(!bias.defined() || bias.sizes().equals(ns),
              "Expected bias to be of same shape as normalized_shape, but got bias of shape ",
              bias.sizes(), " and normalized_shape = ", ns);
  const auto is = input.sizes();
  const int64_t in_nd = input.dim();
  bool ok = in_nd >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) ok = is[in_nd - nd + i] == ns[i];
  if (!ok) {
    std::stringstream ss;
    ss << "Given normalized_shape=" << ns << ", expected input with shape [*";
    for (auto s : ns) ss << ", " << s;
    ss << "], but got input of size" << is;
    TORCH_CHECK(false, ss.str());
  }
  return in_nd - nd;  // axis
}

at::DimVector stat_shape(const Tensor& input, int64_t axis) {
  at::DimVector s(input.sizes().begin(), input.sizes().begin() + axis);
  for (int64_t i = axis; i < input.dim(); ++i) s.push_back(1);
  return s;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     c10::SymIntArrayRef ns_sym,
                                                     const OptTensor& weight_opt,
                                                     const OptTensor& bias_opt, double eps) {
  const Tensor& weight = value_or_undefined(weight_opt);
  const Tensor& bias = value_or_undefined(bias_opt);
  const c10::Device device =
      common_device_opt("native_layer_norm", input, {&weight_opt, &bias_opt});
  const at::IntArrayRef ns = C10_AS_INTARRAYREF_SLOW(ns_sym);
  const int64_t axis = check_layer_norm(input, ns, weight, bias);
  check_norm_dtype("LayerNormKernelImpl", input);
  Tensor out = empty_device_like(input, input.scalar_type());
  const auto sd = stats_dtype(input, {&weight, &bias});
  Tensor mean = empty_device(stat_shape(input, axis), sd, device);
  Tensor rstd = empty_device(stat_shape(input, axis), sd, device);
  launch(
      Op::LayerNorm,
      {tensor_operand(input), optional_operand(weight), optional_operand(bias), float_operand(eps)},
      {tensor_operand(out), tensor_operand(mean), tensor_operand(rstd)}, {axis});
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, c10::SymIntArrayRef ns_sym, const Tensor& mean,
    const Tensor& rstd, const OptTensor& weight_opt, const OptTensor& bias_opt,
    std::array<bool, 3> mask) {
  const Tensor& weight = value_or_undefined(weight_opt);
  const Tensor& bias = value_or_undefined(bias_opt);
  const c10::Device device = common_device("native_layer_norm_backward",
                                           {&grad_out, &input, &mean, &rstd, &weight, &bias});
  const at::IntArrayRef ns = C10_AS_INTARRAYREF_SLOW(ns_sym);
  const int64_t axis = check_layer_norm(input, ns, weight, bias);
  Tensor dx = mask[0] ? empty_device_like(input, input.scalar_type()) : Tensor();
  Tensor dw =
      mask[1] && weight.defined() ? empty_device_like(weight, weight.scalar_type()) : Tensor();
  Tensor db = mask[2] && bias.defined() ? empty_device_like(bias, bias.scalar_type()) : Tensor();
  const int64_t bits = (dx.defined() ? 1 : 0) | (dw.defined() ? 2 : 0) | (db.defined() ? 4 : 0);
  if (bits == 0) return {dx, dw, db};
  launch(Op::LayerNormBackward,
         {tensor_operand(grad_out), tensor_operand(input), tensor_operand(mean),
          tensor_operand(rstd), optional_operand(weight)},
         {tensor_operand(dx.defined() ? dx : dummy(device)),
          tensor_operand(dw.defined() ? dw : dummy(device)),
          tensor_operand(db.defined() ? db : dummy(device))},
         {axis, bits});
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor> fused_rms_norm(const Tensor& input, at::IntArrayRef ns,
                                          const OptTensor& weight_opt, std::optional<double> eps) {
  const Tensor& weight = value_or_undefined(weight_opt);
  const c10::Device device = common_device_opt("_fused_rms_norm", input, {&weight_opt});
  const int64_t axis = check_layer_norm(input, ns, weight, Tensor());
  check_norm_dtype("rms_norm", input);
  Tensor out = empty_device_like(input, input.scalar_type());
  Tensor rstd = empty_device(stat_shape(input, axis), c10::kFloat, device);
  const double e = eps.has_value() ? *eps : std::numeric_limits<float>::epsilon();
  launch(Op::RmsNorm, {tensor_operand(input), optional_operand(weight), float_operand(e)},
         {tensor_operand(out), tensor_operand(rstd)}, {axis});
  return {out, rstd};
}

std::tuple<Tensor, Tensor> fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                   at::IntArrayRef ns, const Tensor& rstd,
                                                   const OptTensor& weight_opt,
                                                   std::array<bool, 2> mask) {
  const Tensor& weight = value_or_undefined(weight_opt);
  const c10::Device device =
      common_device("_fused_rms_norm_backward", {&grad_out, &input, &rstd, &weight});
  const int64_t axis = check_layer_norm(input, ns, weight, Tensor());
  Tensor dx = mask[0] ? empty_device_like(input, input.scalar_type()) : Tensor();
  Tensor dw =
      mask[1] && weight.defined() ? empty_device_like(weight, weight.scalar_type()) : Tensor();
  const int64_t bits = (dx.defined() ? 1 : 0) | (dw.defined() ? 2 : 0);
  if (bits == 0) return {dx, dw};
  launch(Op::RmsNormBackward,
         {tensor_operand(grad_out), tensor_operand(input), tensor_operand(rstd),
          optional_operand(weight)},
         {tensor_operand(dx.defined() ? dx : dummy(device)),
          tensor_operand(dw.defined() ? dw : dummy(device))},
         {axis, bits});
  return {dx, dw};
}

// ------------------------------------------------------------ group norm

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input,
                                                     const OptTensor& weight_opt,
                                                     const OptTensor& bias_opt, c10::SymInt N_s,
                                                     c10::SymInt C_s, c10::SymInt HxW_s,
                                                     int64_t group, double eps) {
  const Tensor& weight = value_or_undefined(weight_opt);
  const Tensor& bias = value_or_undefined(bias_opt);
  const c10::Device device =
      common_device_opt("native_group_norm", input, {&weight_opt, &bias_opt});
  const int64_t N = N_s.expect_int(), C = C_s.expect_int(), HxW = HxW_s.expect_int();
  TORCH_CHECK(group > 0 && C % group == 0,
              "Expected number of channels in input to be divisible by ",
              "num_groups, but got input of shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "Expected input of ", N * C * HxW, " elements, got ",
              input.sizes());
  TORCH_CHECK(!weight.defined() || weight.numel() == C,
              "Expected weight to be a vector of size equal "
              "to the number of channels in input, but got weight of shape ",
              weight.sizes(), " and input of shape ", input.sizes());
  TORCH_CHECK(!bias.defined() || bias.numel() == C,
              "Expected bias to be a vector of size equal to "
              "the number of channels in input, but got bias of shape ",
              bias.sizes(), " and input of shape ", input.sizes());
  check_norm_dtype("GroupNormKernelImpl", input);
  // As the CPU's: the output (and grad_input) keep a channels_last input's format.
  Tensor out =
      empty_in_format(input.sizes(), input.scalar_type(), device, input.suggest_memory_format());
  const auto sd = stats_dtype(input, {&weight, &bias});
  Tensor mean = empty_device({N, group}, sd, device);
  Tensor rstd = empty_device({N, group}, sd, device);
  if (N * group == 0) return {out, mean, rstd};
  launch(Op::GroupNorm,
         {tensor_operand(input.reshape({N, C, HxW})), optional_operand(weight),
          optional_operand(bias), float_operand(eps)},
         {tensor_operand(out.view({N, C, HxW})), tensor_operand(mean), tensor_operand(rstd)},
         {group});
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& mean, const Tensor& rstd,
    const OptTensor& weight_opt, c10::SymInt N_s, c10::SymInt C_s, c10::SymInt HxW_s, int64_t group,
    std::array<bool, 3> mask) {
  const Tensor& weight = value_or_undefined(weight_opt);
  const c10::Device device =
      common_device("native_group_norm_backward", {&grad_out, &input, &mean, &rstd, &weight});
  const int64_t N = N_s.expect_int(), C = C_s.expect_int(), HxW = HxW_s.expect_int();
  const auto wdt = weight.defined() ? weight.scalar_type() : input.scalar_type();
  Tensor dx = mask[0] ? empty_in_format(input.sizes(), input.scalar_type(), device,
                                        input.suggest_memory_format())
                      : Tensor();
  Tensor dw = mask[1] ? empty_device({C}, wdt, device) : Tensor();
  Tensor db = mask[2] ? empty_device({C}, wdt, device) : Tensor();
  const int64_t bits = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  if (bits == 0) return {dx, dw, db};
  launch(Op::GroupNormBackward,
         {tensor_operand(grad_out.reshape({N, C, HxW})), tensor_operand(input.reshape({N, C, HxW})),
          tensor_operand(mean), tensor_operand(rstd), optional_operand(weight)},
         {tensor_operand(dx.defined() ? dx.view({N, C, HxW}) : dummy(device)),
          tensor_operand(dw.defined() ? dw : dummy(device)),
          tensor_operand(db.defined() ? db : dummy(device))},
         {group, bits});
  return {dx, dw, db};
}

// ------------------------------------------------------------ batch norm

at::DimVector bn_shape(const Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected input with at least 2 dims (N, C, ...), got ",
              input.sizes());
  int64_t hw = 1;
  for (int64_t d = 2; d < input.dim(); ++d) hw *= input.size(d);
  return {input.size(0), input.size(1), hw};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_impl(const Tensor& input, const Tensor& weight,
                                                   const Tensor& bias, const Tensor& running_mean,
                                                   const Tensor& running_var, bool training,
                                                   double momentum, double eps) {
  const c10::Device device =
      common_device("native_batch_norm", {&input, &weight, &bias, &running_mean, &running_var});
  check_norm_dtype("batch_norm", input);
  const auto shape = bn_shape(input);
  const int64_t C = shape[1];
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    TORCH_CHECK(!t->defined() || t->numel() == C, "running_mean should contain ", C,
                " elements not ", t->numel());
  }
  if (training) {
    int64_t count = 1;
    for (int64_t d = 0; d < input.dim(); ++d)
      if (d != 1) count *= input.size(d);
    TORCH_CHECK(count > 1, "Expected more than 1 value per channel when training, got input size ",
                input.sizes());
  } else {
    TORCH_CHECK(running_mean.defined() && running_var.defined(),
                "running_mean and running_var must be defined in evaluation mode");
  }
  const auto sd = stats_dtype(input, {&weight, &bias, &running_mean, &running_var});
  // As the CPU's: the output keeps a channels_last input's memory format.
  Tensor out =
      empty_in_format(input.sizes(), input.scalar_type(), device, input.suggest_memory_format());
  Tensor save_mean = empty_device({training ? C : 0}, sd, device);
  Tensor save_invstd = empty_device({training ? C : 0}, sd, device);
  if (input.numel() == 0) return {out, save_mean, save_invstd};
  launch(Op::BatchNorm,
         {tensor_operand(input.reshape(shape)), optional_operand(weight), optional_operand(bias),
          optional_operand(running_mean), optional_operand(running_var), float_operand(momentum),
          float_operand(eps)},
         {tensor_operand(out.view(shape)), tensor_operand(save_mean), tensor_operand(save_invstd)},
         {training ? 1 : 0});
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const OptTensor& w,
                                                     const OptTensor& b, const OptTensor& rm,
                                                     const OptTensor& rv, bool training,
                                                     double momentum, double eps) {
  return batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b),
                         value_or_undefined(rm), value_or_undefined(rv), training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> bn_legit(const Tensor& input, const OptTensor& w,
                                            const OptTensor& b, Tensor& rm, Tensor& rv,
                                            bool training, double momentum, double eps) {
  return batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), rm, rv, training,
                         momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> bn_legit_no_stats(const Tensor& input, const OptTensor& w,
                                                     const OptTensor& b, bool training,
                                                     double momentum, double eps) {
  return batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), Tensor(), Tensor(),
                         training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bn_with_update(const Tensor& input, const OptTensor& w,
                                                          const OptTensor& b, Tensor& rm,
                                                          Tensor& rv, double momentum, double eps) {
  auto [out, m, v] = batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), rm, rv,
                                     true, momentum, eps);
  Tensor reserve = empty_device({0}, c10::kByte, input.device());
  return {out, m, v, reserve};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_impl(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& running_mean,
    const Tensor& running_var, const Tensor& save_mean, const Tensor& save_invstd, bool train,
    double eps, std::array<bool, 3> mask) {
  const c10::Device device = common_device(
      "native_batch_norm_backward",
      {&grad_out, &input, &weight, &running_mean, &running_var, &save_mean, &save_invstd});
  const auto shape = bn_shape(input);
  const int64_t C = shape[1];
  const auto wdt =
      weight.defined() ? weight.scalar_type() : stats_dtype(input, {&running_mean, &save_mean});
  // As the CPU's: grad_input keeps a channels_last input's memory format.
  Tensor dx = mask[0] ? empty_in_format(input.sizes(), input.scalar_type(), device,
                                        input.suggest_memory_format())
                      : Tensor();
  Tensor dw = mask[1] ? empty_device({C}, wdt, device) : Tensor();
  Tensor db = mask[2] ? empty_device({C}, wdt, device) : Tensor();
  const int64_t bits = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  if (bits == 0) return {dx, dw, db};
  launch(Op::BatchNormBackward,
         {tensor_operand(grad_out.reshape(shape)), tensor_operand(input.reshape(shape)),
          optional_operand(weight), optional_operand(running_mean), optional_operand(running_var),
          optional_operand(save_mean), optional_operand(save_invstd), float_operand(eps)},
         {tensor_operand(dx.defined() ? dx.view(shape) : dummy(device)),
          tensor_operand(dw.defined() ? dw : dummy(device)),
          tensor_operand(db.defined() ? db : dummy(device))},
         {train ? 1 : 0, bits});
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const OptTensor& w, const OptTensor& rm,
    const OptTensor& rv, const OptTensor& sm, const OptTensor& si, bool train, double eps,
    std::array<bool, 3> mask) {
  return batch_norm_backward_impl(grad_out, input, value_or_undefined(w), value_or_undefined(rm),
                                  value_or_undefined(rv), value_or_undefined(sm),
                                  value_or_undefined(si), train, eps, mask);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const OptTensor& rm,
                                                       const OptTensor& rv, const OptTensor& sm,
                                                       const OptTensor& sv, bool update, double eps,
                                                       std::array<bool, 3> mask,
                                                       const Tensor& reserve) {
  return batch_norm_backward_impl(grad_out, input, weight, value_or_undefined(rm),
                                  value_or_undefined(rv), value_or_undefined(sm),
                                  value_or_undefined(sv), update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("_fused_rms_norm", fused_rms_norm);
  m.impl("_fused_rms_norm_backward", fused_rms_norm_backward);
  m.impl("native_group_norm", native_group_norm);
  m.impl("native_group_norm_backward", native_group_norm_backward);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", bn_legit);
  m.impl("_native_batch_norm_legit.no_stats", bn_legit_no_stats);
  m.impl("_batch_norm_with_update", bn_with_update);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("batch_norm_backward", batch_norm_backward);
}

}  // namespace openneuron::bridge
