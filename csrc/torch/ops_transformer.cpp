// Native ops for transformer models: norms, attention, indexing, ordering,
// scans, activations. Shapes, dtypes and PyTorch's error messages are resolved
// here; each op launches one compiler op (eager and compiled mode share the
// lowering).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"
#include "engine.h"
#include "output_layout.h"
#include "native_ops.h"
#include "op_checks.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;
using OptTensor = std::optional<at::Tensor>;

// ------------------------------------------------------------ common helpers

c10::Device common_device_opt(const char* method, const Tensor& first,
                              std::initializer_list<const OptTensor*> opts) {
  std::optional<c10::Device> device;
  c10::impl::check_and_update_common_device(device, first, method, "argument");
  for (const OptTensor* t : opts) c10::impl::check_and_update_common_device(device, *t, method, "argument");
  return *device;
}

const Tensor& opt_or_undef(const OptTensor& t) {
  static const Tensor undef;
  return t.has_value() ? *t : undef;
}

Operand opt_operand(const OptTensor& t) {
  if (!t.has_value() || !t->defined()) return none_operand();
  return tensor_operand(*t);
}
Operand opt_operand(const Tensor& t) { return t.defined() ? tensor_operand(t) : none_operand(); }

Tensor empty_like_dev(const Tensor& t, c10::ScalarType dtype) {
  return empty_device(t.sizes(), dtype, t.device());
}

// A placeholder output for results the caller did not ask for.
Tensor dummy(c10::Device device) { return empty_device({0}, c10::kFloat, device); }

bool is_reduced_float(c10::ScalarType t) { return t == c10::kBFloat16 || t == c10::kHalf; }

