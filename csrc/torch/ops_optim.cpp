// Optimizer steps: the fused Adam/AdamW/SGD kernels (one program per call) and the
// _foreach_* list ops (one program per call, one instruction per tensor). List ops
// whose operands the fast path does not take (mixed dtypes or devices, integer lists,
// CPU tensors) run ATen's per-tensor "slow" kernels, whose per-tensor ops are
// themselves native (or fall back, counted, one by one). Lowering: lower_optim.cpp.
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_log_native.h>
#include <ATen/ops/_foreach_maximum_native.h>
#include <ATen/ops/_foreach_minimum_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_sigmoid_native.h>
#include <ATen/ops/_foreach_sign_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_tanh_native.h>
#include <ATen/ops/_foreach_zero_native.h>

#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;
using compiler::ValueId;

// ------------------------------------------------------------ fused optimizers

// The fused kernels want contiguous tensors; others run on contiguous copies
// that are written back.
struct Canon {
  at::Tensor t, orig;
  explicit Canon(const at::Tensor& x) : orig(x) {
    t = x.is_contiguous() && at::has_internal_overlap(x) != at::MemOverlap::Yes ? x
                                                                                : x.contiguous();
  }
  void write_back() const {
    if (!t.is_same(orig)) orig.copy_(t);
  }
};

void check_list_sizes(const char* name, size_t n,
                      std::initializer_list<std::pair<const char*, size_t>> lists) {
  for (const auto& [what, sz] : lists)
    TORCH_CHECK(sz == n, name, ": expected ", what, " to have ", n, " tensors, got ", sz);
}

std::optional<at::Tensor> one_elem_float(const std::optional<at::Tensor>& t, c10::Device device,
                                         const char* what) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  TORCH_CHECK(t->numel() == 1, what, " must have one element");
  at::Tensor x = t->to(device);
  if (x.scalar_type() != c10::kFloat) x = x.to(c10::kFloat);
  return x;
}

// The scalar inputs every fused step's program shares.
struct StepScalars {
  ValueId lr, grad_scale, found_inf;
};

// Checks the common arguments and adds the shared scalar inputs: lr as a float or a
// one-element tensor (CPU: its value), grad_scale and found_inf as one-element float32.
StepScalars step_scalars(const char* name, const c10::Device& device, ProgramBuilder& pb,
                         const std::optional<double>& lr, const std::optional<at::Tensor>& lr_t,
                         const std::optional<at::Tensor>& grad_scale,
                         const std::optional<at::Tensor>& found_inf) {
  TORCH_CHECK(device.is_privateuseone(), name, ": params must be on the neuron device");
  auto gs = one_elem_float(grad_scale, device, "grad_scale");
  auto fi = one_elem_float(found_inf, device, "found_inf");
  StepScalars v;
  if (lr_t.has_value()) {
    TORCH_CHECK(lr_t->numel() == 1, name, ": lr must have one element");
    if (lr_t->is_cpu())
      v.lr = pb.input(float_operand(lr_t->item<double>()));
    else
      v.lr = pb.input(lr_t->scalar_type() == c10::kFloat ? *lr_t : lr_t->to(c10::kFloat));
  } else {
    v.lr = pb.input(float_operand(*lr));
  }
  v.grad_scale = gs ? pb.input(*gs) : pb.none();
  v.found_inf = fi ? pb.input(*fi) : pb.none();
  return v;
}

