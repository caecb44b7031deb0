// Native training and vision ops: fused optimizers and _foreach_* list ops
// (one program per call: one instruction per tensor), RNG ops on the device
// generator, losses, convolution, pooling and upsampling, matmul completeness.
//
// List ops whose operands the fast path does not take (mixed dtypes or
// devices, integer lists, CPU tensors) run ATen's per-tensor "slow" kernels,
// whose per-tensor ops are themselves native (or fall back, counted, one by one).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
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
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "bridge.h"
#include "engine.h"
#include "output_layout.h"
#include "native_ops.h"
#include "op_checks.h"
#include "openneuron/compiler/compiler.h"
#include "openneuron/kernels/kernels.h"

namespace openneuron::bridge {
namespace {

using compiler::Op;
using compiler::ValueId;

// ------------------------------------------------------------ helpers

bool is_half_or_float(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf;
}

// A program of several nodes over launch arguments, built per call and
// compiled once per signature (the program cache).
class ProgramBuilder {
 public:
  ValueId input(const Operand& o) {
    const ValueId v = g_.add_input(o.type);
    in_.push_back(o.arg);
    return v;
  }
  ValueId input(const at::Tensor& t) { return input(tensor_operand(t)); }
  ValueId none() { return input(none_operand()); }
  ValueId output(const at::Tensor& t) {
    const Operand o = tensor_operand(t);
    const ValueId v = g_.add_value(o.type);
    g_.mark_output(v);
    out_.push_back(o.arg);
    if (device_ < 0) device_ = o.device;
    return v;
  }
  void node(Op op, std::vector<ValueId> ins, std::vector<ValueId> outs,
            std::vector<int64_t> attrs = {}) {
    g_.add_node(op, std::move(ins), std::move(outs), std::move(attrs));
  }
  bool empty() const { return g_.nodes().empty(); }

  void run() {
    if (g_.nodes().empty()) return;
    std::shared_ptr<const compiler::Program> program;
    try {
      program = compiler::ProgramCache::global().get_or_compile(g_);
    } catch (const compiler::CompileError& e) {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron compiler: ", e.what());
    }
    std::vector<onrt_arg> args;
    args.reserve(in_.size() + out_.size() + 1);
    args.insert(args.end(), in_.begin(), in_.end());
    args.insert(args.end(), out_.begin(), out_.end());
    const c10::DeviceIndex device = device_ >= 0 ? device_ : current_device();
    at::Tensor scratch;
    if (program->scratch_bytes > 0) {
      scratch = empty_device({static_cast<int64_t>(program->scratch_bytes)}, c10::kByte,
                             c10::Device(c10::DeviceType::PrivateUse1, device));
      onrt_arg a;
      a.ptr = scratch.data_ptr();
      args.push_back(a);
    }
    ONRT_CHECK(onrt_program_launch(current_runtime_stream(device), program->handle, args.data(),
                                   static_cast<int32_t>(args.size())));
  }