// Statistics dtype of the norms (PyTorch's param_scalar_type): float for
// reduced-float inputs with float parameters, else the input's dtype.
c10::ScalarType stats_dtype(const Tensor& input, std::initializer_list<const Tensor*> params) {
  if (is_reduced_float(input.scalar_type())) {
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
  TORCH_CHECK(nd >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing "
              "at least one element, but got normalized_shape = ", ns);
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
  const Tensor& weight = opt_or_undef(weight_opt);
  const Tensor& bias = opt_or_undef(bias_opt);
  const c10::Device device = common_device_opt("native_layer_norm", input, {&weight_opt, &bias_opt});
  const at::IntArrayRef ns = C10_AS_INTARRAYREF_SLOW(ns_sym);
  const int64_t axis = check_layer_norm(input, ns, weight, bias);
  check_norm_dtype("LayerNormKernelImpl", input);
  Tensor out = empty_like_dev(input, input.scalar_type());
  const auto sd = stats_dtype(input, {&weight, &bias});
  Tensor mean = empty_device(stat_shape(input, axis), sd, device);
  Tensor rstd = empty_device(stat_shape(input, axis), sd, device);
  launch(Op::LayerNorm, {tensor_operand(input), opt_operand(weight), opt_operand(bias), float_operand(eps)},
         {tensor_operand(out), tensor_operand(mean), tensor_operand(rstd)}, {axis});
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, c10::SymIntArrayRef ns_sym, const Tensor& mean,
    const Tensor& rstd, const OptTensor& weight_opt, const OptTensor& bias_opt,
    std::array<bool, 3> mask) {
  const Tensor& weight = opt_or_undef(weight_opt);
  const Tensor& bias = opt_or_undef(bias_opt);
  const c10::Device device = common_device("native_layer_norm_backward",
                                           {&grad_out, &input, &mean, &rstd, &weight, &bias});
  const at::IntArrayRef ns = C10_AS_INTARRAYREF_SLOW(ns_sym);
  const int64_t axis = check_layer_norm(input, ns, weight, bias);
  Tensor dx = mask[0] ? empty_like_dev(input, input.scalar_type()) : Tensor();
  Tensor dw = mask[1] && weight.defined() ? empty_like_dev(weight, weight.scalar_type()) : Tensor();
  Tensor db = mask[2] && bias.defined() ? empty_like_dev(bias, bias.scalar_type()) : Tensor();
  const int64_t bits = (dx.defined() ? 1 : 0) | (dw.defined() ? 2 : 0) | (db.defined() ? 4 : 0);
  if (bits == 0) return {dx, dw, db};
  launch(Op::LayerNormBackward,
         {tensor_operand(grad_out), tensor_operand(input), tensor_operand(mean), tensor_operand(rstd),
          opt_operand(weight)},
         {tensor_operand(dx.defined() ? dx : dummy(device)),
          tensor_operand(dw.defined() ? dw : dummy(device)),
          tensor_operand(db.defined() ? db : dummy(device))},
         {axis, bits});
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor> fused_rms_norm(const Tensor& input, at::IntArrayRef ns,
                                          const OptTensor& weight_opt, std::optional<double> eps) {
  const Tensor& weight = opt_or_undef(weight_opt);
  const c10::Device device = common_device_opt("_fused_rms_norm", input, {&weight_opt});
  const int64_t axis = check_layer_norm(input, ns, weight, Tensor());
  check_norm_dtype("rms_norm", input);
  Tensor out = empty_like_dev(input, input.scalar_type());
  Tensor rstd = empty_device(stat_shape(input, axis), c10::kFloat, device);
  const double e = eps.has_value() ? *eps : std::numeric_limits<float>::epsilon();
  launch(Op::RmsNorm, {tensor_operand(input), opt_operand(weight), float_operand(e)},
         {tensor_operand(out), tensor_operand(rstd)}, {axis});
  return {out, rstd};
}

std::tuple<Tensor, Tensor> fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                   at::IntArrayRef ns, const Tensor& rstd,
                                                   const OptTensor& weight_opt,
                                                   std::array<bool, 2> mask) {
  const Tensor& weight = opt_or_undef(weight_opt);
  const c10::Device device =
      common_device("_fused_rms_norm_backward", {&grad_out, &input, &rstd, &weight});
  const int64_t axis = check_layer_norm(input, ns, weight, Tensor());
  Tensor dx = mask[0] ? empty_like_dev(input, input.scalar_type()) : Tensor();
  Tensor dw = mask[1] && weight.defined() ? empty_like_dev(weight, weight.scalar_type()) : Tensor();
  const int64_t bits = (dx.defined() ? 1 : 0) | (dw.defined() ? 2 : 0);
  if (bits == 0) return {dx, dw};
  launch(Op::RmsNormBackward,
         {tensor_operand(grad_out), tensor_operand(input), tensor_operand(rstd), opt_operand(weight)},
         {tensor_operand(dx.defined() ? dx : dummy(device)),
          tensor_operand(dw.defined() ? dw : dummy(device))},
         {axis, bits});
  return {dx, dw};
}

// ------------------------------------------------------------ group norm

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input, const OptTensor& weight_opt,
                                                     const OptTensor& bias_opt, c10::SymInt N_s,
                                                     c10::SymInt C_s, c10::SymInt HxW_s,
                                                     int64_t group, double eps) {
  const Tensor& weight = opt_or_undef(weight_opt);
  const Tensor& bias = opt_or_undef(bias_opt);
  const c10::Device device = common_device_opt("native_group_norm", input, {&weight_opt, &bias_opt});
  const int64_t N = N_s.expect_int(), C = C_s.expect_int(), HxW = HxW_s.expect_int();
  TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels in input to be divisible by ",
              "num_groups, but got input of shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "Expected input of ", N * C * HxW, " elements, got ",
              input.sizes());
  TORCH_CHECK(!weight.defined() || weight.numel() == C, "Expected weight to be a vector of size equal "
              "to the number of channels in input, but got weight of shape ", weight.sizes(),
              " and input of shape ", input.sizes());
  TORCH_CHECK(!bias.defined() || bias.numel() == C, "Expected bias to be a vector of size equal to "
              "the number of channels in input, but got bias of shape ", bias.sizes(),
              " and input of shape ", input.sizes());
  check_norm_dtype("GroupNormKernelImpl", input);
  Tensor out = empty_like_dev(input, input.scalar_type());
  const auto sd = stats_dtype(input, {&weight, &bias});
  Tensor mean = empty_device({N, group}, sd, device);
  Tensor rstd = empty_device({N, group}, sd, device);
  if (N * group == 0) return {out, mean, rstd};
  launch(Op::GroupNorm,
         {tensor_operand(input.reshape({N, C, HxW})), opt_operand(weight), opt_operand(bias),
          float_operand(eps)},
         {tensor_operand(out.view({N, C, HxW})), tensor_operand(mean), tensor_operand(rstd)}, {group});
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& mean, const Tensor& rstd,
    const OptTensor& weight_opt, c10::SymInt N_s, c10::SymInt C_s, c10::SymInt HxW_s, int64_t group,
    std::array<bool, 3> mask) {
  const Tensor& weight = opt_or_undef(weight_opt);
  const c10::Device device =
      common_device("native_group_norm_backward", {&grad_out, &input, &mean, &rstd, &weight});
  const int64_t N = N_s.expect_int(), C = C_s.expect_int(), HxW = HxW_s.expect_int();
  const auto wdt = weight.defined() ? weight.scalar_type() : input.scalar_type();
  Tensor dx = mask[0] ? empty_like_dev(input, input.scalar_type()) : Tensor();
  Tensor dw = mask[1] ? empty_device({C}, wdt, device) : Tensor();
  Tensor db = mask[2] ? empty_device({C}, wdt, device) : Tensor();
  const int64_t bits = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  if (bits == 0) return {dx, dw, db};
  launch(Op::GroupNormBackward,
         {tensor_operand(grad_out.reshape({N, C, HxW})), tensor_operand(input.reshape({N, C, HxW})),
          tensor_operand(mean), tensor_operand(rstd), opt_operand(weight)},
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
  const c10::Device device = common_device(
      "native_batch_norm", {&input, &weight, &bias, &running_mean, &running_var});
  check_norm_dtype("batch_norm", input);
  const auto shape = bn_shape(input);
  const int64_t C = shape[1];
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    TORCH_CHECK(!t->defined() || t->numel() == C, "running_mean should contain ", C,
                " elements not ", t->numel());
  }
  if (training) {
    int64_t count = 1;
    for (int64_t d = 0; d < input.dim(); ++d) if (d != 1) count *= input.size(d);
    TORCH_CHECK(count > 1, "Expected more than 1 value per channel when training, got input size ",
                input.sizes());
  } else {
    TORCH_CHECK(running_mean.defined() && running_var.defined(),
                "running_mean and running_var must be defined in evaluation mode");
  }
  const auto sd = stats_dtype(input, {&weight, &bias, &running_mean, &running_var});
  Tensor out = empty_like_dev(input, input.scalar_type());
  Tensor save_mean = empty_device({training ? C : 0}, sd, device);
  Tensor save_invstd = empty_device({training ? C : 0}, sd, device);
  if (input.numel() == 0) return {out, save_mean, save_invstd};
  launch(Op::BatchNorm,
         {tensor_operand(input.reshape(shape)), opt_operand(weight), opt_operand(bias),
          opt_operand(running_mean), opt_operand(running_var), float_operand(momentum),
          float_operand(eps)},
         {tensor_operand(out.view(shape)), tensor_operand(save_mean), tensor_operand(save_invstd)},
         {training ? 1 : 0});
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const OptTensor& w,
                                                     const OptTensor& b, const OptTensor& rm,
                                                     const OptTensor& rv, bool training,
                                                     double momentum, double eps) {
  return batch_norm_impl(input, opt_or_undef(w), opt_or_undef(b), opt_or_undef(rm),
                         opt_or_undef(rv), training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> bn_legit(const Tensor& input, const OptTensor& w,
                                            const OptTensor& b, Tensor& rm, Tensor& rv,
                                            bool training, double momentum, double eps) {
  return batch_norm_impl(input, opt_or_undef(w), opt_or_undef(b), rm, rv, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> bn_legit_no_stats(const Tensor& input, const OptTensor& w,
                                                     const OptTensor& b, bool training,
                                                     double momentum, double eps) {
  return batch_norm_impl(input, opt_or_undef(w), opt_or_undef(b), Tensor(), Tensor(), training,
                         momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bn_with_update(const Tensor& input, const OptTensor& w,
                                                          const OptTensor& b, Tensor& rm, Tensor& rv,
                                                          double momentum, double eps) {
  auto [out, m, v] =
      batch_norm_impl(input, opt_or_undef(w), opt_or_undef(b), rm, rv, true, momentum, eps);
  Tensor reserve = empty_device({0}, c10::kByte, input.device());
  return {out, m, v, reserve};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_impl(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& running_mean,
    const Tensor& running_var, const Tensor& save_mean, const Tensor& save_invstd, bool train,
    double eps, std::array<bool, 3> mask) {
  const c10::Device device =
      common_device("native_batch_norm_backward", {&grad_out, &input, &weight, &running_mean,
                                                   &running_var, &save_mean, &save_invstd});
  const auto shape = bn_shape(input);
  const int64_t C = shape[1];
  const auto wdt = weight.defined() ? weight.scalar_type()
                                    : stats_dtype(input, {&running_mean, &save_mean});
  Tensor dx = mask[0] ? empty_like_dev(input, input.scalar_type()) : Tensor();
  Tensor dw = mask[1] ? empty_device({C}, wdt, device) : Tensor();
  Tensor db = mask[2] ? empty_device({C}, wdt, device) : Tensor();
  const int64_t bits = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  if (bits == 0) return {dx, dw, db};
  launch(Op::BatchNormBackward,
         {tensor_operand(grad_out.reshape(shape)), tensor_operand(input.reshape(shape)),
          opt_operand(weight), opt_operand(running_mean), opt_operand(running_var),
          opt_operand(save_mean), opt_operand(save_invstd), float_operand(eps)},
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
  return batch_norm_backward_impl(grad_out, input, opt_or_undef(w), opt_or_undef(rm),
                                  opt_or_undef(rv), opt_or_undef(sm), opt_or_undef(si), train, eps,
                                  mask);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const OptTensor& rm,
    const OptTensor& rv, const OptTensor& sm, const OptTensor& sv, bool update, double eps,
    std::array<bool, 3> mask, const Tensor& reserve) {
  return batch_norm_backward_impl(grad_out, input, weight, opt_or_undef(rm), opt_or_undef(rv),
                                  opt_or_undef(sm), opt_or_undef(sv), update, eps, mask);
}

// ------------------------------------------------------------ selection ops

// Runs body(target) with a dense target of `dtype`, copied into `out` when
// out differs in dtype or layout.
template <typename Body>
void into(const Tensor& out, c10::ScalarType dtype, Body&& body) {
  if (out.numel() == 0) return;
  if (out.scalar_type() == dtype && out.is_contiguous()) {
    body(out);
    return;
  }
  Tensor tmp = empty_device(out.sizes(), dtype, out.device());
  body(tmp);
  copy_on_device(out, tmp);
}

Operand value_operand(const Tensor& t, c10::ScalarType compute, at::IntArrayRef shape) {
  if (is_cpu_scalar(t)) return scalar_operand(t.item(), compute);
  return tensor_operand(to_dtype_on_device(t, compute).expand(shape));
}

// cat: slices of the result copied from each input (dtype converted on the way).
at::DimVector cat_shape(const std::vector<std::reference_wrapper<const Tensor>>& ts, int64_t& dim,
                        const Tensor*& ref) {
  TORCH_CHECK(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
  auto skip = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  ref = nullptr;
  for (const Tensor& t : ts)
    if (!skip(t)) { ref = &t; break; }
  if (ref == nullptr) return {0};
  TORCH_CHECK(ref->dim() > 0, "zero-dimensional tensor (at position 0) cannot be concatenated");
  dim = c10::maybe_wrap_dim(dim, ref->dim());
  at::DimVector shape(ref->sizes().begin(), ref->sizes().end());
  shape[dim] = 0;
  int64_t i = 0;
  for (const Tensor& t : ts) {
    if (!skip(t)) {
      TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ",
                  ref->dim(), " and ", t.dim());
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (d == dim) continue;
        TORCH_CHECK(t.size(d) == ref->size(d), "Sizes of tensors must match except in dimension ",
                    dim, ". Expected size ", ref->size(d), " but got size ", t.size(d),
                    " for tensor number ", i, " in the list.");
      }
      shape[dim] += t.size(dim);
    }
    ++i;
  }
  return shape;
}

void cat_into(const std::vector<std::reference_wrapper<const Tensor>>& ts, int64_t dim,
              const Tensor& out) {
  int64_t off = 0;
  for (const Tensor& t : ts) {
    if (t.dim() == 1 && t.size(0) == 0 && out.dim() != 1) continue;
    if (t.numel() == 0) {
      if (t.dim() == out.dim()) off += t.size(dim);
      continue;
    }
    copy_on_device(out.narrow(dim, off, t.size(dim)), t);
    off += t.size(dim);
  }
}

c10::Device cat_device(const std::vector<std::reference_wrapper<const Tensor>>& ts) {
  std::optional<c10::Device> device;
  for (const Tensor& t : ts) c10::impl::check_and_update_common_device(device, t, "cat", "tensors");
  return *device;
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  auto ts = tensors.materialize();
  const Tensor* ref;
  const auto shape = cat_shape(ts, dim, ref);
  const c10::Device device = cat_device(ts);
  const auto dtype = at::native::result_type(tensors);
  Tensor out = empty_device(shape, dtype, device);
  cat_into(ts, dim, out);
  return out;
}

Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  auto ts = tensors.materialize();
  const Tensor* ref;
  const auto shape = cat_shape(ts, dim, ref);
  check_out_device(out, cat_device(ts), "cat");
  check_cast(at::native::result_type(tensors), out);
  at::native::resize_output(out, shape);
  cat_into(ts, dim, out);
  return out;
}

Tensor& where_out(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const c10::Device device = common_device("where", {&cond, &a, &b});
  check_out_device(out, device, "where");
  const auto compute = at::result_type(a, b);
  check_cast(compute, out);
  const auto shape = at::infer_size_dimvector(cond.sizes(), at::infer_size_dimvector(a.sizes(), b.sizes()));
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Operand oc = value_operand(cond, c10::kBool, shape);
  Operand oa = value_operand(a, compute, shape);
  Operand ob = value_operand(b, compute, shape);
  into(out, compute, [&](const Tensor& t) { launch(Op::Where, {oc, oa, ob}, {tensor_operand(t)}); });
  return out;
}

// isposinf / isneginf / isnan: comparisons against a scalar (integers: all false).
template <int kWhich>  // 0 isnan, 1 isposinf, -1 isneginf
void isx_into(const Tensor& self, const Tensor& out) {
  if (out.numel() == 0) return;
  if (!at::isFloatingType(self.scalar_type())) {
    fill_scalar_device(out, 0);
    return;
  }
  into(out, c10::kBool, [&](const Tensor& t) {
    if (kWhich == 0) {
      launch(Op::Ne, {tensor_operand(self), tensor_operand(self)}, {tensor_operand(t)});
    } else {
      const double inf = std::numeric_limits<double>::infinity();
      launch(Op::Eq, {tensor_operand(self), float_operand(kWhich > 0 ? inf : -inf)},
             {tensor_operand(t)});
    }
  });
}
template <int kWhich>
Tensor& isx_out(const Tensor& self, Tensor& out) {
  const char* name = kWhich == 0 ? "isnan" : kWhich > 0 ? "isposinf" : "isneginf";
  TORCH_CHECK(kWhich == 0 || !self.is_complex(), name, " does not support complex inputs.");
  if (self.is_complex()) {  // isnan: either part is NaN
    check_out_device(out, self.device(), name);
    at::native::resize_output(out, self.sizes());
    out.copy_(at::isnan(at::view_as_real(self)).any(-1));
    return out;
  }
  TORCH_CHECK(out.scalar_type() == c10::kBool, name, " does not support non-boolean outputs.");
  check_out_device(out, self.device(), name);
  at::native::resize_output(out, self.sizes());
  isx_into<kWhich>(self, out);
  return out;
}
template <int kWhich>
Tensor isx(const Tensor& self) {
  Tensor out = empty_elementwise(self.sizes(), c10::kBool, self.device(), {&self});
  return isx_out<kWhich>(self, out);
}

// Reductions over a dim set (the engine writes the keepdim view).
struct RPlan {
  int64_t mask = 0;
  at::DimVector keep, out;
};
RPlan rplan(const Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) {
  RPlan p;
  const int64_t nd = self.dim();
  if (nd == 0) {
    // A 0-dim tensor reduces to itself; dim 0 / -1 are valid names for it.
    if (dims.has_value()) {
      for (int64_t d : *dims) c10::maybe_wrap_dim(d, nd);
    }
  } else if (!dims.has_value() || dims->empty()) {
    p.mask = (int64_t(1) << nd) - 1;
  } else {
    for (int64_t d : *dims) {
      const int64_t w = c10::maybe_wrap_dim(d, nd);
      TORCH_CHECK(!(p.mask & (int64_t(1) << w)), "dim ", w, " appears multiple times in the list of dims");
      p.mask |= int64_t(1) << w;
    }
  }
  for (int64_t i = 0; i < nd; ++i) {
    const bool r = p.mask & (int64_t(1) << i);
    p.keep.push_back(r ? 1 : self.size(i));
    if (!r || keepdim) p.out.push_back(r ? 1 : self.size(i));
  }
  return p;
}

void reduce_into(Op op, const Tensor& in, const RPlan& plan, const Tensor& out, double empty_value) {
  if (out.numel() == 0) return;
  if (in.numel() == 0) {
    fill_scalar_device(out, empty_value);
    return;
  }
  into(out, in.scalar_type() == c10::kBool ? c10::kBool : out.scalar_type(), [&](const Tensor& t) {
    launch(op, {tensor_operand(in)}, {tensor_operand(t.view(plan.keep))}, {plan.mask});
  });
}

// all/any: values as Bool, then min/max.
template <bool kAll>
Tensor& allany_impl(const Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, Tensor& out) {
  const char* name = kAll ? "all" : "any";
  check_out_device(out, self.device(), name);
  const RPlan plan = rplan(self, dims, keepdim);
  at::native::resize_output(out, plan.out);
  Tensor b = to_dtype_on_device(self, c10::kBool);
  reduce_into(kAll ? Op::Amin : Op::Amax, b, plan, out, kAll ? 1.0 : 0.0);
  return out;
}
template <bool kAll>
Tensor& allany_all_out(const Tensor& self, Tensor& out) { return allany_impl<kAll>(self, std::nullopt, false, out); }
template <bool kAll>
Tensor& allany_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  return allany_impl<kAll>(self, at::IntArrayRef{dim}, keepdim, out);
}
template <bool kAll>
Tensor& allany_dims_out(const Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, Tensor& out) {
  if (dims.has_value() && dims->empty()) {  // no dims: elementwise cast
    check_out_device(out, self.device(), kAll ? "all" : "any");
    at::native::resize_output(out, self.sizes());
    copy_on_device(out, to_dtype_on_device(self, c10::kBool));
    return out;
  }
  return allany_impl<kAll>(self, dims, keepdim, out);
}

// argmax/argmin and max/min over a dim.
template <bool kMax>
void argreduce_into(const Tensor& self, int64_t dim, bool keepdim, const Tensor& indices,
                    const Tensor* values) {
  at::DimVector keep(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) keep[dim] = 1;
  if (indices.numel() == 0) return;
  const bool direct_i = indices.is_contiguous();
  const bool direct_v = values == nullptr || (values->is_contiguous() && values->scalar_type() == self.scalar_type());
  Tensor ti = direct_i ? indices : empty_device(indices.sizes(), c10::kLong, indices.device());
  Tensor tv = values == nullptr ? Tensor()
              : direct_v        ? *values
                                : empty_device(values->sizes(), self.scalar_type(), values->device());
  Tensor in = self.dim() == 0 ? self.view({1}) : self;
  at::DimVector k2 = self.dim() == 0 ? at::DimVector{1} : keep;
  if (values != nullptr) {
    launch(kMax ? Op::ArgMax : Op::ArgMin, {tensor_operand(in)},
           {tensor_operand(ti.view(k2)), tensor_operand(tv.view(k2))}, {self.dim() == 0 ? 0 : dim});
  } else {
    launch(kMax ? Op::ArgMax : Op::ArgMin, {tensor_operand(in)}, {tensor_operand(ti.view(k2))},
           {self.dim() == 0 ? 0 : dim});
  }
  if (!direct_i) copy_on_device(indices, ti);
  if (!direct_v) copy_on_device(*values, tv);
}

template <bool kMax>
Tensor& argmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  const char* name = kMax ? "argmax()" : "argmin()";
  check_out_device(out, self.device(), name);
  TORCH_CHECK(out.scalar_type() == c10::kLong, "Expected out tensor to have dtype long int, but got ",
              out.scalar_type(), " instead");
  Tensor in = self;
  int64_t d = 0;
  at::DimVector shape;
  if (!dim.has_value()) {
    TORCH_CHECK_INDEX(self.numel() > 0, name, ": Expected reduction dim to be specified for input.numel() == 0.");
    in = self.reshape({-1});
    if (keepdim) shape.assign(self.dim(), 1);
  } else {
    d = c10::maybe_wrap_dim(*dim, self.dim());
    if (self.dim() > 0) {
      TORCH_CHECK_INDEX(self.size(d) != 0, name, ": Expected reduction dim ", d, " to have non-zero size.");
      for (int64_t i = 0; i < self.dim(); ++i)
        if (i != d || keepdim) shape.push_back(i == d ? 1 : self.size(i));
    }
  }
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::DimVector keep(in.sizes().begin(), in.sizes().end());
  if (in.dim() > 0) keep[d] = 1;
  Tensor flat = out.is_contiguous() ? out : empty_device(out.sizes(), c10::kLong, out.device());
  argreduce_into<kMax>(in, d, true, flat.view(keep.empty() ? at::DimVector{} : keep), nullptr);
  if (!flat.is_same(out)) copy_on_device(out, flat);
  return out;
}

template <bool kMax>
std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                                         Tensor& values, Tensor& indices) {
  const char* name = kMax ? "max()" : "min()";
  check_out_device(values, self.device(), name);
  check_out_device(indices, self.device(), name);
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == c10::kLong, "Expected out tensor to have dtype long int, but got ",
              indices.scalar_type(), " instead");
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  at::DimVector shape;
  if (self.dim() > 0) {
    TORCH_CHECK_INDEX(self.size(d) != 0, name, ": Expected reduction dim ", d, " to have non-zero size.");
    for (int64_t i = 0; i < self.dim(); ++i)
      if (i != d || keepdim) shape.push_back(i == d ? 1 : self.size(i));
  }
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  if (values.numel() == 0) return {values, indices};
  at::DimVector keep(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) keep[d] = 1;
  Tensor vi = values.is_contiguous() ? values : empty_device(values.sizes(), values.scalar_type(), values.device());
  Tensor ii = indices.is_contiguous() ? indices : empty_device(indices.sizes(), c10::kLong, indices.device());
  Tensor vk = vi.view(keep), ik = ii.view(keep);
  argreduce_into<kMax>(self, d, true, ik, &vk);
  if (!vi.is_same(values)) copy_on_device(values, vi);
  if (!ii.is_same(indices)) copy_on_device(indices, ii);
  return {values, indices};
}

template <bool kMax>
Tensor max_all(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, kMax ? "max()" : "min()",
              ": Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  Tensor out = empty_device({}, self.scalar_type(), self.device());
  reduce_into(kMax ? Op::Amax : Op::Amin, self, rplan(self, std::nullopt, false), out, 0);
  return out;
}
template <bool kMax>
Tensor& max_all_out(const Tensor& self, Tensor& out) {
  Tensor r = max_all<kMax>(self);
  at::native::resize_output(out, {});
  copy_on_device(out, r);
  return out;
}

template <Op kOp>
Tensor& tri_out(const Tensor& self, int64_t diagonal, Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, kOp == Op::Tril ? "tril" : "triu",
              ": input tensor must have at least 2 dimensions");
  check_out_device(out, self.device(), kOp == Op::Tril ? "tril" : "triu");
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  Tensor src = to_dtype_on_device(self, out.scalar_type());
  launch(kOp, {tensor_operand(src)}, {tensor_operand(out)}, {diagonal});
  return out;
}
template <Op kOp>
Tensor tri(const Tensor& self, int64_t diagonal) {
  Tensor out = empty_like_dev(self, self.scalar_type());
  return tri_out<kOp>(self, diagonal, out);
}
template <Op kOp>
Tensor& tri_(Tensor& self, int64_t diagonal) {
  return tri_out<kOp>(self, diagonal, self);
}

void check_mask(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_fill_ only supports boolean masks, but got mask "
              "with dtype ", mask.scalar_type());
  const auto shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", shape);
}
Tensor& masked_fill_scalar(Tensor& self, const Tensor& mask, const at::Scalar& value) {
  common_device("masked_fill_", {&self, &mask});
  check_mask(self, mask);
  if (self.numel() == 0) return self;
  launch(Op::Where, {tensor_operand(mask.expand(self.sizes())), scalar_operand(value, self.scalar_type()),
                     tensor_operand(self)},
         {tensor_operand(self)});
  return self;
}
Tensor& masked_fill_tensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got "
              "tensor with ", value.dim(), " dimension(s).");
  if (value.is_cpu()) return masked_fill_scalar(self, mask, value.item());
  common_device("masked_fill_", {&self, &mask, &value});
  check_mask(self, mask);
  if (self.numel() == 0) return self;
  launch(Op::Where, {tensor_operand(mask.expand(self.sizes())),
                     tensor_operand(to_dtype_on_device(value, self.scalar_type()).expand(self.sizes())),
                     tensor_operand(self)},
         {tensor_operand(self)});
  return self;
}

