// scaled_dot_product_attention on neuron, the way a PrivateUse1 backend plugs
// in: PyTorch's composite asks `_fused_sdp_choice_stub` which backend to use;
// we answer "overrideable" for the cases the memory-efficient attention engine
// handles and "math" (PyTorch's decomposition into matmul/softmax/dropout,
// which materialises the L x S scores) for everything else, so an unsupported
// case is slower, never wrong. The overrideable forward/backward ops launch
// the compiler's Attention / AttentionBackward.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "bridge.h"
#include "engine.h"
#include "output_layout.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

bool is_attention_dtype(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf;
}

// Why the fused engine cannot take this call ("" when it can). Sizes are read as
// SymInts: under torch.compile the choice is made on fake tensors with symbolic shapes.
const char* unsupported_reason(const Tensor& q, const Tensor& k, const Tensor& v,
                               const std::optional<Tensor>& mask, double dropout_p, bool is_causal,
                               bool enable_gqa) {
  if (q.is_nested() || k.is_nested() || v.is_nested()) return "nested tensors";
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return "inputs are not 4-D [B, H, L, E]";
  if (k.device() != q.device() || v.device() != q.device()) return "inputs on different devices";
  const auto dt = q.scalar_type();
  if (!is_attention_dtype(dt) || k.scalar_type() != dt || v.scalar_type() != dt)
    return "dtype (float32, bfloat16, float16, all alike)";
  auto empty = [](const Tensor& t) { return TORCH_GUARD_SIZE_OBLIVIOUS(t.sym_numel().sym_eq(0)); };
  if (empty(q) || empty(k) || empty(v)) return "empty inputs";
  const auto qs = q.sym_sizes(), ks = k.sym_sizes(), vs = v.sym_sizes();
  if (ks[0] != qs[0] || vs[0] != qs[0] || vs[1] != ks[1] || vs[2] != ks[2] || ks[3] != qs[3])
    return "mismatched shapes";
  if (qs[1] != ks[1] && (!enable_gqa || qs[1] % ks[1] != 0))
    return "query and key/value heads differ without enable_gqa (or not a multiple)";
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0)) return "dropout_p outside [0, 1]";
  if (mask.has_value() && mask->defined()) {
    const Tensor& m = *mask;
    if (is_causal) return "both attn_mask and is_causal";  // the math path raises for it
    if (m.device() != q.device()) return "attn_mask on another device";
    if (m.is_nested() || m.dim() > 4) return "attn_mask layout";
    if (m.scalar_type() != c10::kBool && m.scalar_type() != dt) return "attn_mask dtype";
    if (m.requires_grad() && at::GradMode::is_enabled()) return "attn_mask requires grad";
    const std::array<c10::SymInt, 4> full{qs[0], qs[1], qs[2], ks[2]};
    if (!at::is_expandable_to(m.sym_sizes(), c10::SymIntArrayRef(full)))
      return "attn_mask not broadcastable";
  }
  return "";
}

int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::optional<Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto& ctx = at::globalContext();
  const char* why = unsupported_reason(q, k, v, mask, dropout_p, is_causal, enable_gqa);
  if (*why == 0 && ctx.userEnabledOverrideableSDP())
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  TORCH_CHECK(false,
              "No viable backend for scaled_dot_product_attention on neuron: the math "
              "backend is disabled and the fused neuron kernel cannot run this call (",
              *why ? why : "the overrideable backend is disabled", ")");
}

// A tensor of `sizes` in `like`'s layout: empty_like's when the sizes agree, else dims
// ordered by like's strides. The layouts PyTorch's meta functions promise
// (alloc_with_matching_layout, empty_like): compiled graphs take views that rely on them.
Tensor empty_with_layout_of(const Tensor& like, at::IntArrayRef sizes) {
  if (like.sizes().equals(sizes)) return at::empty_like(like);
  std::vector<int64_t> order(like.dim());  // innermost first; equal strides keep dim order
  std::iota(order.rbegin(), order.rend(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) < like.stride(b); });
  return at::empty_strided(sizes, strides_in_order(sizes, order), like.options());
}

double attention_scale(const Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

void check_attention_args(const char* name, const Tensor& q, const Tensor& k, const Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, name,
              ": query, key and value must be 4-D [B, H, L, E]");
  TORCH_CHECK(is_attention_dtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              name, ": query, key and value must share a dtype among float32, bfloat16, float16");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, name,
              ": the number of query heads must be a multiple of key/value heads");
}