 private:
  compiler::Graph g_;
  std::vector<onrt_arg> in_, out_;
  c10::DeviceIndex device_ = -1;
};

// ------------------------------------------------------------ fused optimizers

// The fused kernels want contiguous tensors; others run on contiguous copies
// that are written back.
struct Canon {
  at::Tensor t, orig;
  explicit Canon(const at::Tensor& x) : orig(x) {
    t = x.is_contiguous() && at::has_internal_overlap(x) != at::MemOverlap::Yes ? x : x.contiguous();
  }
  void write_back() const {
    if (!t.is_same(orig)) orig.copy_(t);
  }
};

void check_list_sizes(const char* name, size_t n, std::initializer_list<std::pair<const char*, size_t>> lists) {
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

void fused_adam_impl(bool adamw, at::TensorList params, at::TensorList grads,
                     at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                     at::TensorList max_exp_avg_sqs, at::TensorList steps,
                     const std::optional<double>& lr, const std::optional<at::Tensor>& lr_t,
                     double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                     bool maximize, const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  const char* name = adamw ? "_fused_adamw_" : "_fused_adam_";
  const size_t n = params.size();
  check_list_sizes(name, n, {{"grads", grads.size()}, {"exp_avgs", exp_avgs.size()},
                             {"exp_avg_sqs", exp_avg_sqs.size()}, {"state_steps", steps.size()}});
  if (amsgrad) check_list_sizes(name, n, {{"max_exp_avg_sqs", max_exp_avg_sqs.size()}});
  else TORCH_CHECK(max_exp_avg_sqs.empty(), name, ": max_exp_avg_sqs must be empty without amsgrad");
  if (n == 0) return;
  const c10::Device device = params[0].device();
  TORCH_CHECK(device.is_privateuseone(), name, ": params must be on the neuron device");
  auto gs = one_elem_float(grad_scale, device, "grad_scale");
  auto fi = one_elem_float(found_inf, device, "found_inf");
  ProgramBuilder pb;
  // Shared scalar inputs.
  ValueId lr_v;
  if (lr_t.has_value()) {
    TORCH_CHECK(lr_t->numel() == 1, name, ": lr must have one element");
    if (lr_t->is_cpu()) lr_v = pb.input(float_operand(lr_t->item<double>()));
    else lr_v = pb.input(lr_t->scalar_type() == c10::kFloat ? *lr_t : lr_t->to(c10::kFloat));
  } else {
    lr_v = pb.input(float_operand(*lr));
  }
  const ValueId b1 = pb.input(float_operand(beta1)), b2 = pb.input(float_operand(beta2));
  const ValueId wd = pb.input(float_operand(weight_decay)), ep = pb.input(float_operand(eps));
  const ValueId gs_v = gs ? pb.input(*gs) : pb.none();
  const ValueId fi_v = fi ? pb.input(*fi) : pb.none();
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
    for (ValueId v : {lr_v, b1, b2, wd, ep, gs_v, fi_v}) ins.push_back(v);
    std::vector<ValueId> outs;
    for (int k = 0; k < (amsgrad ? 5 : 4); ++k) outs.push_back(pb.output(canon[base + k].t));
    pb.node(Op::FusedAdam, std::move(ins), std::move(outs), {flags});
  }
  pb.run();
  for (const Canon& c : canon) c.write_back();
}

void fused_adam_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                 at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                 at::TensorList state_steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize,
                 const std::optional<at::Tensor>& grad_scale,
                 const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(false, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
                  std::nullopt, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf);
}
void fused_adam_tlr_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                     at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                     at::TensorList state_steps, const at::Tensor& lr, double beta1, double beta2,
                     double weight_decay, double eps, bool amsgrad, bool maximize,
                     const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(false, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                  std::nullopt, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf);
}
void fused_adamw_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                  at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                  at::TensorList state_steps, double lr, double beta1, double beta2,
                  double weight_decay, double eps, bool amsgrad, bool maximize,
                  const std::optional<at::Tensor>& grad_scale,
                  const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(true, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
                  std::nullopt, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
                  found_inf);
}
void fused_adamw_tlr_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                      at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                      at::TensorList state_steps, const at::Tensor& lr, double beta1,
                      double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                      const std::optional<at::Tensor>& grad_scale,
                      const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(true, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
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
  TORCH_CHECK(device.is_privateuseone(), name, ": params must be on the neuron device");
  auto gs = one_elem_float(grad_scale, device, "grad_scale");
  auto fi = one_elem_float(found_inf, device, "found_inf");
  ProgramBuilder pb;
  ValueId lr_v;
  if (lr_t.has_value()) {
    TORCH_CHECK(lr_t->numel() == 1, name, ": lr must have one element");
    if (lr_t->is_cpu()) lr_v = pb.input(float_operand(lr_t->item<double>()));
    else lr_v = pb.input(lr_t->scalar_type() == c10::kFloat ? *lr_t : lr_t->to(c10::kFloat));
  } else {
    lr_v = pb.input(float_operand(*lr));
  }
  const ValueId wd = pb.input(float_operand(weight_decay));
  const ValueId mo = pb.input(float_operand(momentum));
  const ValueId da = pb.input(float_operand(dampening));
  const ValueId gs_v = gs ? pb.input(*gs) : pb.none();
  const ValueId fi_v = fi ? pb.input(*fi) : pb.none();
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
    for (ValueId v : {lr_v, wd, mo, da, gs_v, fi_v}) ins.push_back(v);
    std::vector<ValueId> outs{pb.output(canon[base].t), pb.output(canon[base + 1].t)};
    if (!no_buf) outs.push_back(pb.output(canon[base + 2].t));
    pb.node(Op::FusedSgd, std::move(ins), std::move(outs), {flags});
  }
  pb.run();
  for (const Canon& c : canon) c.write_back();
}

void fused_sgd_(at::TensorList self, at::TensorList grads, at::TensorList bufs,
                double weight_decay, double momentum, double lr, double dampening, bool nesterov,
                bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  fused_sgd_impl(self, grads, bufs, weight_decay, momentum, lr, std::nullopt, dampening, nesterov,
                 maximize, is_first_step, grad_scale, found_inf);
}
void fused_sgd_tlr_(at::TensorList self, at::TensorList grads, at::TensorList bufs,
                    double weight_decay, double momentum, const at::Tensor& lr, double dampening,
                    bool nesterov, bool maximize, bool is_first_step,
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
  at::TensorList list;            // per-index tensor
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
      if (!a.list.empty()) ins.push_back(pb.input(a.list[i]));
      else if (!a.per_index.empty()) ins.push_back(a.per_index[i]);
      else ins.push_back(a.shared);
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
    const at::Tensor o = other.scalar_type() == self[0].scalar_type()
                             ? other
                             : other.to(self[0].scalar_type());
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

#define FOREACH_BINARY_LIST(NAME, OP, SLOW)                                                    \
  std::vector<at::Tensor> NAME##_list(at::TensorList self, at::TensorList other) {              \
    if (!foreach_fast({self, other}, false)) return at::native::SLOW##_list_kernel_slow(self, other); \
    auto out = empty_like_list(self);                                                          \
    bin_list_into<Op::OP>(out, self, other, 1);                                                \
    return out;                                                                                \
  }                                                                                            \
  void NAME##_list_(at::TensorList self, at::TensorList other) {                               \
    if (!foreach_fast({self, other}, true)) return at::native::SLOW##_list_kernel_slow_(self, other); \
    bin_list_into<Op::OP>(self, self, other, 1);                                               \
  }
#define FOREACH_BINARY_LIST_ALPHA(NAME, OP, SLOW)                                              \
  std::vector<at::Tensor> NAME##_list(at::TensorList self, at::TensorList other,               \
                                      const at::Scalar& alpha) {                               \
    if (!foreach_fast({self, other}, false) || !scalar_ok(alpha))                              \
      return at::native::SLOW##_list_kernel_slow(self, other, alpha);                          \
    auto out = empty_like_list(self);                                                          \
    bin_list_into<Op::OP>(out, self, other, alpha);                                            \
    return out;                                                                                \
  }                                                                                            \
  void NAME##_list_(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {      \
    if (!foreach_fast({self, other}, true) || !scalar_ok(alpha))                               \
      return at::native::SLOW##_list_kernel_slow_(self, other, alpha);                         \
    bin_list_into<Op::OP>(self, self, other, alpha);                                           \
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