template <Op kOp>
Tensor& bitwise_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* name = kOp == Op::BitwiseAnd ? "bitwise_and_cpu" : kOp == Op::BitwiseOr ? "bitwise_or_cpu"
                                                                                       : "bitwise_xor_cpu";
  const c10::Device device = common_device(name, {&a, &b});
  check_out_device(out, device, name);
  const auto compute = at::result_type(a, b);
  TORCH_CHECK(c10::isIntegralType(compute, true), "\"", name, "\" not implemented for '",
              c10::toString(compute), "'");
  check_cast(compute, out);
  const auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Operand oa = value_operand(a, compute, shape), ob = value_operand(b, compute, shape);
  into(out, compute, [&](const Tensor& t) { launch(kOp, {oa, ob}, {tensor_operand(t)}); });
  return out;
}

Tensor& bitwise_not_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(c10::isIntegralType(self.scalar_type(), true), "\"bitwise_not_cpu\" not implemented for '",
              c10::toString(self.scalar_type()), "'");
  check_out_device(out, self.device(), "bitwise_not");
  check_cast(self.scalar_type(), out);
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  into(out, self.scalar_type(), [&](const Tensor& t) {
    if (self.scalar_type() == c10::kBool) {
      launch(Op::LogicalNot, {tensor_operand(self)}, {tensor_operand(t)});
    } else {
      launch(Op::BitwiseXor, {tensor_operand(self), int_operand(-1)}, {tensor_operand(t)});
    }
  });
  return out;
}