void fused_adam_impl(bool adamw, at::TensorList params, at::TensorList grads,
                     at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                     at::TensorList max_exp_avg_sqs, at::TensorList steps,
                     const std::optional<double>& lr, const std::optional<at::Tensor>& lr_t,
                     double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                     bool maximize, const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  const char* name = adamw ? "_fused_adamw_" : "_fused_adam_";
  const size_t n = params.size();
  check_list_sizes(name, n,
                   {{"grads", grads.size()},
                    {"exp_avgs", exp_avgs.size()},
                    {"exp_avg_sqs", exp_avg_sqs.size()},
                    {"state_steps", steps.size()}});
  if (amsgrad)
    check_list_sizes(name, n, {{"max_exp_avg_sqs", max_exp_avg_sqs.size()}});
  else
    TORCH_CHECK(max_exp_avg_sqs.empty(), name, ": max_exp_avg_sqs must be empty without amsgrad");
  if (n == 0) return;
  const c10::Device device = params[0].device();
  ProgramBuilder pb;
  const StepScalars sv = step_scalars(name, device, pb, lr, lr_t, grad_scale, found_inf);
  const ValueId b1 = pb.input(float_operand(beta1)), b2 = pb.input(float_operand(beta2));
  const ValueId wd = pb.input(float_operand(weight_decay)), ep = pb.input(float_operand(eps));
  const int64_t flags = (amsgrad ? 1 : 0) | (maximize ? 2 : 0) | (adamw ? 4 : 0);
  std::vector<Canon> canon;
  canon.reserve(n * 5);
  std::vector<at::Tensor> step_dev;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params[i];
    common_device(name, {&p, &grads[i], &exp_avgs[i], &exp_avg_sqs[i]});
    TORCH_CHECK(is_half_or_float(p.scalar_type()), name, ": unsupported dtype ", p.scalar_type());
    for (const at::Tensor* t : {&grads[i], &exp_avgs[i], &exp_avg_sqs[i]})
      TORCH_CHECK(t->scalar_type() == p.scalar_type() && t->sizes() == p.sizes(), name,
                  ": state and grads must match the param's dtype and shape");
    if (p.numel() == 0) continue;
    const size_t base = canon.size();
    canon.emplace_back(p);
    canon.emplace_back(grads[i]);
    canon.emplace_back(exp_avgs[i]);
    canon.emplace_back(exp_avg_sqs[i]);
    if (amsgrad) canon.emplace_back(max_exp_avg_sqs[i]);
    at::Tensor step = steps[i];
    if (!step.device().is_privateuseone() || step.scalar_type() != c10::kFloat)
      step = step.to(device, c10::kFloat);
    step_dev.push_back(step);
    std::vector<ValueId> ins;
    for (int k = 0; k < 4; ++k) ins.push_back(pb.input(canon[base + k].t));
    ins.push_back(amsgrad ? pb.input(canon[base + 4].t) : pb.none());
    ins.push_back(pb.input(step));
    for (ValueId v : {sv.lr, b1, b2, wd, ep, sv.grad_scale, sv.found_inf}) ins.push_back(v);
    std::vector<ValueId> outs;
    for (int k = 0; k < (amsgrad ? 5 : 4); ++k) outs.push_back(pb.output(canon[base + k].t));
    pb.node(Op::FusedAdam, std::move(ins), std::move(outs), {flags});
  }
  pb.run();
  for (const Canon& c : canon) c.write_back();
}

// _fused_adam_ / _fused_adamw_, with lr as a double or a tensor.
template <bool kAdamW>
void fused_adam_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                 at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                 at::TensorList state_steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize,
                 const std::optional<at::Tensor>& grad_scale,
                 const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(kAdamW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
                  std::nullopt, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf);
}
template <bool kAdamW>
void fused_adam_tensor_lr_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                           at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                           at::TensorList state_steps, const at::Tensor& lr, double beta1,
                           double beta2, double weight_decay, double eps, bool amsgrad,
                           bool maximize, const std::optional<at::Tensor>& grad_scale,
                           const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(kAdamW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                  std::nullopt, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf);
}

void fused_sgd_impl(at::TensorList params, at::TensorList grads, at::TensorList bufs,
                    double weight_decay, double momentum, const std::optional<double>& lr,
                    const std::optional<at::Tensor>& lr_t, double dampening, bool nesterov,
                    bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                    const std::optional<at::Tensor>& found_inf) {
  const char* name = "_fused_sgd_";
  const size_t n = params.size();
  check_list_sizes(name, n, {{"grads", grads.size()}});
  const bool no_buf = momentum == 0.0;
  if (!no_buf) check_list_sizes(name, n, {{"momentum_buffer_list", bufs.size()}});
  if (n == 0) return;
  const c10::Device device = params[0].device();
  ProgramBuilder pb;
  const StepScalars sv = step_scalars(name, device, pb, lr, lr_t, grad_scale, found_inf);
  const ValueId wd = pb.input(float_operand(weight_decay));
  const ValueId mo = pb.input(float_operand(momentum));
  const ValueId da = pb.input(float_operand(dampening));
  const int64_t flags = (nesterov ? 1 : 0) | (maximize ? 2 : 0) | (is_first_step ? 4 : 0);
  std::vector<Canon> canon;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params[i];
    common_device(name, {&p, &grads[i]});
    TORCH_CHECK(is_half_or_float(p.scalar_type()), name, ": unsupported dtype ", p.scalar_type());
    TORCH_CHECK(grads[i].scalar_type() == p.scalar_type() && grads[i].sizes() == p.sizes(), name,
                ": grads must match the param's dtype and shape");
    if (!no_buf)
      TORCH_CHECK(bufs[i].scalar_type() == p.scalar_type() && bufs[i].sizes() == p.sizes(), name,
                  ": momentum buffers must match the param's dtype and shape");
    if (p.numel() == 0) continue;
    const size_t base = canon.size();
    canon.emplace_back(p);
    canon.emplace_back(grads[i]);
    if (!no_buf) canon.emplace_back(bufs[i]);
    std::vector<ValueId> ins{pb.input(canon[base].t), pb.input(canon[base + 1].t),
                             no_buf ? pb.none() : pb.input(canon[base + 2].t)};
    for (ValueId v : {sv.lr, wd, mo, da, sv.grad_scale, sv.found_inf}) ins.push_back(v);
    std::vector<ValueId> outs{pb.output(canon[base].t), pb.output(canon[base + 1].t)};
    if (!no_buf) outs.push_back(pb.output(canon[base + 2].t));
    pb.node(Op::FusedSgd, std::move(ins), std::move(outs), {flags});
  }
  pb.run();
  for (const Canon& c : canon) c.write_back();
}