FOREACH_BINARY_LIST_ALPHA(fe_add, Add, foreach_tensor_add)
FOREACH_BINARY_LIST_ALPHA(fe_sub, Sub, foreach_tensor_sub)
FOREACH_BINARY_LIST(fe_mul, Mul, foreach_tensor_mul)
FOREACH_BINARY_LIST(fe_div, Div, foreach_tensor_div)
FOREACH_BINARY_LIST(fe_maximum, Maximum, foreach_tensor_clamp_min)
FOREACH_BINARY_LIST(fe_minimum, Minimum, foreach_tensor_clamp_max)
FOREACH_BINARY_SCALARS(fe_add, Add, foreach_tensor_add)
FOREACH_BINARY_SCALARS(fe_sub, Sub, foreach_tensor_sub)
FOREACH_BINARY_SCALARS(fe_mul, Mul, foreach_tensor_mul)
FOREACH_BINARY_SCALARS(fe_div, Div, foreach_tensor_div)
FOREACH_BINARY_SCALARS(fe_maximum, Maximum, foreach_tensor_clamp_min)
FOREACH_BINARY_SCALARS(fe_minimum, Minimum, foreach_tensor_clamp_max)

std::vector<at::Tensor> fe_mul_tensor(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, false) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_mul_tensor_kernel_slow(self, other);
  auto out = empty_like_list(self);
  bin_tensor_into<Op::Mul>(out, self, other, 1);
  return out;
}
void fe_mul_tensor_(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, true) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_mul_tensor_kernel_slow_(self, other);
  bin_tensor_into<Op::Mul>(self, self, other, 1);
}
std::vector<at::Tensor> fe_div_tensor(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, false) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_div_tensor_kernel_slow(self, other);
  auto out = empty_like_list(self);
  bin_tensor_into<Op::Div>(out, self, other, 1);
  return out;
}
void fe_div_tensor_(at::TensorList self, const at::Tensor& other) {
  if (!foreach_fast({self}, true) || !tensor_scalar_ok(other, self))
    return at::native::foreach_tensor_div_tensor_kernel_slow_(self, other);
  bin_tensor_into<Op::Div>(self, self, other, 1);
}
std::vector<at::Tensor> fe_add_tensor(at::TensorList self, const at::Tensor& other,
                                      const at::Scalar& alpha) {
  if (!foreach_fast({self}, false) || !tensor_scalar_ok(other, self) || !scalar_ok(alpha))
    return at::native::foreach_tensor_add_tensor_kernel_slow(self, other, alpha);
  auto out = empty_like_list(self);
  bin_tensor_into<Op::Add>(out, self, other, alpha);
  return out;
}
void fe_add_tensor_(at::TensorList self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!foreach_fast({self}, true) || !tensor_scalar_ok(other, self) || !scalar_ok(alpha))
    return at::native::foreach_tensor_add_tensor_kernel_slow_(self, other, alpha);
  bin_tensor_into<Op::Add>(self, self, other, alpha);
}

// ---- unary

#define FOREACH_UNARY(NAME, OP)                                                     \
  std::vector<at::Tensor> fe_##NAME(at::TensorList self) {                          \
    if (!foreach_fast({self}, false)) return at::native::foreach_tensor_##NAME##_slow(self); \
    auto out = empty_like_list(self);                                               \
    ProgramBuilder pb;                                                              \
    foreach_run(Op::OP, out, {list_arg(self)}, {}, pb);                             \
    return out;                                                                     \
  }                                                                                 \
  void fe_##NAME##_(at::TensorList self) {                                          \
    if (!foreach_fast({self}, true)) return at::native::foreach_tensor_##NAME##_slow_(self); \
    ProgramBuilder pb;                                                              \
    foreach_run(Op::OP, self, {list_arg(self)}, {}, pb);                            \
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

void fe_zero_(at::TensorList self) {
  if (!foreach_fast({self}, true)) return at::native::foreach_tensor_zero_slow_(self);
  ProgramBuilder pb;
  const ValueId zero = pb.input(float_operand(0.0));
  foreach_run(Op::Fill, self, {shared_arg(zero)}, {}, pb);
}

void fe_copy_(at::TensorList self, at::TensorList src, bool non_blocking) {
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
  Arg v = s.has_value() ? shared_arg(pb.input(float_operand(real_scalar(*s)))) : scalars_arg(pb, sl);
  foreach_run(kOp, outs, {list_arg(self), list_arg(t1), list_arg(t2), v}, {}, pb);
}