c10::ScalarType int_to_long(const Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type();
}

Tensor& prod_dim_out(const Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                     Tensor& out) {
  check_out_device(out, self.device(), "prod");
  const RPlan plan = rplan(self, at::IntArrayRef{dim}, keepdim);
  at::native::resize_output(out, plan.out);
  Tensor in = to_dtype_on_device(self, narrow_dtype(int_to_long(self, dtype)));
  reduce_into(Op::Prod, in, plan, out, 1.0);
  return out;
}
Tensor prod_all(const Tensor& self, std::optional<c10::ScalarType> dtype) {
  Tensor out = empty_device({}, narrow_dtype(int_to_long(self, dtype)), self.device());
  Tensor in = to_dtype_on_device(self, out.scalar_type());
  reduce_into(Op::Prod, in, rplan(self, std::nullopt, false), out, 1.0);
  return out;
}

template <Op kOp>
Tensor& scan_out(const Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, Tensor& out) {
  check_out_device(out, self.device(), kOp == Op::Cumsum ? "cumsum" : "cumprod");
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  const auto want = narrow_dtype(int_to_long(self, dtype));
  TORCH_CHECK(!dtype.has_value() || out.scalar_type() == want, "Expected out tensor to have dtype ",
              want, ", but got ", out.scalar_type(), " instead");
  into(out, out.scalar_type(), [&](const Tensor& t) {
    Tensor in = self.dim() == 0 ? self.view({1}) : self;
    launch(kOp, {tensor_operand(in)}, {tensor_operand(self.dim() == 0 ? t.view({1}) : t)}, {d});
  });
  return out;
}


// ------------------------------------------------------------ pow, floor_divide

// Runs the CPU kernel of an op for a case the engines do not cover (counted).
template <typename... Args>
void route_to_cpu(const char* name, const char* overload, Args&&... args) {
  std::vector<c10::IValue> stack{c10::IValue(std::forward<Args>(args))...};
  cpu_fallback_call(name, overload, &stack);
}