void fused_sgd_(at::TensorList self, at::TensorList grads, at::TensorList bufs, double weight_decay,
                double momentum, double lr, double dampening, bool nesterov, bool maximize,
                bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  fused_sgd_impl(self, grads, bufs, weight_decay, momentum, lr, std::nullopt, dampening, nesterov,
                 maximize, is_first_step, grad_scale, found_inf);
}
void fused_sgd_tensor_lr_(at::TensorList self, at::TensorList grads, at::TensorList bufs,
                          double weight_decay, double momentum, const at::Tensor& lr,
                          double dampening, bool nesterov, bool maximize, bool is_first_step,
                          const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf) {
  fused_sgd_impl(self, grads, bufs, weight_decay, momentum, std::nullopt, lr, dampening, nesterov,
                 maximize, is_first_step, grad_scale, found_inf);
}

// ------------------------------------------------------------ _foreach_*

// The fast path: every tensor on one neuron device, of one half/float dtype,
// lists of equal length with matching shapes, outputs without self-overlap.
bool foreach_fast(std::initializer_list<at::TensorList> lists, bool inplace) {
  const at::TensorList& self = *lists.begin();
  if (self.empty()) return false;
  const at::Tensor& t0 = self[0];
  if (!t0.defined() || !t0.is_privateuseone() || !is_half_or_float(t0.scalar_type())) return false;
  const c10::Device dev = t0.device();
  const auto dtype = t0.scalar_type();
  for (const at::TensorList& l : lists) {
    if (l.size() != self.size()) return false;
    for (size_t i = 0; i < l.size(); ++i) {
      const at::Tensor& t = l[i];
      if (!t.defined() || t.device() != dev || t.scalar_type() != dtype ||
          t.sizes() != self[i].sizes() || t.dim() > kMaxDims)
        return false;
    }
  }
  if (inplace)
    for (const at::Tensor& t : self)
      if (at::has_internal_overlap(t) == at::MemOverlap::Yes) return false;
  return true;
}

std::vector<at::Tensor> empty_like_list(at::TensorList self) {
  std::vector<at::Tensor> out;
  out.reserve(self.size());
  for (const at::Tensor& t : self) {
    out.push_back(empty_elementwise(t.sizes(), t.scalar_type(), t.device(), {&t}));
  }
  return out;
}

// One operand per node: a list element, or a scalar id shared by all nodes.
struct Arg {
  at::TensorList list;             // per-index tensor
  std::vector<ValueId> per_index;  // per-index scalar ids
  ValueId shared = -1;
};

// out[i] = op(args[*][i]...) with `coefs` appended as extra inputs.
void foreach_run(Op op, at::TensorList outs, std::vector<Arg> args, std::vector<int64_t> attrs,
                 ProgramBuilder& pb) {
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].numel() == 0) continue;
    std::vector<ValueId> ins;
    for (Arg& a : args) {
      if (!a.list.empty())
        ins.push_back(pb.input(a.list[i]));
      else if (!a.per_index.empty())
        ins.push_back(a.per_index[i]);
      else
        ins.push_back(a.shared);
    }
    pb.node(op, std::move(ins), {pb.output(outs[i])}, attrs);
  }
  pb.run();
}

Arg list_arg(at::TensorList l) { return Arg{l, {}, -1}; }
Arg shared_arg(ValueId v) { return Arg{{}, {}, v}; }
Arg scalars_arg(ProgramBuilder& pb, at::ArrayRef<at::Scalar> s) {
  Arg a;
  for (const at::Scalar& x : s) a.per_index.push_back(pb.input(float_operand(real_scalar(x))));
  return a;
}

// ---- binary: List / Scalar / ScalarList / Tensor, with alpha for add/sub.

template <Op kOp>
constexpr bool kHasAlpha = kOp == Op::Add || kOp == Op::Sub;