#define FOREACH_ADDC(NAME, OP)                                                                 \
  std::vector<at::Tensor> fe_##NAME##_scalar(at::TensorList self, at::TensorList t1,           \
                                             at::TensorList t2, const at::Scalar& v) {         \
    if (!foreach_fast({self, t1, t2}, false) || !scalar_ok(v))                                 \
      return at::native::foreach_tensor_##NAME##_scalar_slow(self, t1, t2, v);                 \
    auto out = empty_like_list(self);                                                          \
    addc_into<Op::OP>(out, self, t1, t2, v, {});                                               \
    return out;                                                                                \
  }                                                                                            \
  void fe_##NAME##_scalar_(at::TensorList self, at::TensorList t1, at::TensorList t2,          \
                           const at::Scalar& v) {                                              \
    if (!foreach_fast({self, t1, t2}, true) || !scalar_ok(v))                                  \
      return at::native::foreach_tensor_##NAME##_scalar_slow_(self, t1, t2, v);                \
    addc_into<Op::OP>(self, self, t1, t2, v, {});                                              \
  }                                                                                            \
  std::vector<at::Tensor> fe_##NAME##_scalarlist(at::TensorList self, at::TensorList t1,       \
                                                 at::TensorList t2,                            \
                                                 at::ArrayRef<at::Scalar> v) {                 \
    if (!foreach_fast({self, t1, t2}, false) || !scalars_ok(v, self.size()))                   \
      return at::native::foreach_tensor_##NAME##_scalarlist_slow(self, t1, t2, v);             \
    auto out = empty_like_list(self);                                                          \
    addc_into<Op::OP>(out, self, t1, t2, std::nullopt, v);                                     \
    return out;                                                                                \
  }                                                                                            \
  void fe_##NAME##_scalarlist_(at::TensorList self, at::TensorList t1, at::TensorList t2,      \
                               at::ArrayRef<at::Scalar> v) {                                   \
    if (!foreach_fast({self, t1, t2}, true) || !scalars_ok(v, self.size()))                    \
      return at::native::foreach_tensor_##NAME##_scalarlist_slow_(self, t1, t2, v);            \
    addc_into<Op::OP>(self, self, t1, t2, std::nullopt, v);                                    \
  }                                                                                            \
  std::vector<at::Tensor> fe_##NAME##_tensor(at::TensorList self, at::TensorList t1,           \
                                             at::TensorList t2, const at::Tensor& v) {         \
    if (!foreach_fast({self, t1, t2}, false))                                                  \
      return at::native::foreach_tensor_##NAME##_tensor_slow(self, t1, t2, v);                 \
    auto s = scalars_from_tensor(v);                                                           \
    TORCH_CHECK(s.size() == self.size(), "Expected length of scalars to match input of length ", \
                self.size(), " but got ", s.size(), " instead.");                              \
    auto out = empty_like_list(self);                                                          \
    addc_into<Op::OP>(out, self, t1, t2, std::nullopt, s);                                     \
    return out;                                                                                \
  }                                                                                            \
  void fe_##NAME##_tensor_(at::TensorList self, at::TensorList t1, at::TensorList t2,          \
                           const at::Tensor& v) {                                              \
    if (!foreach_fast({self, t1, t2}, true))                                                   \
      return at::native::foreach_tensor_##NAME##_tensor_slow_(self, t1, t2, v);                \
    auto s = scalars_from_tensor(v);                                                           \
    TORCH_CHECK(s.size() == self.size(), "Expected length of scalars to match input of length ", \
                self.size(), " but got ", s.size(), " instead.");                              \
    addc_into<Op::OP>(self, self, t1, t2, std::nullopt, s);                                    \
  }

FOREACH_ADDC(addcmul, Addcmul)
FOREACH_ADDC(addcdiv, Addcdiv)

std::vector<at::Tensor> fe_lerp_list(at::TensorList self, at::TensorList end, at::TensorList w) {
  if (!foreach_fast({self, end, w}, false)) return at::native::foreach_tensor_ternary_lerp_slow(self, end, w);
  auto out = empty_like_list(self);
  ProgramBuilder pb;
  foreach_run(Op::Lerp, out, {list_arg(self), list_arg(end), list_arg(w)}, {}, pb);
  return out;
}
void fe_lerp_list_(at::TensorList self, at::TensorList end, at::TensorList w) {
  if (!foreach_fast({self, end, w}, true)) return at::native::foreach_tensor_ternary_lerp_slow_(self, end, w);
  ProgramBuilder pb;
  foreach_run(Op::Lerp, self, {list_arg(self), list_arg(end), list_arg(w)}, {}, pb);
}
std::vector<at::Tensor> fe_lerp_scalar(at::TensorList self, at::TensorList end, const at::Scalar& w) {
  if (!foreach_fast({self, end}, false) || !scalar_ok(w))
    return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, w);
  auto out = empty_like_list(self);
  ProgramBuilder pb;
  const ValueId wv = pb.input(float_operand(real_scalar(w)));
  foreach_run(Op::Lerp, out, {list_arg(self), list_arg(end), shared_arg(wv)}, {}, pb);
  return out;
}
void fe_lerp_scalar_(at::TensorList self, at::TensorList end, const at::Scalar& w) {
  if (!foreach_fast({self, end}, true) || !scalar_ok(w))
    return at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, w);
  ProgramBuilder pb;
  const ValueId wv = pb.input(float_operand(real_scalar(w)));
  foreach_run(Op::Lerp, self, {list_arg(self), list_arg(end), shared_arg(wv)}, {}, pb);
}
std::vector<at::Tensor> fe_lerp_scalarlist(at::TensorList self, at::TensorList end,
                                           at::ArrayRef<at::Scalar> w) {
  if (!foreach_fast({self, end}, false) || !scalars_ok(w, self.size()))
    return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, w);
  auto out = empty_like_list(self);
  ProgramBuilder pb;
  Arg wa = scalars_arg(pb, w);
  foreach_run(Op::Lerp, out, {list_arg(self), list_arg(end), wa}, {}, pb);
  return out;
}
void fe_lerp_scalarlist_(at::TensorList self, at::TensorList end, at::ArrayRef<at::Scalar> w) {
  if (!foreach_fast({self, end}, true) || !scalars_ok(w, self.size()))
    return at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, w);
  ProgramBuilder pb;
  Arg wa = scalars_arg(pb, w);
  foreach_run(Op::Lerp, self, {list_arg(self), list_arg(end), wa}, {}, pb);
}