Tensor& pow_ts_out(const Tensor& self, const at::Scalar& exp, Tensor& out) {
  check_out_device(out, self.device(), "pow");
  const auto compute = at::result_type(self, exp);
  if (c10::isComplexType(compute) || exp.isComplex()) {
    route_to_cpu("aten::pow", "Tensor_Scalar_out", self, exp, out);
    return out;
  }
  TORCH_CHECK(!(c10::isIntegralType(self.scalar_type(), true) && exp.isIntegral(true) && exp.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  check_cast(compute, out);
  const double e = exp.toDouble();
  // In float16/bfloat16, x ** -0.5 is the CPU's rsqrt (or its half-type pow), whose
  // results depend on the CPU loop's structure: its own kernel runs (host library), as
  // for rsqrt (ops_math.cpp).
  if (e == -0.5) decline_half_types(compute, "pow(x, -0.5)");
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  Tensor x = to_dtype_on_device(self, compute);
  // The Pow engine takes the CPU's shortcuts for 2, 3, 0.5, -0.5, -1 and -2 itself.
  into(out, compute, [&](const Tensor& t) {
    if (e == 1.0) {
      copy_on_device(t, x);
    } else {
      launch(Op::Pow, {tensor_operand(x), scalar_operand(exp, compute)}, {tensor_operand(t)});
    }
  });
  return out;
}

Tensor& pow_tt_out(const Tensor& self, const Tensor& exponent, Tensor& out) {
  const c10::Device device = common_device("pow", {&self, &exponent});
  check_out_device(out, device, "pow");
  const auto compute = at::result_type(self, exponent);
  if (c10::isComplexType(compute)) {
    route_to_cpu("aten::pow", "Tensor_Tensor_out", self, exponent, out);
    return out;
  }
  check_cast(compute, out);
  const auto shape = at::infer_size_dimvector(self.sizes(), exponent.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Operand a = value_operand(self, compute, shape), b = value_operand(exponent, compute, shape);
  into(out, compute, [&](const Tensor& t) { launch(Op::Pow, {a, b}, {tensor_operand(t)}); });
  return out;
}

Tensor& pow_st_out(const at::Scalar& self, const Tensor& exponent, Tensor& out) {
  check_out_device(out, exponent.device(), "pow");
  const auto compute = at::result_type(self, exponent);
  if (c10::isComplexType(compute) || self.isComplex()) {
    route_to_cpu("aten::pow", "Scalar_out", self, exponent, out);
    return out;
  }
  check_cast(compute, out);
  at::native::resize_output(out, exponent.sizes());
  if (out.numel() == 0) return out;
  Tensor x = to_dtype_on_device(exponent, compute);
  into(out, compute, [&](const Tensor& t) {
    launch(Op::Pow, {scalar_operand(self, compute), tensor_operand(x)}, {tensor_operand(t)});
  });
  return out;
}

Tensor& nv_floor_divide_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const c10::Device device = common_device("floor_divide", {&a, &b});
  check_out_device(out, device, "floor_divide");
  const auto compute = at::result_type(a, b);
  TORCH_CHECK(compute != c10::kBool, "\"div_floor_cpu\" not implemented for 'Bool'");
  check_cast(compute, out);
  const auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Operand oa = value_operand(a, compute, shape), ob = value_operand(b, compute, shape);
  into(out, compute, [&](const Tensor& t) { launch(Op::FloorDivide, {oa, ob}, {tensor_operand(t)}); });
  return out;
}
// remainder (Python's modulo), atan2: arithmetic binary ops with promotion.
template <Op kOp>
Tensor& binary_promote_out(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* name = kOp == Op::Remainder ? "remainder" : "atan2";
  const c10::Device device = common_device(name, {&a, &b});
  check_out_device(out, device, name);
  auto compute = at::result_type(a, b);
  if (kOp == Op::Atan2 && c10::isIntegralType(compute, true)) compute = c10::typeMetaToScalarType(c10::get_default_dtype());
  TORCH_CHECK(compute != c10::kBool || kOp != Op::Remainder, "\"remainder_cpu\" not implemented for 'Bool'");
  check_cast(compute, out);
  const auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Operand oa = value_operand(a, compute, shape), ob = value_operand(b, compute, shape);
  into(out, compute, [&](const Tensor& t) { launch(kOp, {oa, ob}, {tensor_operand(t)}); });
  return out;
}
Tensor& remainder_scalar_tensor_out(const at::Scalar& a, const Tensor& b, Tensor& out) {
  Tensor wa = c10::scalar_to_tensor(a);
  wa.unsafeGetTensorImpl()->set_wrapped_number(true);
  return binary_promote_out<Op::Remainder>(wa, b, out);
}

// histc (integer inputs too, as CUDA: MoE routers count tokens per expert):
// bin = floor((x - min) / (max - min) * bins), x == max in the last bin,
// out-of-range values dropped; counts by scatter-add into bins + 1 slots.
Tensor nv_histc(const Tensor& self, int64_t bins, const at::Scalar& min_s, const at::Scalar& max_s) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(!self.is_complex() && self.scalar_type() != c10::kBool, "\"histc\" not implemented for '",
              c10::toString(self.scalar_type()), "'");
  double lo = min_s.toDouble(), hi = max_s.toDouble();
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc(): range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histc(): max must be larger than min");
  Tensor x = to_dtype_on_device(self, c10::kFloat).reshape({-1});
  if (lo == hi && x.numel() > 0) {  // data range: a synchronisation, as on the CPU
    lo = x.min().item<double>();
    hi = x.max().item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  Tensor counts = empty_device({bins + 1}, self.scalar_type(), self.device());
  fill_scalar_device(counts, 0);
  if (x.numel() > 0) {
    Tensor pos = ((x - lo) * (static_cast<double>(bins) / (hi - lo))).floor_();
    pos = at::where(x.eq(hi), static_cast<double>(bins - 1), pos);
    Tensor inside = at::logical_and(x.ge(lo), x.le(hi));
    Tensor bin = at::where(inside, pos, static_cast<double>(bins)).to(c10::kLong);
    Tensor ones = empty_device({x.numel()}, self.scalar_type(), self.device());
    fill_scalar_device(ones, 1);
    launch(Op::Scatter, {tensor_operand(counts), tensor_operand(bin), tensor_operand(ones)},
           {tensor_operand(counts)}, {0, 1, 1});
  }
  return counts.narrow(0, 0, bins);
}

Tensor nv_floor_divide(const Tensor& a, const Tensor& b) {
  const c10::Device device = common_device("floor_divide", {&a, &b});
  Tensor out = empty_elementwise(at::infer_size_dimvector(a.sizes(), b.sizes()),
                                 at::result_type(a, b), device, {&a, &b});
  return nv_floor_divide_out(a, b, out);
}
Tensor& nv_floor_divide_(Tensor& a, const Tensor& b) { return nv_floor_divide_out(a, b, a); }

// ------------------------------------------------------------ isin

Tensor& isin_tt_out(const Tensor& el, const Tensor& test, bool /*assume_unique*/, bool invert, Tensor& out) {
  const c10::Device device = common_device("isin", {&el, &test});
  check_out_device(out, device, "isin");
  const auto compute = at::result_type(el, test);
  at::native::resize_output(out, el.sizes());
  if (out.numel() == 0) return out;
  if (test.numel() == 0) {
    fill_scalar_device(out, invert ? 1 : 0);
    return out;
  }
  Tensor e = to_dtype_on_device(el, compute);
  Tensor t = test.is_cpu() ? test.to(device) : test;
  t = to_dtype_on_device(t, compute);
  into(out, c10::kBool, [&](const Tensor& o) {
    launch(Op::Isin, {tensor_operand(e), tensor_operand(t)}, {tensor_operand(o)}, {invert ? 1 : 0});
  });
  return out;
}
Tensor& isin_ts_out(const Tensor& el, const at::Scalar& test, bool, bool invert, Tensor& out) {
  check_out_device(out, el.device(), "isin");
  const auto compute = at::result_type(el, test);
  at::native::resize_output(out, el.sizes());
  if (out.numel() == 0) return out;
  Tensor e = to_dtype_on_device(el, compute);
  into(out, c10::kBool, [&](const Tensor& o) {
    launch(invert ? Op::Ne : Op::Eq, {tensor_operand(e), scalar_operand(test, compute)}, {tensor_operand(o)});
  });
  return out;
}
Tensor& isin_st_out(const at::Scalar& el, const Tensor& test, bool, bool invert, Tensor& out) {
  check_out_device(out, test.device(), "isin");
  const auto compute = at::result_type(el, test);
  at::native::resize_output(out, {});
  Tensor e = empty_device({}, compute, test.device());
  fill_scalar_device(e, real_scalar(el));
  Tensor t = to_dtype_on_device(test, compute);
  if (test.numel() == 0) {
    fill_scalar_device(out, invert ? 1 : 0);
    return out;
  }
  into(out, c10::kBool, [&](const Tensor& o) {
    launch(Op::Isin, {tensor_operand(e), tensor_operand(t)}, {tensor_operand(o)}, {invert ? 1 : 0});
  });
  return out;
}

// ------------------------------------------------------------ gather / scatter

void check_index_long(const Tensor& index, const char* name) {
  // The engine reads int64 indices. Others decline to the host library kernel
  // (native_ops.h): int32 is valid, and the CPU's kernel accepts or rejects the
  // rest exactly as the CPU does (an empty uint8 index is accepted).
  TORCH_CHECK_NOT_IMPLEMENTED(index.scalar_type() == c10::kLong, name, "(): ", index.scalar_type(),
                              " index (engine reads int64)");
}

Tensor& nv_gather_out(const Tensor& self, int64_t dim, const Tensor& index, bool, Tensor& out) {
  const c10::Device device = common_device("gather", {&self, &index});
  check_out_device(out, device, "gather");
  check_index_long(index, "gather");
  dim = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(index.dim() == self.dim() || (index.dim() <= 1 && self.dim() <= 1),
              "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < index.dim() && self.dim() > 0; ++d) {
    if (d == dim) continue;
    TORCH_CHECK(index.size(d) <= self.size(d), "Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", dim);
  }
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "gather(): Expected self.dtype to be equal to src.dtype");
  at::native::resize_output(out, index.sizes());
  if (out.numel() == 0) return out;
  launch(Op::Gather, {tensor_operand(self), tensor_operand(index)}, {tensor_operand(out)}, {dim});
  return out;
}

void scatter_checks(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const char* name) {
  check_index_long(index, name);
  if (src) {
    TORCH_CHECK(src->scalar_type() == self.scalar_type(), name, "(): Expected self.dtype to be equal to src.dtype");
  }
  TORCH_CHECK(index.dim() == self.dim() || (index.dim() <= 1 && self.dim() <= 1),
              "Index tensor must have the same number of dimensions as self tensor");
  for (int64_t d = 0; d < index.dim() && self.dim() > 0; ++d) {
    const bool bad = (d != dim && index.size(d) > self.size(d)) || (src && index.size(d) > src->size(d));
    TORCH_CHECK(!bad, "Expected index ", index.sizes(), " to be smaller than self ", self.sizes(),
                " apart from dimension ", dim, src ? " and to be smaller size than src " : "",
                src ? c10::str(src->sizes()) : "");
  }
}

// reduce: 0 assign, 1 add, 2 prod, 3 amax, 4 amin, 5 mean
Tensor& scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                     const at::Scalar* value, int64_t reduce, bool include_self, Tensor& out,
                     const char* name) {
  const c10::Device device = src ? common_device(name, {&self, &index, src}) : common_device(name, {&self, &index});
  check_out_device(out, device, name);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  scatter_checks(self, dim, index, src, name);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, "(): Expected out.dtype to be equal to self.dtype");
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  if (index.numel() == 0) {
    if (!out.is_same(self)) copy_on_device(out, self);
    return out;
  }
  Operand s = src ? tensor_operand(*src) : scalar_operand(*value, self.scalar_type());
  launch(Op::Scatter, {tensor_operand(self), tensor_operand(index), s}, {tensor_operand(out)},
         {dim, reduce, include_self ? 1 : 0});
  return out;
}