// The mask as the engine reads it: on the device, expanded to [B, H, L, S].
Operand mask_operand(const std::optional<Tensor>& mask, const Tensor& q, const Tensor& k) {
  if (!mask.has_value() || !mask->defined()) return none_operand();
  Tensor m = mask->device() == q.device() ? *mask : mask->to(q.device());
  return tensor_operand(m.expand({q.size(0), q.size(1), q.size(2), k.size(2)}));
}

using ForwardResult =
    std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>;

ForwardResult sdpa_overrideable(const Tensor& q, const Tensor& k, const Tensor& v,
                                const std::optional<Tensor>& attn_bias, double dropout_p,
                                bool is_causal, bool return_debug_mask,
                                std::optional<double> scale) {
  check_attention_args("_scaled_dot_product_fused_attention_overrideable", q, k, v);
  TORCH_CHECK_NOT_IMPLEMENTED(!return_debug_mask,
                              "neuron: scaled_dot_product_attention cannot return the debug "
                              "attention mask (it never materialises the scores)");
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2), Ev = v.size(3);
  // Models build q as a [B, L, H, E] buffer seen as [B, H, L, E], so `out` in q's
  // layout makes the usual next step, out.transpose(1, 2).reshape(B, L, H * Ev), free.
  Tensor out = empty_with_layout_of(q, {B, H, L, Ev});
  Tensor lse = empty_device({B, H, L}, c10::kFloat, q.device());
  const bool dropout = dropout_p > 0.0;
  int64_t seed = 0, offset = 0;
  if (dropout) {
    auto [s, o] = reserve_philox(q.device(), std::nullopt, Op::Attention, {B, H, L, S});
    seed = s.arg.i;
    offset = o.arg.i;
  }
  // The backward reads seed and offset from these host scalars to draw the
  // same dropout mask again.
  Tensor philox_seed = at::scalar_tensor(seed, at::dtype(c10::kLong));
  Tensor philox_offset = at::scalar_tensor(offset, at::dtype(c10::kLong));
  launch(Op::Attention,
         {tensor_operand(q), tensor_operand(k), tensor_operand(v), mask_operand(attn_bias, q, k),
          float_operand(attention_scale(q, scale)), float_operand(dropout_p), int_operand(seed),
          int_operand(offset)},
         {tensor_operand(out), tensor_operand(lse)}, {is_causal ? 1 : 0, dropout ? 1 : 0});
  return {out,         lse,           Tensor(), Tensor(), c10::SymInt(L), c10::SymInt(S),
          philox_seed, philox_offset, Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_overrideable_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const Tensor& out,
    const Tensor& lse, const Tensor& cum_seq_q, const Tensor& cum_seq_k, c10::SymInt max_q,
    c10::SymInt max_k, double dropout_p, bool is_causal, const Tensor& philox_seed,
    const Tensor& philox_offset, std::optional<double> scale) {
  check_attention_args("_scaled_dot_product_fused_attention_overrideable_backward", q, k, v);
  TORCH_CHECK_NOT_IMPLEMENTED(!(grad_input_mask[3] && attn_bias.defined()),
                              "neuron: the fused scaled_dot_product_attention has no gradient for "
                              "attn_mask (a mask that requires grad takes the math path)");
  Tensor gq = at::empty_like(q), gk = at::empty_like(k), gv = at::empty_like(v);
  const bool dropout = dropout_p > 0.0;
  const int64_t seed = dropout ? philox_seed.item<int64_t>() : 0;
  const int64_t offset = dropout ? philox_offset.item<int64_t>() : 0;
  std::optional<Tensor> mask;
  if (attn_bias.defined()) mask = attn_bias;
  launch(Op::AttentionBackward,
         {tensor_operand(grad_out), tensor_operand(q), tensor_operand(k), tensor_operand(v),
          tensor_operand(out), tensor_operand(lse), mask_operand(mask, q, k),
          float_operand(attention_scale(q, scale)), float_operand(dropout_p), int_operand(seed),
          int_operand(offset)},
         {tensor_operand(gq), tensor_operand(gk), tensor_operand(gv)},
         {is_causal ? 1 : 0, dropout ? 1 : 0});
  return {gq, gk, gv, Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", sdpa_overrideable);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", sdpa_overrideable_backward);
}

}  // namespace openneuron::bridge

// The composite scaled_dot_product_attention consults the dispatch stub, not
// the operator, so the choice is registered in both places.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &openneuron::bridge::fused_sdp_choice);
}  // namespace at::native