template <Op kOp>
void bin_list_into(at::TensorList outs, at::TensorList self, at::TensorList other,
                   const at::Scalar& alpha) {
  ProgramBuilder pb;
  std::vector<Arg> args{list_arg(self), list_arg(other)};
  if (kHasAlpha<kOp>) args.push_back(shared_arg(pb.input(float_operand(real_scalar(alpha)))));
  foreach_run(kOp, outs, std::move(args), {}, pb);
}
template <Op kOp>
void bin_scalar_into(at::TensorList outs, at::TensorList self, const at::Scalar& s) {
  ProgramBuilder pb;
  std::vector<Arg> args{list_arg(self), shared_arg(pb.input(float_operand(real_scalar(s))))};
  if (kHasAlpha<kOp>) args.push_back(shared_arg(pb.input(float_operand(1.0))));
  foreach_run(kOp, outs, std::move(args), {}, pb);
}
template <Op kOp>
void bin_scalarlist_into(at::TensorList outs, at::TensorList self, at::ArrayRef<at::Scalar> s) {
  ProgramBuilder pb;
  std::vector<Arg> args{list_arg(self), scalars_arg(pb, s)};
  if (kHasAlpha<kOp>) args.push_back(shared_arg(pb.input(float_operand(1.0))));
  foreach_run(kOp, outs, std::move(args), {}, pb);
}
// `other` is a 0-dim tensor (device or CPU): expanded per element.
template <Op kOp>
void bin_tensor_into(at::TensorList outs, at::TensorList self, const at::Tensor& other,
                     const at::Scalar& alpha) {
  ProgramBuilder pb;
  std::vector<at::Tensor> expanded;
  Arg b;
  if (other.is_cpu()) {
    b = shared_arg(pb.input(float_operand(other.item<double>())));
  } else {
    const at::Tensor o =
        other.scalar_type() == self[0].scalar_type() ? other : other.to(self[0].scalar_type());
    for (const at::Tensor& t : self) expanded.push_back(o.expand(t.sizes()));
    b = list_arg(expanded);
  }
  std::vector<Arg> args{list_arg(self), b};
  if (kHasAlpha<kOp>) args.push_back(shared_arg(pb.input(float_operand(real_scalar(alpha)))));
  foreach_run(kOp, outs, std::move(args), {}, pb);
}

bool scalars_ok(at::ArrayRef<at::Scalar> s, size_t n) {
  if (s.size() != n) return false;
  for (const at::Scalar& x : s)
    if (x.isComplex()) return false;
  return true;
}
bool scalar_ok(const at::Scalar& s) { return !s.isComplex(); }
bool tensor_scalar_ok(const at::Tensor& other, at::TensorList self) {
  if (!other.defined() || other.dim() != 0 || other.is_complex()) return false;
  if (other.is_cpu()) return true;
  return !self.empty() && other.device() == self[0].device();
}

#define FOREACH_BINARY_LIST(NAME, OP, SLOW)                                        \
  std::vector<at::Tensor> NAME##_list(at::TensorList self, at::TensorList other) { \
    if (!foreach_fast({self, other}, false))                                       \
      return at::native::SLOW##_list_kernel_slow(self, other);                     \
    auto out = empty_like_list(self);                                              \
    bin_list_into<Op::OP>(out, self, other, 1);                                    \
    return out;                                                                    \
  }                                                                                \
  void NAME##_list_(at::TensorList self, at::TensorList other) {                   \
    if (!foreach_fast({self, other}, true))                                        \
      return at::native::SLOW##_list_kernel_slow_(self, other);                    \
    bin_list_into<Op::OP>(self, self, other, 1);                                   \
  }
#define FOREACH_BINARY_LIST_ALPHA(NAME, OP, SLOW)                                         \
  std::vector<at::Tensor> NAME##_list(at::TensorList self, at::TensorList other,          \
                                      const at::Scalar& alpha) {                          \
    if (!foreach_fast({self, other}, false) || !scalar_ok(alpha))                         \
      return at::native::SLOW##_list_kernel_slow(self, other, alpha);                     \
    auto out = empty_like_list(self);                                                     \
    bin_list_into<Op::OP>(out, self, other, alpha);                                       \
    return out;                                                                           \
  }                                                                                       \
  void NAME##_list_(at::TensorList self, at::TensorList other, const at::Scalar& alpha) { \
    if (!foreach_fast({self, other}, true) || !scalar_ok(alpha))                          \
      return at::native::SLOW##_list_kernel_slow_(self, other, alpha);                    \
    bin_list_into<Op::OP>(self, self, other, alpha);                                      \
  }