// ---- norm: one NormAll instruction per tensor.

std::vector<at::Tensor> fe_norm(at::TensorList self, const at::Scalar& ord,
                                std::optional<at::ScalarType> dtype) {
  const double p = ord.toDouble();
  bool fast = foreach_fast({self}, false) && !ord.isComplex();
  if (fast && dtype.has_value()) fast = is_half_or_float(*dtype) || *dtype == c10::kDouble;
  if (!fast) return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  if (p == -std::numeric_limits<double>::infinity()) {
    for (const at::Tensor& t : self)
      TORCH_CHECK(t.numel() > 0, "linalg.vector_norm cannot compute the -inf norm on an empty "
                  "tensor because the operation does not have an identity");
  }
  const c10::ScalarType out_dtype = dtype.has_value() ? narrow_dtype(*dtype) : self[0].scalar_type();
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


// ------------------------------------------------------------ random

// Reserves Philox blocks on the device's generator.
std::pair<Operand, Operand> reserve(c10::Device device, const std::optional<at::Generator>& gen,
                                    int64_t blocks) {
  auto [seed, offset] = philox_reserve(gen, device.index(), static_cast<uint64_t>(blocks));
  return {int_operand(static_cast<int64_t>(seed)), int_operand(static_cast<int64_t>(offset))};
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(c10::kBool))};
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(input.scalar_type()),
                              "neuron: native_dropout for dtype ", input.scalar_type());
  at::Tensor out = empty_elementwise(input.sizes(), input.scalar_type(), input.device(), {&input});
  at::Tensor mask = empty_elementwise(input.sizes(), c10::kBool, input.device(), {&input});
  auto [seed, offset] = reserve(input.device(), std::nullopt,
                                kernels::random_extra_offset_increment(
                                    kernels::RandomExtraOp::Dropout, input.numel()));
  launch(Op::Dropout, {seed, offset, float_operand(p), tensor_operand(input)},
         {tensor_operand(out), tensor_operand(mask)});
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const c10::Device device = common_device("native_dropout_backward", {&grad, &mask});
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(grad.scalar_type()),
                              "neuron: native_dropout_backward for dtype ", grad.scalar_type());
  const auto shape = at::infer_size_dimvector(grad.sizes(), mask.sizes());
  at::Tensor out = empty_elementwise(shape, grad.scalar_type(), device, {&grad, &mask});
  if (out.numel() == 0) return out;
  launch(Op::DropoutBackward,
         {tensor_operand(grad.expand(shape)), tensor_operand(mask.expand(shape)),
          float_operand(scale)},
         {tensor_operand(out)});
  return out;
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p,
                              std::optional<at::Generator> gen) {
  common_device("bernoulli_", {&self, &p});
  TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()), "bernoulli_: p of shape ", p.sizes(),
              " cannot be broadcast to self of shape ", self.sizes());
  if (self.numel() == 0) return self;
  at::Tensor pp = p.is_cpu() ? p.to(self.device()) : p;
  pp = to_dtype_on_device(pp, c10::kFloat).expand(self.sizes());
  auto [seed, offset] = reserve(self.device(), gen,
                                kernels::random_extra_offset_increment(
                                    kernels::RandomExtraOp::BernoulliTensor, self.numel()));
  launch(Op::BernoulliTensor, {seed, offset, tensor_operand(pp)}, {tensor_operand(self)});
  return self;
}

at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  return bernoulli_tensor_(out, self, std::move(gen));
}

template <Op kOp>
at::Tensor& random_fill_(at::Tensor& self, double a, double b, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return self;
  const auto rop = kOp == Op::Exponential ? kernels::RandomExtraOp::Exponential
                   : kOp == Op::Geometric ? kernels::RandomExtraOp::Geometric
                                          : kernels::RandomExtraOp::LogNormal;
  auto [seed, offset] =
      reserve(self.device(), gen, kernels::random_extra_offset_increment(rop, self.numel()));
  if (kOp == Op::LogNormal) {
    launch(kOp, {seed, offset, float_operand(a), float_operand(b)}, {tensor_operand(self)});
  } else {
    launch(kOp, {seed, offset, float_operand(a)}, {tensor_operand(self)});
  }
  return self;
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()),
                              "neuron: exponential_ for dtype ", self.scalar_type());
  return random_fill_<Op::Exponential>(self, lambd, 0, std::move(gen));
}
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool && !self.is_complex(),
                              "neuron: geometric_ for dtype ", self.scalar_type());
  return random_fill_<Op::Geometric>(self, p, 0, std::move(gen));
}
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()),
                              "neuron: log_normal_ for dtype ", self.scalar_type());
  return random_fill_<Op::LogNormal>(self, mean, std, std::move(gen));
}

// normal with tensor mean/std: out.normal_(0, std|1).mul_(std).add_(mean), as ATen does.
at::Tensor& normal_tf_out(const at::Tensor& mean, double std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::native::resize_output(out, mean.sizes());
  out.normal_(0, std, gen);
  out.add_(mean);
  return out;
}
at::Tensor normal_tf(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  at::Tensor out = empty_device(mean.sizes(), mean.scalar_type(), mean.device());
  return normal_tf_out(mean, std, std::move(gen), out);
}
void check_std(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() > 0) {
    TORCH_CHECK(at::amin(std).ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
  }
}
at::Tensor& normal_ft_out(double mean, const at::Tensor& std, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, std.sizes());
  out.normal_(0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}