int64_t scatter_reduce_kind(c10::string_view reduce, bool two) {
  if (two) {
    if (reduce == "sum") return 1;
    if (reduce == "prod") return 2;
    if (reduce == "amax") return 3;
    if (reduce == "amin") return 4;
    if (reduce == "mean") return 5;
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  }
  if (reduce == "add") return 1;
  if (reduce == "multiply") return 2;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

Tensor& scatter_src_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, 0, true, out, "scatter");
}
Tensor& scatter_value_out(const Tensor& self, int64_t dim, const Tensor& index, const at::Scalar& value, Tensor& out) {
  return scatter_impl(self, dim, index, nullptr, &value, 0, true, out, "scatter");
}
Tensor& scatter_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           c10::string_view reduce, Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, scatter_reduce_kind(reduce, false), true, out, "scatter");
}
Tensor& scatter_value_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const at::Scalar& value,
                                 c10::string_view reduce, Tensor& out) {
  return scatter_impl(self, dim, index, nullptr, &value, scatter_reduce_kind(reduce, false), true, out, "scatter");
}
Tensor& nv_scatter_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, 1, true, out, "scatter_add");
}
Tensor& scatter_reduce_two_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                               c10::string_view reduce, bool include_self, Tensor& out) {
  return scatter_impl(self, dim, index, &src, nullptr, scatter_reduce_kind(reduce, true), include_self, out,
                      "scatter_reduce");
}

template <Op kOp>
Tensor& index_addcopy_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                          const at::Scalar& alpha, Tensor& out) {
  const char* name = kOp == Op::IndexAdd ? "index_add_" : "index_copy_";
  const c10::Device device = common_device(name, {&self, &index, &source});
  check_out_device(out, device, name);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, name, "(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt, name,
              "(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), name,
              "(): self (", self.scalar_type(), ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(source.dim() == self.dim() || (source.dim() <= 1 && self.dim() <= 1), name,
              "(): Source/destination tensor must have same number of dimensions");
  const int64_t n = source.dim() > 0 ? source.size(dim) : 1;
  TORCH_CHECK_INDEX(index.numel() == n, name, "(): Number of indices (", index.numel(),
                    ") should be equal to source.size(dim) (", n, ")");
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  if (index.numel() == 0) {
    if (!out.is_same(self)) copy_on_device(out, self);
    return out;
  }
  if (kOp == Op::IndexAdd) {
    launch(kOp, {tensor_operand(self), tensor_operand(index), tensor_operand(source),
                 scalar_operand(alpha, self.scalar_type())},
           {tensor_operand(out)}, {dim});
  } else {
    launch(kOp, {tensor_operand(self), tensor_operand(index), tensor_operand(source)}, {tensor_operand(out)}, {dim});
  }
  return out;
}
Tensor& nv_index_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      const at::Scalar& alpha, Tensor& out) {
  return index_addcopy_out<Op::IndexAdd>(self, dim, index, source, alpha, out);
}
Tensor& nv_index_copy_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Tensor& out) {
  return index_addcopy_out<Op::IndexCopy>(self, dim, index, source, 1, out);
}

// ------------------------------------------------------------ nonzero, advanced indexing

Tensor& nv_nonzero_out(const Tensor& self, Tensor& out) {
  check_out_device(out, self.device(), "nonzero");
  TORCH_CHECK(out.scalar_type() == c10::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  TORCH_CHECK(!self.is_complex(), "nonzero is not supported for complex inputs");
  int64_t n = 0;
  if (self.numel() > 0) {
    Tensor cnt = empty_device({}, c10::kLong, self.device());
    Tensor b = to_dtype_on_device(self, c10::kBool);
    launch(Op::Sum, {tensor_operand(to_dtype_on_device(b, c10::kLong))},
           {tensor_operand(cnt.view(at::DimVector(self.dim(), 1)))}, {self.dim() == 0 ? 0 : (int64_t(1) << self.dim()) - 1});
    n = cnt.item<int64_t>();  // the output size needs the count: a synchronisation
  }
  at::native::resize_output(out, {n, self.dim()});
  if (n == 0 || self.dim() == 0) return out;
  into(out, c10::kLong, [&](const Tensor& t) { launch(Op::Nonzero, {tensor_operand(self)}, {tensor_operand(t)}); });
  return out;
}
Tensor nv_nonzero(const Tensor& self) {
  Tensor out = empty_device({0}, c10::kLong, self.device());
  return nv_nonzero_out(self, out);
}

struct IndexPlan {
  Tensor self;       // possibly permuted so indexed dims are consecutive
  Tensor indices;    // [m, count] Int64, dense
  int64_t pos = 0, m = 0, count = 0;
  at::DimVector idx_shape;   // broadcast shape of the index tensors
  at::DimVector full_shape;  // result shape
  at::DimVector flat_shape;  // result with idx dims merged into count
};

IndexPlan make_index_plan(const Tensor& self, const c10::List<std::optional<Tensor>>& indices) {
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  // Expand boolean masks into long indices (one per masked dim).
  std::vector<Tensor> idx;  // per self dim, undefined = full slice
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<Tensor> o = indices.get(i);
    if (!o.has_value() || !o->defined()) {
      idx.emplace_back();
      continue;
    }
    Tensor t = *o;
    if (t.device() != self.device()) t = t.to(self.device());
    if (t.scalar_type() == c10::kBool || t.scalar_type() == c10::kByte) {
      const int64_t start = static_cast<int64_t>(idx.size());
      for (int64_t j = 0; j < t.dim(); ++j) {
        TORCH_CHECK_INDEX(start + j < self.dim() && t.size(j) == self.size(start + j),
                          "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", start + j);
      }
      Tensor nz = nv_nonzero(t);
      for (int64_t j = 0; j < t.dim(); ++j) idx.push_back(nz.select(1, j));
      if (t.dim() == 0) {
        TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: 0-d boolean index");
      }
    } else {
      TORCH_CHECK_INDEX(t.scalar_type() == c10::kLong || t.scalar_type() == c10::kInt,
                        "tensors used as indices must be long, int, byte or bool tensors");
      idx.push_back(t);
    }
  }
  while (static_cast<int64_t>(idx.size()) < self.dim()) idx.emplace_back();
  TORCH_CHECK_INDEX(static_cast<int64_t>(idx.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", idx.size(), ")");
  std::vector<int64_t> where;
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d].defined()) where.push_back(static_cast<int64_t>(d));
  TORCH_INTERNAL_ASSERT(!where.empty());
  IndexPlan p;
  p.m = static_cast<int64_t>(where.size());
  bool adjacent = where.back() - where.front() + 1 == p.m;
  p.self = self;
  std::vector<Tensor> used;
  if (adjacent) {
    p.pos = where.front();
    for (int64_t d : where) used.push_back(idx[d]);
  } else {
    std::vector<int64_t> perm(where.begin(), where.end());
    for (int64_t d = 0; d < self.dim(); ++d)
      if (!idx[d].defined()) perm.push_back(d);
    p.self = self.permute(perm);
    p.pos = 0;
    for (int64_t d : where) used.push_back(idx[d]);
  }
  at::DimVector shape;
  for (const Tensor& t : used) shape = at::infer_size_dimvector(shape, t.sizes());
  p.idx_shape = shape;
  p.count = c10::multiply_integers(shape);
  p.indices = empty_device({p.m, p.count}, c10::kLong, self.device());
  for (int64_t k = 0; k < p.m && p.count > 0; ++k)
    copy_on_device(p.indices.select(0, k).view(shape), used[k].expand(shape));
  const auto ss = p.self.sizes();
  p.full_shape.assign(ss.begin(), ss.begin() + p.pos);
  p.flat_shape = p.full_shape;
  p.full_shape.append(shape.begin(), shape.end());
  p.flat_shape.push_back(p.count);
  for (int64_t d = p.pos + p.m; d < p.self.dim(); ++d) {
    p.full_shape.push_back(ss[d]);
    p.flat_shape.push_back(ss[d]);
  }
  return p;
}