#define FOREACH_BINARY_SCALARS(NAME, OP, SLOW)                                                 \
  std::vector<at::Tensor> NAME##_scalar(at::TensorList self, const at::Scalar& s) {            \
    if (!foreach_fast({self}, false) || !scalar_ok(s))                                         \
      return at::native::SLOW##_scalar_kernel_slow(self, s);                                   \
    auto out = empty_like_list(self);                                                          \
    bin_scalar_into<Op::OP>(out, self, s);                                                     \
    return out;                                                                                \
  }                                                                                            \
  void NAME##_scalar_(at::TensorList self, const at::Scalar& s) {                              \
    if (!foreach_fast({self}, true) || !scalar_ok(s))                                          \
      return at::native::SLOW##_scalar_kernel_slow_(self, s);                                  \
    bin_scalar_into<Op::OP>(self, self, s);                                                    \
  }                                                                                            \
  std::vector<at::Tensor> NAME##_scalarlist(at::TensorList self, at::ArrayRef<at::Scalar> s) { \
    if (!foreach_fast({self}, false) || !scalars_ok(s, self.size()))                           \
      return at::native::SLOW##_scalarlist_kernel_slow(self, s);                               \
    auto out = empty_like_list(self);                                                          \
    bin_scalarlist_into<Op::OP>(out, self, s);                                                 \
    return out;                                                                                \
  }                                                                                            \
  void NAME##_scalarlist_(at::TensorList self, at::ArrayRef<at::Scalar> s) {                   \
    if (!foreach_fast({self}, true) || !scalars_ok(s, self.size()))                            \
      return at::native::SLOW##_scalarlist_kernel_slow_(self, s);                              \
    bin_scalarlist_into<Op::OP>(self, self, s);                                                \
  }

FOREACH_BINARY_LIST_ALPHA(foreach_add, Add, foreach_tensor_add)
FOREACH_BINARY_LIST_ALPHA(foreach_sub, Sub, foreach_tensor_sub)
FOREACH_BINARY_LIST(foreach_mul, Mul, foreach_tensor_mul)
FOREACH_BINARY_LIST(foreach_div, Div, foreach_tensor_div)
FOREACH_BINARY_LIST(foreach_maximum, Maximum, foreach_tensor_clamp_min)
FOREACH_BINARY_LIST(foreach_minimum, Minimum, foreach_tensor_clamp_max)
FOREACH_BINARY_SCALARS(foreach_add, Add, foreach_tensor_add)
FOREACH_BINARY_SCALARS(foreach_sub, Sub, foreach_tensor_sub)
FOREACH_BINARY_SCALARS(foreach_mul, Mul, foreach_tensor_mul)
FOREACH_BINARY_SCALARS(foreach_div, Div, foreach_tensor_div)
FOREACH_BINARY_SCALARS(foreach_maximum, Maximum, foreach_tensor_clamp_min)
FOREACH_BINARY_SCALARS(foreach_minimum, Minimum, foreach_tensor_clamp_max)

std::vector<at::Tensor> foreach_mul_tensor(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, false) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_mul_tensor_kernel_slow(self, other);
  auto out = empty_like_list(self);
  bin_tensor_into<Op::Mul>(out, self, other, 1);
  return out;
}
void foreach_mul_tensor_(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, true) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_mul_tensor_kernel_slow_(self, other);
  bin_tensor_into<Op::Mul>(self, self, other, 1);
}
std::vector<at::Tensor> foreach_div_tensor(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, false) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_div_tensor_kernel_slow(self, other);
  auto out = empty_like_list(self);
  bin_tensor_into<Op::Div>(out, self, other, 1);
  return out;
}
void foreach_div_tensor_(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, true) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_div_tensor_kernel_slow_(self, other);
  bin_tensor_into<Op::Div>(self, self, other, 1);
}
std::vector<at::Tensor> foreach_add_tensor(at::TensorList self, const at::Tensor& other,
                                           const at::Scalar& alpha) {
  if (!foreach_fast({self}, false) || !tensor_scalar_ok(other, self) || !scalar_ok(alpha))
    return at::native::foreach_tensor_add_tensor_kernel_slow(self, other, alpha);
  auto out = empty_like_list(self);
  bin_tensor_into<Op::Add>(out, self, other, alpha);
  return out;
}
void foreach_add_tensor_(at::TensorList self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!foreach_fast({self}, true) || !tensor_scalar_ok(other, self) || !scalar_ok(alpha))
    return at::native::foreach_tensor_add_tensor_kernel_slow_(self, other, alpha);
  bin_tensor_into<Op::Add>(self, self, other, alpha);
}

// ---- unary

#define FOREACH_UNARY(NAME, OP)                                                              \
  std::vector<at::Tensor> foreach_##NAME(at::TensorList self) {                              \
    if (!foreach_fast({self}, false)) return at::native::foreach_tensor_##NAME##_slow(self); \
    auto out = empty_like_list(self);                                                        \
    ProgramBuilder pb;                                                                       \
    foreach_run(Op::OP, out, {list_arg(self)}, {}, pb);                                      \
    return out;                                                                              \
  }                                                                                          \
  void foreach_##NAME##_(at::TensorList self) {                                              \
    if (!foreach_fast({self}, true)) return at::native::foreach_tensor_##NAME##_slow_(self); \
    ProgramBuilder pb;                                                                       \
    foreach_run(Op::OP, self, {list_arg(self)}, {}, pb);                                     \
  }