at::Tensor normal_ft(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  at::Tensor out = empty_device(std.sizes(), std.scalar_type(), std.device());
  return normal_ft_out(mean, std, std::move(gen), out);
}
at::Tensor& normal_tt_out(const at::Tensor& mean, const at::Tensor& std,
                          std::optional<at::Generator> gen, at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, at::infer_size_dimvector(mean.sizes(), std.sizes()));
  out.normal_(0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}
at::Tensor normal_tt(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  common_device("normal", {&mean, &std});
  at::Tensor out = empty_device(at::infer_size_dimvector(mean.sizes(), std.sizes()),
                                at::result_type(mean, std), mean.device());
  return normal_tt_out(mean, std, std::move(gen), out);
}

at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(!out.is_complex() && out.scalar_type() != c10::kBool,
              "randperm is not implemented for ", out.scalar_type());
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  auto [seed, offset] = reserve(out.device(), gen,
                                kernels::random_extra_offset_increment(
                                    kernels::RandomExtraOp::Randperm, n));
  launch(Op::Randperm, {seed, offset}, {tensor_operand(out)});
  return out;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == c10::kLong,
              "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t C = self.size(-1);
  TORCH_CHECK(replacement || (n_sample <= C),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(C <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
  if (self.dim() == 1) at::native::resize_output(result, {n_sample});
  else at::native::resize_output(result, {self.size(0), n_sample});
  if (result.numel() == 0) return result;
  const int64_t N = self.dim() == 2 ? self.size(0) : 1;
  const int64_t per_row = (std::max(C, n_sample) + 1) / 2;
  auto [seed, offset] = reserve(self.device(), gen, N * per_row + 1);
  at::Tensor target = result.is_contiguous() ? result
                                             : empty_device(result.sizes(), c10::kLong, result.device());
  launch(Op::Multinomial, {seed, offset, tensor_operand(self)}, {tensor_operand(target)},
         {replacement ? 1 : 0});
  if (!target.is_same(result)) result.copy_(target);
  return result;
}
at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor result = empty_device({0}, c10::kLong, self.device());
  return multinomial_out(self, n_sample, replacement, std::move(gen), result);
}

// ------------------------------------------------------------ losses

enum : int64_t { kMse = 0, kL1 = 1, kSmoothL1 = 2, kHuber = 3, kBce = 4 };

const char* loss_name(int64_t kind) {
  switch (kind) {
    case kMse: return "mse_loss";
    case kL1: return "l1_loss";
    case kSmoothL1: return "smooth_l1_loss";
    case kHuber: return "huber_loss";
    default: return "binary_cross_entropy";
  }
}

void check_reduction(int64_t reduction) {
  TORCH_CHECK(reduction >= 0 && reduction <= 2, reduction, " is not a valid value for reduction");
}

at::Tensor& loss_forward_into(int64_t kind, const at::Tensor& self, const at::Tensor& target,
                              const std::optional<at::Tensor>& weight, int64_t reduction,
                              double param, at::Tensor& out) {
  const bool has_w = weight.has_value() && weight->defined();
  const c10::Device device = common_device(loss_name(kind), {&self, &target, has_w ? &*weight : &self});
  check_reduction(reduction);
  const auto dtype = kind == kBce ? self.scalar_type() : at::result_type(self, target);
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(dtype), "neuron: ", loss_name(kind),
                              " for dtype ", dtype);
  at::DimVector shape;
  if (kind == kBce) {
    TORCH_CHECK(self.sizes() == target.sizes(), "Using a target size (", target.sizes(),
                ") that is different to the input size (", self.sizes(), ") is deprecated. "
                "Please ensure they have the same size.");
    shape.assign(self.sizes().begin(), self.sizes().end());
  } else {
    shape = at::infer_size_dimvector(self.sizes(), target.sizes());
  }
  if (reduction == 0) at::native::resize_output(out, shape);
  else at::native::resize_output(out, {});
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
  at::Tensor out = reduction == 0 ? empty_elementwise(at::infer_size_dimvector(self.sizes(),
                                                                               target.sizes()),
                                                      dtype, device, {&self, &target})
                                  : empty_device({0}, dtype, device);
  return loss_forward_into(kind, self, target, weight, reduction, param, out);
}