bool all_undefined(const c10::List<std::optional<Tensor>>& indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<Tensor> o = indices.get(i);
    if (o.has_value() && o->defined()) return false;
  }
  return true;
}

Tensor& nv_index_out(const Tensor& self, const c10::List<std::optional<Tensor>>& indices, Tensor& out) {
  check_out_device(out, self.device(), "index");
  if (all_undefined(indices)) {
    at::native::resize_output(out, self.sizes());
    copy_on_device(out, self);
    return out;
  }
  IndexPlan p = make_index_plan(self, indices);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(), ") and result (",
              out.scalar_type(), ") must have the same scalar type");
  at::native::resize_output(out, p.full_shape);
  if (out.numel() == 0) return out;
  into(out, self.scalar_type(), [&](const Tensor& t) {
    launch(Op::Index, {tensor_operand(p.self), tensor_operand(p.indices)}, {tensor_operand(t.view(p.flat_shape))},
           {p.pos});
  });
  return out;
}

Tensor& index_put_impl_(Tensor& self, const c10::List<std::optional<Tensor>>& indices, const Tensor& values,
                        bool accumulate, bool /*unsafe*/) {
  common_device("index_put_", {&self, &values});
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes "
              "match, got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  if (all_undefined(indices)) {
    if (accumulate) self.add_(values);
    else copy_on_device(self, values);
    return self;
  }
  IndexPlan p = make_index_plan(self, indices);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), p.full_shape), "shape mismatch: value tensor of shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ", at::IntArrayRef(p.full_shape));
  if (p.count == 0 || self.numel() == 0) return self;
  Tensor v = values.is_cpu() ? values.to(self.device()) : values;
  v = v.expand(p.full_shape).reshape(p.flat_shape);
  Tensor target = p.self;  // a view of self
  launch(Op::IndexPut, {tensor_operand(target), tensor_operand(p.indices), tensor_operand(v)},
         {tensor_operand(target)}, {p.pos, accumulate ? 1 : 0});
  return self;
}

Tensor& nv_masked_select_out(const Tensor& self, const Tensor& mask, Tensor& out) {
  common_device("masked_select", {&self, &mask});
  check_out_device(out, self.device(), "masked_select");
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_select: expected BoolTensor for mask");
  const auto shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  Tensor s = self.expand(shape), m = mask.expand(shape);
  if (s.dim() == 0) {
    s = s.view({1});
    m = m.view({1});
  }
  c10::List<std::optional<Tensor>> l;
  l.push_back(m);
  return nv_index_out(s, l, out);
}
Tensor nv_masked_select(const Tensor& self, const Tensor& mask) {
  Tensor out = empty_device({0}, self.scalar_type(), self.device());
  return nv_masked_select_out(self, mask, out);
}

// ------------------------------------------------------------ sort / topk

// stable=false reproduces the CPU's at::sort tie order (not a stable one), see sort_entry.
void sort_into(const Tensor& self, int64_t dim, bool descending, const Tensor& values, const Tensor& indices,
               bool stable = true) {
  if (values.numel() == 0) return;
  Tensor in = self.dim() == 0 ? self.view({1}) : self;
  Tensor v = self.dim() == 0 ? values.view({1}) : values;
  Tensor i = self.dim() == 0 ? indices.view({1}) : indices;
  launch(Op::Sort, {tensor_operand(in)}, {tensor_operand(v), tensor_operand(i)},
         {dim, descending ? 1 : 0, stable ? 1 : 0});
}

std::tuple<Tensor&, Tensor&> nv_sort_stable_out(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending,
                                             Tensor& values, Tensor& indices) {
  check_out_device(values, self.device(), "sort");
  check_out_device(indices, self.device(), "sort");
  TORCH_CHECK(!self.is_complex(), "sort(): input tensor must be of non-complex type");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == c10::kLong, "Expected out tensor to have dtype long int, but got ",
              indices.scalar_type(), " instead");
  dim = c10::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  sort_into(self, dim, descending, values, indices, stable.value_or(false));
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> nv_topk_out(const Tensor& self, c10::SymInt k_s, int64_t dim, bool largest, bool,
                                      Tensor& values, Tensor& indices) {
  check_out_device(values, self.device(), "topk");
  check_out_device(indices, self.device(), "topk");
  const int64_t k = k_s.expect_int();
  dim = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t size = self.dim() > 0 ? self.size(dim) : 1;
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", values.scalar_type(), " instead");
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[dim] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  sort_into(self, dim, largest, values, indices);
  return {values, indices};
}

// ------------------------------------------------------------ flip, roll

// flip: one Index launch per flipped dim with reversed positions.
Tensor nv_flip(const Tensor& self, at::IntArrayRef dims) {
  uint64_t seen = 0;
  std::vector<int64_t> ds;
  for (int64_t d : dims) {
    const int64_t w = c10::maybe_wrap_dim(d, self.dim());
    TORCH_CHECK(!(seen & (uint64_t(1) << w)), "dims has duplicates, original flip dims size=", dims.size(),
                ", but unique flip dims size=", __builtin_popcountll(seen));
    seen |= uint64_t(1) << w;
    if (self.size(w) > 1) ds.push_back(w);
  }
  if (self.numel() == 0 || ds.empty()) return self.clone();
  Tensor cur = self;
  for (int64_t w : ds) {
    const int64_t n = self.size(w);
    Tensor idx = empty_device({1, n}, c10::kLong, self.device());
    launch(Op::Arange, {int_operand(n - 1), int_operand(-1)}, {tensor_operand(idx.view({n}))});
    // The CPU's flip keeps the input's layout (empty_like, preserve format).
    Tensor out = empty_elementwise(self.sizes(), self.scalar_type(), self.device(), {&self});
    launch(Op::Index, {tensor_operand(cur), tensor_operand(idx)}, {tensor_operand(out)}, {w});
    cur = out;
  }
  return cur;
}

Tensor nv_roll(const Tensor& self, c10::SymIntArrayRef shifts_s, at::IntArrayRef dims) {
  const at::IntArrayRef shifts = C10_AS_INTARRAYREF_SLOW(shifts_s);
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
    return nv_roll(self.reshape({-1}), shifts_s, at::IntArrayRef{0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  Tensor cur = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = c10::maybe_wrap_dim(dims[i], self.dim());
    Tensor out = empty_like_dev(self, self.scalar_type());
    const int64_t n = self.size(d);
    if (out.numel() == 0) return out;
    int64_t s = n == 0 ? 0 : shifts[i] % n;
    if (s < 0) s += n;
    if (s == 0) {
      copy_on_device(out, cur);
    } else {
      copy_on_device(out.narrow(d, s, n - s), cur.narrow(d, 0, n - s));
      copy_on_device(out.narrow(d, 0, s), cur.narrow(d, n - s, s));
    }
    cur = out;
  }
  return cur.is_same(self) ? self.clone() : cur;
}

// ------------------------------------------------------------ var / std, vector norm

struct VarResult {
  Tensor var, mean;
};
VarResult var_mean_impl(const Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                        bool keepdim) {
  const auto dt = self.scalar_type();
  const c10::ScalarType acc = is_reduced_float(dt) ? c10::kFloat : dt;
  Tensor x = to_dtype_on_device(self, acc);
  const RPlan plan = rplan(self, dims, keepdim);
  int64_t n = 1;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (plan.mask & (int64_t(1) << i)) n *= self.size(i);
  const double c = correction.has_value() ? correction->toDouble() : 1.0;
  Tensor mean = empty_device(plan.keep, acc, self.device());
  Tensor sq = empty_device(plan.keep, acc, self.device());
  if (self.numel() == 0) {
    fill_scalar_device(mean, std::numeric_limits<double>::quiet_NaN());
    fill_scalar_device(sq, std::numeric_limits<double>::quiet_NaN());
  } else {
    launch(Op::Mean, {tensor_operand(x)}, {tensor_operand(mean)}, {plan.mask});
    Tensor d = empty_device(self.sizes(), acc, self.device());
    launch(Op::Sub, {tensor_operand(x), tensor_operand(mean.expand(self.sizes())), float_operand(1.0)},
           {tensor_operand(d)});
    launch(Op::Mul, {tensor_operand(d), tensor_operand(d)}, {tensor_operand(d)});
    launch(Op::Sum, {tensor_operand(d)}, {tensor_operand(sq)}, {plan.mask});
    launch(Op::Div, {tensor_operand(sq), float_operand(std::max(0.0, static_cast<double>(n) - c))},
           {tensor_operand(sq)});
  }
  return {sq.view(plan.out), mean.view(plan.out)};
}

template <bool kStd>
Tensor& var_out(const Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                bool keepdim, Tensor& out) {
  const char* name = kStd ? "std" : "var";
  check_out_device(out, self.device(), name);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || self.is_complex(), name,
              " only supports floating-point and complex dtypes. Got: ", self.scalar_type());
  if (self.is_complex()) {
    route_to_cpu("aten::var", "correction_out", self, dims, correction, keepdim, out);
    return out;
  }
  VarResult r = var_mean_impl(self, dims, correction, keepdim);
  Tensor v = r.var;
  if (kStd) launch(Op::Sqrt, {tensor_operand(v)}, {tensor_operand(v)});
  at::native::resize_output(out, v.sizes());
  copy_on_device(out, v);
  return out;
}
template <bool kStd>
Tensor var_fn(const Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
              bool keepdim) {
  Tensor out = empty_device({0}, self.scalar_type(), self.device());
  return var_out<kStd>(self, dims, correction, keepdim, out);
}
template <bool kStd>
std::tuple<Tensor, Tensor> var_mean_fn(const Tensor& self, at::OptionalIntArrayRef dims,
                                       const std::optional<at::Scalar>& correction, bool keepdim) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), kStd ? "std_mean" : "var_mean",
              " only supports floating-point dtypes");
  VarResult r = var_mean_impl(self, dims, correction, keepdim);
  if (kStd) launch(Op::Sqrt, {tensor_operand(r.var)}, {tensor_operand(r.var)});
  return {to_dtype_on_device(r.var, self.scalar_type()), to_dtype_on_device(r.mean, self.scalar_type())};
}