FOREACH_UNARY(sqrt, Sqrt)
FOREACH_UNARY(neg, Neg)
FOREACH_UNARY(abs, Abs)
FOREACH_UNARY(exp, Exp)
FOREACH_UNARY(log, Log)
FOREACH_UNARY(reciprocal, Reciprocal)
FOREACH_UNARY(sigmoid, Sigmoid)
FOREACH_UNARY(tanh, Tanh)
FOREACH_UNARY(sign, Sign)

void foreach_zero_(at::TensorList self) {
  if (!foreach_fast({self}, true)) return at::native::foreach_tensor_zero_slow_(self);
  ProgramBuilder pb;
  const ValueId zero = pb.input(float_operand(0.0));
  foreach_run(Op::Fill, self, {shared_arg(zero)}, {}, pb);
}

void foreach_copy_(at::TensorList self, at::TensorList src, bool non_blocking) {
  // Any float dtypes on one device: Copy converts.
  bool fast = !self.empty() && self.size() == src.size();
  for (size_t i = 0; fast && i < self.size(); ++i) {
    fast = self[i].is_privateuseone() && src[i].device() == self[i].device() &&
           self[i].device() == self[0].device() && self[i].dim() <= kMaxDims &&
           !self[i].is_complex() && !src[i].is_complex() &&
           at::has_internal_overlap(self[i]) != at::MemOverlap::Yes &&
           at::is_expandable_to(src[i].sizes(), self[i].sizes());
  }
  if (!fast) return at::native::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  std::vector<at::Tensor> expanded;
  for (size_t i = 0; i < self.size(); ++i) expanded.push_back(src[i].expand(self[i].sizes()));
  ProgramBuilder pb;
  foreach_run(Op::Copy, self, {list_arg(expanded)}, {}, pb);
}

// ---- ternary: addcmul / addcdiv (Scalar, ScalarList, Tensor), lerp (List, Scalar, ScalarList)

std::vector<at::Scalar> scalars_from_tensor(const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 1, "Expected packed scalar Tensor to be of dimension 1. Got ", t.dim(),
              " instead.");
  at::Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
  std::vector<at::Scalar> out;
  for (int64_t i = 0; i < c.numel(); ++i) out.emplace_back(c.data_ptr<double>()[i]);
  return out;
}

template <Op kOp>
void addc_into(at::TensorList outs, at::TensorList self, at::TensorList t1, at::TensorList t2,
               const std::optional<at::Scalar>& s, at::ArrayRef<at::Scalar> sl) {
  ProgramBuilder pb;
  Arg v =
      s.has_value() ? shared_arg(pb.input(float_operand(real_scalar(*s)))) : scalars_arg(pb, sl);
  foreach_run(kOp, outs, {list_arg(self), list_arg(t1), list_arg(t2), v}, {}, pb);
}

#define FOREACH_ADDC(NAME, OP)                                                                   \
  std::vector<at::Tensor> foreach_##NAME##_scalar(at::TensorList self, at::TensorList t1,        \
                                                  at::TensorList t2, const at::Scalar& v) {      \
    if (!foreach_fast({self, t1, t2}, false) || !scalar_ok(v))                                   \
      return at::native::foreach_tensor_##NAME##_scalar_slow(self, t1, t2, v);                   \
    auto out = empty_like_list(self);                                                            \
    addc_into<Op::OP>(out, self, t1, t2, v, {});                                                 \
    return out;                                                                                  \
  }                                                                                              \
  void foreach_##NAME##_scalar_(at::TensorList self, at::TensorList t1, at::TensorList t2,       \
                                const at::Scalar& v) {                                           \
    if (!foreach_fast({self, t1, t2}, true) || !scalar_ok(v))                                    \
      return at::native::foreach_tensor_##NAME##_scalar_slow_(self, t1, t2, v);                  \
    addc_into<Op::OP>(self, self, t1, t2, v, {});                                                \
  }                                                                                              \
  std::vector<at::Tensor> foreach_##NAME##_scalarlist(                                           \
      at::TensorList self, at::TensorList t1, at::TensorList t2, at::ArrayRef<at::Scalar> v) {   \
    if (!foreach_fast({self, t1, t2}, false) || !scalars_ok(v, self.size()))                     \
      return at::native::foreach_tensor_##NAME##_scalarlist_slow(self, t1, t2, v);               \
    auto out = empty_like_list(self);                                                            \
    addc_into<Op::OP>(out, self, t1, t2, std::nullopt, v);                                       \
    return out;                                                                                  \
  }                                                                                              \
  void foreach_##NAME##_scalarlist_(at::TensorList self, at::TensorList t1, at::TensorList t2,   \
                                    at::ArrayRef<at::Scalar> v) {                                \
    if (!foreach_fast({self, t1, t2}, true) || !scalars_ok(v, self.size()))                      \
      return at::native::foreach_tensor_##NAME##_scalarlist_slow_(self, t1, t2, v);              \
    addc_into<Op::OP>(self, self, t1, t2, std::nullopt, v);                                      \
  }                                                                                              \
  std::vector<at::Tensor> foreach_##NAME##_tensor(at::TensorList self, at::TensorList t1,        \
                                                  at::TensorList t2, const at::Tensor& v) {      \
    if (!foreach_fast({self, t1, t2}, false))                                                    \
      return at::native::foreach_tensor_##NAME##_tensor_slow(self, t1, t2, v);                   \
    auto s = scalars_from_tensor(v);                                                             \
    TORCH_CHECK(s.size() == self.size(), "Expected length of scalars to match input of length ", \
                self.size(), " but got ", s.size(), " instead.");                                \
    auto out = empty_like_list(self);                                                            \
    addc_into<Op::OP>(out, self, t1, t2, std::nullopt, s);                                       \
    return out;                                                                                  \
  }                                                                                              \
  void foreach_##NAME##_tensor_(at::TensorList self, at::TensorList t1, at::TensorList t2,       \
                                const at::Tensor& v) {                                           \
    if (!foreach_fast({self, t1, t2}, true))                                                     \
      return at::native::foreach_tensor_##NAME##_tensor_slow_(self, t1, t2, v);                  \
    auto s = scalars_from_tensor(v);                                                             \
    TORCH_CHECK(s.size() == self.size(), "Expected length of scalars to match input of length ", \
                self.size(), " but got ", s.size(), " instead.");                                \
    addc_into<Op::OP>(self, self, t1, t2, std::nullopt, s);                                      \
  }