at::Tensor& loss_backward_into(int64_t kind, const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, double param, at::Tensor& grad_input) {
  const bool has_w = weight.has_value() && weight->defined();
  const c10::Device device = common_device(loss_name(kind), {&grad, &self, &target, has_w ? &*weight : &self});
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
at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target,
                               int64_t reduction, double beta, at::Tensor& out) {
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
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got "
              "targets of dimension: ", target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got "
              "input of dimension: ", self.dim());
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
  TORCH_CHECK_NOT_IMPLEMENTED(input.dim() >= 3 && input.dim() <= 5,
                              "neuron: convolution of ", input.dim(), "-d input");
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride_s,
                                    c10::SymIntArrayRef padding_s, c10::SymIntArrayRef dilation_s,
                                    bool transposed, c10::SymIntArrayRef output_padding_s,
                                    c10::SymInt groups_s) {
  const bool has_bias = bias.has_value() && bias->defined();
  const c10::Device device =
      common_device("convolution", {&input, &weight, has_bias ? &*bias : &input});
  check_conv_dtypes(input, weight);
  const auto stride = C10_AS_INTARRAYREF_SLOW(stride_s), padding = C10_AS_INTARRAYREF_SLOW(padding_s),
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
  at::Tensor out = empty_device(shape, input.scalar_type(), device);
  if (out.numel() == 0) return out;
  launch(Op::Convolution,
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
  const auto attrs = conv_attrs(input.dim() - 2, C10_AS_INTARRAYREF_SLOW(stride_s),
                                C10_AS_INTARRAYREF_SLOW(padding_s), C10_AS_INTARRAYREF_SLOW(dilation_s),
                                transposed, C10_AS_INTARRAYREF_SLOW(output_padding_s),
                                groups_s.expect_int());
  const at::Tensor go = to_dtype_on_device(grad_output, input.scalar_type());
  at::Tensor gi, gw, gb;
  if (output_mask[0]) {
    gi = empty_device(input.sizes(), input.scalar_type(), device);
    if (gi.numel() > 0)
      launch(Op::ConvolutionBackwardInput, {tensor_operand(go), tensor_operand(weight)},
             {tensor_operand(gi)}, attrs);
  }
  if (output_mask[1]) {
    gw = empty_device(weight.sizes(), weight.scalar_type(), device);
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
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:",
              self.sizes());
  const int64_t ih = self.size(-2), iw = self.size(-1);
  const int64_t oh = at::native::pooling_output_shape<int64_t>(ih, a.kH, a.padH, a.dH, a.dilH, ceil_mode);
  const int64_t ow = at::native::pooling_output_shape<int64_t>(iw, a.kW, a.padW, a.dW, a.dilW, ceil_mode);
  at::native::pool2d_shape_check(self, a.kH, a.kW, a.dH, a.dW, a.padH, a.padW, a.dilH, a.dilW,
                                 self.size(-3), ih, iw, oh, ow, at::MemoryFormat::Contiguous);
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  shape[shape.size() - 2] = oh;
  shape[shape.size() - 1] = ow;
  return shape;
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(const at::Tensor& self,
                                                           at::IntArrayRef k, at::IntArrayRef stride,
                                                           at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  const Pool2dArgs a = pool_args("max_pool2d", k, stride, padding, dilation);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  at::Tensor out = empty_device(shape, self.scalar_type(), self.device());
  at::Tensor idx = empty_device(shape, c10::kLong, self.device());
  if (out.numel() == 0) return {out, idx};
  launch(Op::MaxPool2d, {tensor_operand(self)}, {tensor_operand(out), tensor_operand(idx)},
         {a.kH, a.kW, a.dH, a.dW, a.padH, a.padW, a.dilH, a.dilW});
  return {out, idx};
}

// Scatter of grad_output by indices (max_pool2d and adaptive_max_pool2d backward).
at::Tensor max_pool_backward_common(const at::Tensor& grad, const at::Tensor& self,
                                    const at::Tensor& indices) {
  const c10::Device device = common_device("max_pool2d_backward", {&grad, &self, &indices});
  TORCH_CHECK(grad.sizes() == indices.sizes(), "grad_output and indices must have the same shape");
  at::Tensor gi = empty_device(self.sizes(), self.scalar_type(), device);
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
  return {a.kH, a.kW, a.dH, a.dW, a.padH, a.padW, count_include_pad ? 1 : 0,
          divisor_override.value_or(0)};
}

at::Tensor avg_pool2d(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  const Pool2dArgs a = pool_args("avg_pool2d", k, stride, padding, {});
  const auto attrs = avg_attrs(a, count_include_pad, divisor_override);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  at::Tensor out = empty_device(shape, self.scalar_type(), self.device());
  if (out.numel() == 0) return out;
  launch(Op::AvgPool2d, {tensor_operand(self)}, {tensor_operand(out)}, attrs);
  return out;
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  const c10::Device device = common_device("avg_pool2d_backward", {&grad, &self});
  const Pool2dArgs a = pool_args("avg_pool2d", k, stride, padding, {});
  const auto attrs = avg_attrs(a, count_include_pad, divisor_override);
  const auto shape = pool_out_shape(self, a, ceil_mode);
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(shape), "avg_pool2d_backward: grad_output of shape ",
              grad.sizes(), " does not match the output shape ", at::IntArrayRef(shape));
  at::Tensor gi = empty_device(self.sizes(), self.scalar_type(), device);
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
    TORCH_CHECK(self.size(d) > 0, name, "(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ", self.sizes(), " with dimension ", d,
                " being empty");
  TORCH_CHECK_NOT_IMPLEMENTED(is_half_or_float(self.scalar_type()), "neuron: ", name,
                              " for dtype ", self.scalar_type());
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  shape[shape.size() - 2] = out_size[0];
  shape[shape.size() - 1] = out_size[1];
  return shape;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef out_size_s) {
  const auto shape = adaptive_shape("adaptive_avg_pool2d", self, C10_AS_INTARRAYREF_SLOW(out_size_s));
  at::Tensor out = empty_device(shape, self.scalar_type(), self.device());
  if (out.numel() == 0) return out;
  launch(Op::AdaptiveAvgPool2d, {tensor_operand(self)}, {tensor_operand(out)});
  return out;
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& self) {
  const c10::Device device = common_device("adaptive_avg_pool2d_backward", {&grad, &self});
  TORCH_CHECK(grad.dim() == self.dim(), "adaptive_avg_pool2d_backward(): Expected grad_output to "
              "have the same dimensionality as input");
  at::Tensor gi = empty_device(self.sizes(), self.scalar_type(), device);
  if (gi.numel() == 0) return gi;
  launch(Op::AdaptiveAvgPool2dBackward,
         {tensor_operand(to_dtype_on_device(grad, self.scalar_type()))}, {tensor_operand(gi)});
  return gi;
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& self,
                                                       at::IntArrayRef out_size) {
  const auto shape = adaptive_shape("adaptive_max_pool2d", self, out_size);
  at::Tensor out = empty_device(shape, self.scalar_type(), self.device());
  at::Tensor idx = empty_device(shape, c10::kLong, self.device());
  if (out.numel() == 0) return {out, idx};
  launch(Op::AdaptiveMaxPool2d, {tensor_operand(self)}, {tensor_operand(out), tensor_operand(idx)});
  return {out, idx};
}

at::Tensor adaptive_max_pool2d_backward(const at::Tensor& grad, const at::Tensor& self,
                                        const at::Tensor& indices) {
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
  at::Tensor out = empty_device({full[0], full[1], full[2], full[3]}, self.scalar_type(), self.device());
  if (out.numel() == 0) return out;
  launch(kOp, {tensor_operand(self), float_operand(scale_or_zero(sh)), float_operand(scale_or_zero(sw))},
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
  at::Tensor gi = empty_device(in_size, grad.scalar_type(), grad.device());
  if (gi.numel() == 0) return gi;
  launch(kOp, {tensor_operand(grad), float_operand(scale_or_zero(sh)), float_operand(scale_or_zero(sw))},
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

#define REG_BIN_ALL(name, fn)                                 \
  m.impl("_foreach_" #name ".List", fn##_list);               \
  m.impl("_foreach_" #name "_.List", fn##_list_);             \
  m.impl("_foreach_" #name ".Scalar", fn##_scalar);           \
  m.impl("_foreach_" #name "_.Scalar", fn##_scalar_);         \
  m.impl("_foreach_" #name ".ScalarList", fn##_scalarlist);   \
  m.impl("_foreach_" #name "_.ScalarList", fn##_scalarlist_);
#define REG_UNARY(name)                        \
  m.impl("_foreach_" #name, fe_##name);        \
  m.impl("_foreach_" #name "_", fe_##name##_);
#define REG_ADDC(name)                                            \
  m.impl("_foreach_" #name ".Scalar", fe_##name##_scalar);         \
  m.impl("_foreach_" #name "_.Scalar", fe_##name##_scalar_);       \
  m.impl("_foreach_" #name ".ScalarList", fe_##name##_scalarlist); \
  m.impl("_foreach_" #name "_.ScalarList", fe_##name##_scalarlist_); \
  m.impl("_foreach_" #name ".Tensor", fe_##name##_tensor);         \
  m.impl("_foreach_" #name "_.Tensor", fe_##name##_tensor_);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);  // a declined call runs as a host library kernel
  m.impl("_fused_adam_", fused_adam_);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tlr_);
  m.impl("_fused_adamw_", fused_adamw_);
  m.impl("_fused_adamw_.tensor_lr", fused_adamw_tlr_);
  m.impl("_fused_sgd_", fused_sgd_);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tlr_);

  REG_BIN_ALL(add, fe_add)
  REG_BIN_ALL(sub, fe_sub)
  REG_BIN_ALL(mul, fe_mul)
  REG_BIN_ALL(div, fe_div)
  REG_BIN_ALL(maximum, fe_maximum)
  REG_BIN_ALL(minimum, fe_minimum)
  REG_BIN_ALL(clamp_min, fe_maximum)
  REG_BIN_ALL(clamp_max, fe_minimum)
  m.impl("_foreach_mul.Tensor", fe_mul_tensor);
  m.impl("_foreach_mul_.Tensor", fe_mul_tensor_);
  m.impl("_foreach_div.Tensor", fe_div_tensor);
  m.impl("_foreach_div_.Tensor", fe_div_tensor_);
  m.impl("_foreach_add.Tensor", fe_add_tensor);
  m.impl("_foreach_add_.Tensor", fe_add_tensor_);
  REG_UNARY(sqrt)
  REG_UNARY(neg)
  REG_UNARY(abs)
  REG_UNARY(exp)
  REG_UNARY(log)
  REG_UNARY(reciprocal)
  REG_UNARY(sigmoid)
  REG_UNARY(tanh)
  REG_UNARY(sign)
  m.impl("_foreach_zero_", fe_zero_);
  m.impl("_foreach_copy_", fe_copy_);
  REG_ADDC(addcmul)
  REG_ADDC(addcdiv)
  m.impl("_foreach_lerp.List", fe_lerp_list);
  m.impl("_foreach_lerp_.List", fe_lerp_list_);
  m.impl("_foreach_lerp.Scalar", fe_lerp_scalar);
  m.impl("_foreach_lerp_.Scalar", fe_lerp_scalar_);
  m.impl("_foreach_lerp.ScalarList", fe_lerp_scalarlist);
  m.impl("_foreach_lerp_.ScalarList", fe_lerp_scalarlist_);
  m.impl("_foreach_norm.Scalar", fe_norm);

  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("bernoulli.out", bernoulli_out);
  m.impl("exponential_", exponential_);
  m.impl("geometric_", geometric_);
  m.impl("log_normal_", log_normal_);
  m.impl("normal.Tensor_float", normal_tf);
  m.impl("normal.Tensor_float_out", normal_tf_out);
  m.impl("normal.float_Tensor", normal_ft);
  m.impl("normal.float_Tensor_out", normal_ft_out);
  m.impl("normal.Tensor_Tensor", normal_tt);
  m.impl("normal.Tensor_Tensor_out", normal_tt_out);
  m.impl("randperm.generator_out", randperm_out);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);

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

  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);

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