Tensor& vector_norm_out(const Tensor& self, const at::Scalar& ord_s, at::OptionalIntArrayRef dims, bool keepdim,
                        std::optional<c10::ScalarType> dtype, Tensor& out) {
  check_out_device(out, self.device(), "linalg.vector_norm");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || self.is_complex(),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  if (self.is_complex()) {
    route_to_cpu("aten::linalg_vector_norm", "out", self, ord_s, dims, keepdim, dtype, out);
    return out;
  }
  const double ord = ord_s.toDouble();
  const auto rdt = dtype.has_value() ? *dtype : self.scalar_type();
  const c10::ScalarType acc = is_reduced_float(rdt) ? c10::kFloat : rdt;
  const RPlan plan = rplan(self, dims, keepdim);
  if (self.numel() == 0) {
    TORCH_CHECK(ord >= 0, "linalg.vector_norm cannot compute the ", ord, " norm on an empty tensor "
                "because the operation does not have an identity");
    TORCH_CHECK(!std::isinf(ord), "linalg.vector_norm cannot compute the ", ord, " norm on an empty tensor "
                "because the operation does not have an identity");
    at::native::resize_output(out, plan.out);
    fill_scalar_device(out, 0);
    return out;
  }
  Tensor x = to_dtype_on_device(self, acc);
  Tensor a = empty_device(self.sizes(), acc, self.device());
  Tensor r = empty_device(plan.keep, acc, self.device());
  if (ord == 2) {
    launch(Op::Mul, {tensor_operand(x), tensor_operand(x)}, {tensor_operand(a)});
    launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    launch(Op::Sqrt, {tensor_operand(r)}, {tensor_operand(r)});
  } else {
    launch(Op::Abs, {tensor_operand(x)}, {tensor_operand(a)});
    if (std::isinf(ord)) {
      launch(ord > 0 ? Op::Amax : Op::Amin, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    } else if (ord == 0) {
      Tensor b = empty_device(self.sizes(), c10::kBool, self.device());
      launch(Op::Ne, {tensor_operand(x), float_operand(0)}, {tensor_operand(b)});
      copy_on_device(a, b);
      launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    } else if (ord == 1) {
      launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
    } else {
      launch(Op::Pow, {tensor_operand(a), float_operand(ord)}, {tensor_operand(a)});
      launch(Op::Sum, {tensor_operand(a)}, {tensor_operand(r)}, {plan.mask});
      launch(Op::Pow, {tensor_operand(r), float_operand(1.0 / ord)}, {tensor_operand(r)});
    }
  }
  at::native::resize_output(out, plan.out);
  copy_on_device(out, r.view(plan.out));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  // selection, masks, reductions, scans
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
  m.impl("where.self_out", where_out);
  m.impl("isnan", isx<0>);
  m.impl("isposinf.out", isx_out<1>);
  m.impl("isneginf.out", isx_out<-1>);
  m.impl("all.all_out", allany_all_out<true>);
  m.impl("all.out", allany_dim_out<true>);
  m.impl("all.dims_out", allany_dims_out<true>);
  m.impl("any.all_out", allany_all_out<false>);
  m.impl("any.out", allany_dim_out<false>);
  m.impl("any.dims_out", allany_dims_out<false>);
  m.impl("argmax.out", argmax_out<true>);
  m.impl("argmin.out", argmax_out<false>);
  m.impl("max.dim_max", max_dim_out<true>);
  m.impl("min.dim_min", max_dim_out<false>);
  m.impl("max", max_all<true>);
  m.impl("min", max_all<false>);
  m.impl("max.unary_out", max_all_out<true>);
  m.impl("min.unary_out", max_all_out<false>);
  m.impl("tril.out", tri_out<Op::Tril>);
  m.impl("triu.out", tri_out<Op::Triu>);
  m.impl("tril", tri<Op::Tril>);
  m.impl("triu", tri<Op::Triu>);
  m.impl("tril_", tri_<Op::Tril>);
  m.impl("triu_", tri_<Op::Triu>);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  m.impl("bitwise_and.Tensor_out", bitwise_out<Op::BitwiseAnd>);
  m.impl("bitwise_or.Tensor_out", bitwise_out<Op::BitwiseOr>);
  m.impl("bitwise_xor.Tensor_out", bitwise_out<Op::BitwiseXor>);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("prod.int_out", prod_dim_out);
  m.impl("prod", prod_all);
  m.impl("cumsum.out", scan_out<Op::Cumsum>);
  m.impl("cumprod.out", scan_out<Op::Cumprod>);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  // norms
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  // pow, floor_divide, isin
  m.impl("pow.Tensor_Scalar_out", pow_ts_out);
  m.impl("pow.Tensor_Tensor_out", pow_tt_out);
  m.impl("pow.Scalar_out", pow_st_out);
  m.impl("remainder.Tensor_out", binary_promote_out<Op::Remainder>);
  m.impl("remainder.Scalar_Tensor_out", remainder_scalar_tensor_out);
  m.impl("atan2.out", binary_promote_out<Op::Atan2>);
  m.impl("histc", nv_histc);
  m.impl("floor_divide", nv_floor_divide);
  m.impl("floor_divide.out", nv_floor_divide_out);
  m.impl("floor_divide_.Tensor", nv_floor_divide_);
  m.impl("isin.Tensor_Tensor_out", isin_tt_out);
  m.impl("isin.Tensor_Scalar_out", isin_ts_out);
  m.impl("isin.Scalar_Tensor_out", isin_st_out);
  // gather / scatter / indexing
  m.impl("gather.out", nv_gather_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("scatter_add.out", nv_scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("index_add.out", nv_index_add_out);
  m.impl("index_copy.out", nv_index_copy_out);
  m.impl("index.Tensor_out", nv_index_out);
  m.impl("_index_put_impl_", index_put_impl_);
  m.impl("nonzero", nv_nonzero);
  m.impl("nonzero.out", nv_nonzero_out);
  m.impl("masked_select", nv_masked_select);
  m.impl("masked_select.out", nv_masked_select_out);
  // ordering
  m.impl("sort.values_stable", nv_sort_stable_out);
  m.impl("topk.values", nv_topk_out);
  m.impl("flip", nv_flip);
  m.impl("roll", nv_roll);
  // statistics
  m.impl("var.correction", var_fn<false>);
  m.impl("var.correction_out", var_out<false>);
  m.impl("std.correction", var_fn<true>);
  m.impl("std.correction_out", var_out<true>);
  m.impl("var_mean.correction", var_mean_fn<false>);
  m.impl("std_mean.correction", var_mean_fn<true>);
  m.impl("linalg_vector_norm.out", vector_norm_out);
}

}  // namespace openneuron::bridge