FOREACH_ADDC(addcmul, Addcmul)
FOREACH_ADDC(addcdiv, Addcdiv)

std::vector<at::Tensor> foreach_lerp_list(at::TensorList self, at::TensorList end,
                                          at::TensorList w) {
  if (!foreach_fast({self, end, w}, false))
    return at::native::foreach_tensor_ternary_lerp_slow(self, end, w);
  auto out = empty_like_list(self);
  ProgramBuilder pb;
  foreach_run(Op::Lerp, out, {list_arg(self), list_arg(end), list_arg(w)}, {}, pb);
  return out;
}
void foreach_lerp_list_(at::TensorList self, at::TensorList end, at::TensorList w) {
  if (!foreach_fast({self, end, w}, true))
    return at::native::foreach_tensor_ternary_lerp_slow_(self, end, w);
  ProgramBuilder pb;
  foreach_run(Op::Lerp, self, {list_arg(self), list_arg(end), list_arg(w)}, {}, pb);
}
std::vector<at::Tensor> foreach_lerp_scalar(at::TensorList self, at::TensorList end,
                                            const at::Scalar& w) {
  if (!foreach_fast({self, end}, false) || !scalar_ok(w))
    return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, w);
  auto out = empty_like_list(self);
  ProgramBuilder pb;
  const ValueId wv = pb.input(float_operand(real_scalar(w)));
  foreach_run(Op::Lerp, out, {list_arg(self), list_arg(end), shared_arg(wv)}, {}, pb);
  return out;
}
void foreach_lerp_scalar_(at::TensorList self, at::TensorList end, const at::Scalar& w) {
  if (!foreach_fast({self, end}, true) || !scalar_ok(w))
    return at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, w);
  ProgramBuilder pb;
  const ValueId wv = pb.input(float_operand(real_scalar(w)));
  foreach_run(Op::Lerp, self, {list_arg(self), list_arg(end), shared_arg(wv)}, {}, pb);
}
std::vector<at::Tensor> foreach_lerp_scalarlist(at::TensorList self, at::TensorList end,
                                                at::ArrayRef<at::Scalar> w) {
  if (!foreach_fast({self, end}, false) || !scalars_ok(w, self.size()))
    return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, w);
  auto out = empty_like_list(self);
  ProgramBuilder pb;
  Arg wa = scalars_arg(pb, w);
  foreach_run(Op::Lerp, out, {list_arg(self), list_arg(end), wa}, {}, pb);
  return out;
}
void foreach_lerp_scalarlist_(at::TensorList self, at::TensorList end, at::ArrayRef<at::Scalar> w) {
  if (!foreach_fast({self, end}, true) || !scalars_ok(w, self.size()))
    return at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, w);
  ProgramBuilder pb;
  Arg wa = scalars_arg(pb, w);
  foreach_run(Op::Lerp, self, {list_arg(self), list_arg(end), wa}, {}, pb);
}

// ---- norm: one NormAll instruction per tensor.

std::vector<at::Tensor> foreach_norm(at::TensorList self, const at::Scalar& ord,
                                     std::optional<at::ScalarType> dtype) {
  const double p = ord.toDouble();
  bool fast = foreach_fast({self}, false) && !ord.isComplex();
  if (fast && dtype.has_value()) fast = is_half_or_float(*dtype) || *dtype == c10::kDouble;
  if (!fast) return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  if (p == -std::numeric_limits<double>::infinity()) {
    for (const at::Tensor& t : self)
      TORCH_CHECK(t.numel() > 0,
                  "linalg.vector_norm cannot compute the -inf norm on an empty "
                  "tensor because the operation does not have an identity");
  }
  const c10::ScalarType out_dtype =
      dtype.has_value() ? narrow_dtype(*dtype) : self[0].scalar_type();
  std::vector<at::Tensor> out;
  ProgramBuilder pb;
  const ValueId ov = pb.input(float_operand(p));
  for (const at::Tensor& t : self) {
    at::Tensor o = empty_device({}, out_dtype, t.device());
    out.push_back(o);
    pb.node(Op::NormAll, {pb.input(t), ov}, {pb.output(o)});
  }
  pb.run();
  return out;
}

}  // namespace

#define REG_BIN_ALL(name, fn)                               \
  m.impl("_foreach_" #name ".List", fn##_list);             \
  m.impl("_foreach_" #name "_.List", fn##_list_);           \
  m.impl("_foreach_" #name ".Scalar", fn##_scalar);         \
  m.impl("_foreach_" #name "_.Scalar", fn##_scalar_);       \
  m.impl("_foreach_" #name ".ScalarList", fn##_scalarlist); \
  m.impl("_foreach_" #name "_.ScalarList", fn##_scalarlist_);
#define REG_UNARY(name)                      \
  m.impl("_foreach_" #name, foreach_##name); \
  m.impl("_foreach_" #name "_", foreach_##name##_);
#define REG_ADDC(name)                                                    \
  m.impl("_foreach_" #name ".Scalar", foreach_##name##_scalar);           \
  m.impl("_foreach_" #name "_.Scalar", foreach_##name##_scalar_);         \
  m.impl("_foreach_" #name ".ScalarList", foreach_##name##_scalarlist);   \
  m.impl("_foreach_" #name "_.ScalarList", foreach_##name##_scalarlist_); \
  m.impl("_foreach_" #name ".Tensor", foreach_##name##_tensor);           \
  m.impl("_foreach_" #name "_.Tensor", foreach_##name##_tensor_);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("_fused_adam_", fused_adam_<false>);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr_<false>);
  m.impl("_fused_adamw_", fused_adam_<true>);
  m.impl("_fused_adamw_.tensor_lr", fused_adam_tensor_lr_<true>);
  m.impl("_fused_sgd_", fused_sgd_);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr_);

  REG_BIN_ALL(add, foreach_add)
  REG_BIN_ALL(sub, foreach_sub)
  REG_BIN_ALL(mul, foreach_mul)
  REG_BIN_ALL(div, foreach_div)
  REG_BIN_ALL(maximum, foreach_maximum)
  REG_BIN_ALL(minimum, foreach_minimum)
  REG_BIN_ALL(clamp_min, foreach_maximum)
  REG_BIN_ALL(clamp_max, foreach_minimum)
  m.impl("_foreach_mul.Tensor", foreach_mul_tensor);
  m.impl("_foreach_mul_.Tensor", foreach_mul_tensor_);
  m.impl("_foreach_div.Tensor", foreach_div_tensor);
  m.impl("_foreach_div_.Tensor", foreach_div_tensor_);
  m.impl("_foreach_add.Tensor", foreach_add_tensor);
  m.impl("_foreach_add_.Tensor", foreach_add_tensor_);
  REG_UNARY(sqrt)
  REG_UNARY(neg)
  REG_UNARY(abs)
  REG_UNARY(exp)
  REG_UNARY(log)
  REG_UNARY(reciprocal)
  REG_UNARY(sigmoid)
  REG_UNARY(tanh)
  REG_UNARY(sign)
  m.impl("_foreach_zero_", foreach_zero_);
  m.impl("_foreach_copy_", foreach_copy_);
  REG_ADDC(addcmul)
  REG_ADDC(addcdiv)
  m.impl("_foreach_lerp.List", foreach_lerp_list);
  m.impl("_foreach_lerp_.List", foreach_lerp_list_);
  m.impl("_foreach_lerp.Scalar", foreach_lerp_scalar);
  m.impl("_foreach_lerp_.Scalar", foreach_lerp_scalar_);
  m.impl("_foreach_lerp.ScalarList", foreach_lerp_scalarlist);
  m.impl("_foreach_lerp_.ScalarList", foreach_lerp_scalarlist_);
  m.impl("_foreach_norm.Scalar", foreach_norm);
}

}  // namespace openneuron::bridge
