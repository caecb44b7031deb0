// The RNN family (lower_rnn.cpp). The fused LSTM and GRU cell ops: for a
// PrivateUse1 device, PyTorch's nn.GRU / LSTMCell / GRUCell (and nn.LSTM where the
// whole-sequence path below does not apply) compute the gate GEMMs with matmul and
// hand the pointwise rest to these ops, as on CUDA; they have no CPU kernel.
// And nn.LSTM over a whole sequence (aten::lstm.input, registered for autograd): per
// layer and direction, the input projections of all steps as one GEMM, the
// recurrence as one LstmSequence instruction, and a backward of one instruction plus
// GEMMs over the whole sequence, where PyTorch's composite would launch a few ops
// per time step, forward and backward.
#include <ATen/ops/gru_native.h>
#include <ATen/ops/lstm_native.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdlib>
#include <span>
#include <string_view>

#include "op_helpers.h"

namespace openneuron::bridge {
namespace {

using at::Tensor;
using compiler::Op;

// `t` on the device, in the cell's dtype, contiguous (an undefined tensor stays so).
Tensor prepared(const Tensor& t, c10::ScalarType dtype) {
  return t.defined() ? to_dtype_on_device(t, dtype).contiguous() : t;
}

void check_cell(const char* name, const Tensor& igates, const Tensor& hgates, const Tensor& state,
                const OptTensor& ib, const OptTensor& hb, int64_t gates) {
  TORCH_CHECK(igates.dim() == 2 && igates.sizes() == hgates.sizes(), name,
              ": input_gates and hidden_gates must be 2-D of one size, got ", igates.sizes(),
              " and ", hgates.sizes());
  TORCH_CHECK(igates.size(1) % gates == 0, name, ": gates have ", igates.size(1),
              " columns, not a multiple of ", gates);
  const int64_t hidden = igates.size(1) / gates;
  TORCH_CHECK(state.dim() == 2 && state.size(0) == igates.size(0) && state.size(1) == hidden, name,
              ": the state must be [", igates.size(0), ", ", hidden, "], got ", state.sizes());
  const bool has_ib = ib.has_value() && ib->defined(), has_hb = hb.has_value() && hb->defined();
  TORCH_CHECK(has_ib == has_hb, name, ": input_bias and hidden_bias must both be given or not");
  if (has_ib)
    TORCH_CHECK(ib->dim() == 1 && ib->size(0) == igates.size(1) && hb->sizes() == ib->sizes(), name,
                ": biases must be [", igates.size(1), "], got ", ib->sizes(), " and ", hb->sizes());
  TORCH_CHECK(is_half_or_float(igates.scalar_type()), name, ": unsupported dtype ",
              igates.scalar_type());
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor& igates, const Tensor& hgates,
                                             const Tensor& cx, const OptTensor& ib,
                                             const OptTensor& hb) {
  check_cell("_thnn_fused_lstm_cell", igates, hgates, cx, ib, hb, 4);
  const c10::Device device =
      common_device("_thnn_fused_lstm_cell",
                    {&igates, &hgates, &cx, &value_or_undefined(ib), &value_or_undefined(hb)});
  const auto dtype = igates.scalar_type();
  Tensor hy = empty_device(cx.sizes(), dtype, device), cy = empty_device(cx.sizes(), dtype, device);
  Tensor workspace = empty_device(igates.sizes(), dtype, device);
  if (hy.numel() == 0) return {hy, cy, workspace};
  launch(Op::LstmCell,
         {tensor_operand(prepared(igates, dtype)), tensor_operand(prepared(hgates, dtype)),
          tensor_operand(prepared(cx, dtype)),
          optional_operand(prepared(value_or_undefined(ib), dtype)),
          optional_operand(prepared(value_or_undefined(hb), dtype))},
         {tensor_operand(hy), tensor_operand(cy), tensor_operand(workspace)});
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(const OptTensor& grad_hy,
                                                      const OptTensor& grad_cy, const Tensor& cx,
                                                      const Tensor& cy, const Tensor& workspace,
                                                      bool has_bias) {
  const Tensor& ghy = value_or_undefined(grad_hy);
  const Tensor& gcy = value_or_undefined(grad_cy);
  if (!ghy.defined() && !gcy.defined()) return {Tensor(), Tensor(), Tensor()};
  const c10::Device device =
      common_device("_thnn_fused_lstm_cell_backward_impl", {&ghy, &gcy, &cx, &cy, &workspace});
  const auto dtype = workspace.scalar_type();
  TORCH_CHECK(cx.dim() == 2 && workspace.dim() == 2 && workspace.size(1) == 4 * cx.size(1) &&
                  cy.sizes() == cx.sizes(),
              "_thnn_fused_lstm_cell_backward_impl: cx/cy [B, H] and workspace [B, 4H] expected, "
              "got ",
              cx.sizes(), ", ", cy.sizes(), ", ", workspace.sizes());
  Tensor grad_gates = empty_device(workspace.sizes(), dtype, device);
  Tensor grad_cx = empty_device(cx.sizes(), dtype, device);
  if (grad_cx.numel() > 0) {
    launch(Op::LstmCellBackward,
           {optional_operand(prepared(ghy, dtype)), optional_operand(prepared(gcy, dtype)),
            tensor_operand(prepared(cx, dtype)), tensor_operand(prepared(cy, dtype)),
            tensor_operand(prepared(workspace, dtype))},
           {tensor_operand(grad_gates), tensor_operand(grad_cx)});
  }
  return {grad_gates, grad_cx, has_bias ? grad_gates.sum(0) : Tensor()};
}

std::tuple<Tensor, Tensor> gru_cell(const Tensor& igates, const Tensor& hgates, const Tensor& hx,
                                    const OptTensor& ib, const OptTensor& hb) {
  check_cell("_thnn_fused_gru_cell", igates, hgates, hx, ib, hb, 3);
  const c10::Device device =
      common_device("_thnn_fused_gru_cell",
                    {&igates, &hgates, &hx, &value_or_undefined(ib), &value_or_undefined(hb)});
  const auto dtype = igates.scalar_type();
  Tensor hy = empty_device(hx.sizes(), dtype, device);
  Tensor workspace = empty_device({hx.size(0), 5 * hx.size(1)}, dtype, device);
  if (hy.numel() == 0) return {hy, workspace};
  launch(Op::GruCell,
         {tensor_operand(prepared(igates, dtype)), tensor_operand(prepared(hgates, dtype)),
          tensor_operand(prepared(hx, dtype)),
          optional_operand(prepared(value_or_undefined(ib), dtype)),
          optional_operand(prepared(value_or_undefined(hb), dtype))},
         {tensor_operand(hy), tensor_operand(workspace)});
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy,
                                                                     const Tensor& workspace,
                                                                     bool has_bias) {
  const c10::Device device = common_device("_thnn_fused_gru_cell_backward", {&grad_hy, &workspace});
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 &&
                  workspace.sizes() == at::IntArrayRef({grad_hy.size(0), 5 * grad_hy.size(1)}),
              "_thnn_fused_gru_cell_backward: grad_hy [B, H] and workspace [B, 5H] expected, got ",
              grad_hy.sizes(), " and ", workspace.sizes());
  const auto dtype = workspace.scalar_type();
  const int64_t B = grad_hy.size(0), H = grad_hy.size(1);
  Tensor gi = empty_device({B, 3 * H}, dtype, device), gh = empty_device({B, 3 * H}, dtype, device);
  Tensor ghx = empty_device({B, H}, dtype, device);
  if (ghx.numel() > 0) {
    launch(Op::GruCellBackward,
           {tensor_operand(prepared(grad_hy, dtype)), tensor_operand(prepared(workspace, dtype))},
           {tensor_operand(gi), tensor_operand(gh), tensor_operand(ghx)});
  }
  if (!has_bias) return {gi, gh, ghx, Tensor(), Tensor()};
  return {gi, gh, ghx, gi.sum(0), gh.sum(0)};
}

// ---- nn.LSTM and nn.GRU over a whole sequence

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Allocates float32 outputs of `sizes` on `dev`, launches `op` (attribute: the
// direction) into them and returns them.
std::vector<Tensor> launch_sequence_op(Op op, std::initializer_list<Operand> ins,
                                       std::initializer_list<std::vector<int64_t>> sizes,
                                       bool reverse, c10::Device dev) {
  std::vector<Tensor> outs;
  std::vector<Operand> out_ops;
  for (const std::vector<int64_t>& s : sizes) {
    outs.push_back(empty_device(s, at::kFloat, dev));
    out_ops.push_back(tensor_operand(outs.back()));
  }
  launch(op, std::span(ins.begin(), ins.size()), out_ops, {reverse ? 1 : 0});
  return outs;
}

// An incoming gradient as an operand: absent when autograd gives none.
Operand grad_operand(const Tensor& g) {
  return optional_operand(g.defined() ? g.contiguous() : Tensor());
}

// y, h_n, c_n, and (when `save`) cells and gates, for one layer and direction;
// Float32 operands, x [T, B, I].
std::vector<Tensor> lstm_layer_forward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                       const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                       const Tensor& b_hh, bool reverse, bool save) {
  const int64_t T = x.size(0), B = x.size(1), H = w_hh.size(1);
  const Tensor x2 = x.reshape({T * B, x.size(2)});
  const Tensor xw = (b_ih.defined() ? at::addmm(b_ih + b_hh, x2, w_ih.t()) : at::mm(x2, w_ih.t()))
                        .view({T, B, 4 * H});
  const Operand xw_op = tensor_operand(xw), w_op = tensor_operand(w_hh.contiguous()),
                h0_op = tensor_operand(h0.contiguous()), c0_op = tensor_operand(c0.contiguous());
  if (!save)
    return launch_sequence_op(Op::LstmSequence, {xw_op, w_op, h0_op, c0_op},
                              {{T, B, H}, {B, H}, {B, H}}, reverse, x.device());
  return launch_sequence_op(Op::LstmSequence, {xw_op, w_op, h0_op, c0_op},
                            {{T, B, H}, {B, H}, {B, H}, {T, B, H}, {T, B, 4 * H}}, reverse,
                            x.device());
}

// h_{t-1} at every step t, in time order, from h0 and the layer's outputs y.
Tensor previous_states(const Tensor& h0, const Tensor& y, bool reverse) {
  const int64_t T = y.size(0);
  const Tensor first = h0.unsqueeze(0);
  if (T == 1) return first;
  return reverse ? at::cat({y.narrow(0, 1, T - 1), first})
                 : at::cat({first, y.narrow(0, 0, T - 1)});
}

// The layer functions' backward is one instruction, not differentiable ops: like
// cuDNN's RNN on CUDA, they have no double backward, and say so rather than
// return second derivatives of zero.
void check_no_double_backward(const char* module) {
  TORCH_CHECK(!at::GradMode::is_enabled(), module,
              " on neuron: the whole-sequence kernel has no double backward (create_graph=True), "
              "as cuDNN's RNN on CUDA; set OPENNEURON_RNN_SEQUENCE=0 to run PyTorch's composite, "
              "which has one");
}

// One layer and direction as an autograd node: its backward runs the recurrence
// backward as one instruction, then forms the input and weight gradients with GEMMs
// over all steps at once.
struct LstmLayer : torch::autograd::Function<LstmLayer> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& h0,
                               const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                               const Tensor& b_ih, const Tensor& b_hh, bool reverse) {
    std::vector<Tensor> r = lstm_layer_forward(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, true);
    ctx->save_for_backward({x, h0, c0, w_ih, w_hh, r[0], r[3], r[4]});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["bias"] = b_ih.defined();
    return {r[0], r[1], r[2]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    check_no_double_backward("nn.LSTM");
    const variable_list s = ctx->get_saved_variables();
    const Tensor &x = s[0], &h0 = s[1], &c0 = s[2], &w_ih = s[3], &w_hh = s[4], &y = s[5];
    const bool reverse = ctx->saved_data["reverse"].toBool();
    const int64_t T = x.size(0), B = x.size(1), I = x.size(2), H = w_hh.size(1);
    const std::vector<Tensor> r =
        launch_sequence_op(Op::LstmSequenceBackward,
                           {grad_operand(grads[0]), grad_operand(grads[1]), grad_operand(grads[2]),
                            tensor_operand(w_hh.contiguous()), tensor_operand(c0.contiguous()),
                            tensor_operand(s[6]), tensor_operand(s[7])},
                           {{T, B, 4 * H}, {B, H}, {B, H}}, reverse, x.device());
    const Tensor &gg = r[0], &gh0 = r[1], &gc0 = r[2];
    const Tensor g2 = gg.view({T * B, 4 * H});
    Tensor dx, dw_ih, dw_hh, db;
    if (ctx->needs_input_grad(0)) dx = at::mm(g2, w_ih).view({T, B, I});
    if (ctx->needs_input_grad(3)) dw_ih = at::mm(g2.t(), x.reshape({T * B, I}));
    if (ctx->needs_input_grad(4))
      dw_hh = at::mm(g2.t(), previous_states(h0, y, reverse).reshape({T * B, H}));
    if (ctx->saved_data["bias"].toBool()) db = g2.sum(0);
    return {dx, gh0, gc0, dw_ih, dw_hh, db, db, Tensor()};
  }
};

// y, h_n, and (when `save`) gates, for one GRU layer and direction; Float32 operands.
std::vector<Tensor> gru_layer_forward(const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                                      const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                                      bool reverse, bool save) {
  const int64_t T = x.size(0), B = x.size(1), H = w_hh.size(1);
  const Tensor x2 = x.reshape({T * B, x.size(2)});
  const Tensor xw =
      (b_ih.defined() ? at::addmm(b_ih, x2, w_ih.t()) : at::mm(x2, w_ih.t())).view({T, B, 3 * H});
  const Operand xw_op = tensor_operand(xw), w_op = tensor_operand(w_hh.contiguous()),
                b_op = optional_operand(b_hh.defined() ? b_hh.contiguous() : Tensor()),
                h0_op = tensor_operand(h0.contiguous());
  if (!save)
    return launch_sequence_op(Op::GruSequence, {xw_op, w_op, b_op, h0_op}, {{T, B, H}, {B, H}},
                              reverse, x.device());
  return launch_sequence_op(Op::GruSequence, {xw_op, w_op, b_op, h0_op},
                            {{T, B, H}, {B, H}, {T, B, 4 * H}}, reverse, x.device());
}

struct GruLayer : torch::autograd::Function<GruLayer> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& h0,
                               const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                               const Tensor& b_hh, bool reverse) {
    std::vector<Tensor> r = gru_layer_forward(x, h0, w_ih, w_hh, b_ih, b_hh, reverse, true);
    ctx->save_for_backward({x, h0, w_ih, w_hh, r[0], r[2]});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["bias"] = b_ih.defined();
    return {r[0], r[1]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    check_no_double_backward("nn.GRU");
    const variable_list s = ctx->get_saved_variables();
    const Tensor &x = s[0], &h0 = s[1], &w_ih = s[2], &w_hh = s[3], &y = s[4];
    const bool reverse = ctx->saved_data["reverse"].toBool();
    const int64_t T = x.size(0), B = x.size(1), I = x.size(2), H = w_hh.size(1);
    const std::vector<Tensor> r = launch_sequence_op(
        Op::GruSequenceBackward,
        {grad_operand(grads[0]), grad_operand(grads[1]), tensor_operand(w_hh.contiguous()),
         tensor_operand(h0.contiguous()), tensor_operand(y), tensor_operand(s[5])},
        {{T, B, 3 * H}, {T, B, 3 * H}, {B, H}}, reverse, x.device());
    const Tensor &gi = r[0], &gh = r[1], &gh0 = r[2];
    const Tensor gi2 = gi.view({T * B, 3 * H}), gh2 = gh.view({T * B, 3 * H});
    Tensor dx, dw_ih, dw_hh, db_ih, db_hh;
    if (ctx->needs_input_grad(0)) dx = at::mm(gi2, w_ih).view({T, B, I});
    if (ctx->needs_input_grad(2)) dw_ih = at::mm(gi2.t(), x.reshape({T * B, I}));
    if (ctx->needs_input_grad(3))
      dw_hh = at::mm(gh2.t(), previous_states(h0, y, reverse).reshape({T * B, H}));
    if (ctx->saved_data["bias"].toBool()) {
      db_ih = gi2.sum(0);
      db_hh = gh2.sum(0);
    }
    return {dx, gh0, dw_ih, dw_hh, db_ih, db_hh, Tensor()};
  }
};

// Whether `t` is a plain neuron tensor: no subclass, mode, functionalization or
// functorch wrapper in the way (those trace or transform the composite instead)
// and no forward-mode gradient (the layer functions have no forward derivative).
bool plain_device_tensor(const Tensor& t) {
  static const c10::DispatchKeySet wrappers(
      {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
       c10::DispatchKey::Functionalize, c10::DispatchKey::FuncTorchBatched,
       c10::DispatchKey::FuncTorchGradWrapper});
  return t.defined() && t.device().is_privateuseone() && t.layout() == at::kStrided &&
         !t.key_set().has_any(wrappers) && !t._fw_grad(/*level=*/0).defined();
}

// Whether the whole-sequence path takes this call (OPENNEURON_RNN_SEQUENCE=0: never):
// plain neuron tensors of one float dtype, a 3-D non-empty input, states of the
// hidden size (LSTM: h and c alike, which proj_size breaks), the parameter count the
// flags imply.
bool whole_sequence_applies(const Tensor& input, at::TensorList states, at::TensorList params,
                            bool has_biases, int64_t num_layers, bool bidirectional) {
  static const bool enabled = [] {
    const char* v = std::getenv("OPENNEURON_RNN_SEQUENCE");
    return v == nullptr || std::string_view(v) != "0";
  }();
  if (!enabled || c10::impl::TorchDispatchModeTLS::stack_len() > 0) return false;
  const auto dtype = input.scalar_type();
  if (!is_half_or_float(dtype) || input.dim() != 3 || input.numel() == 0) return false;
  for (const Tensor& h : states)
    if (!plain_device_tensor(h) || h.scalar_type() != dtype || h.dim() != 3 || h.size(2) == 0 ||
        h.sizes() != states[0].sizes())
      return false;
  const int64_t per = has_biases ? 4 : 2, dirs = bidirectional ? 2 : 1;
  if (static_cast<int64_t>(params.size()) != num_layers * dirs * per) return false;
  if (!plain_device_tensor(input)) return false;
  for (const Tensor& p : params)
    if (!plain_device_tensor(p) || p.scalar_type() != dtype) return false;
  return true;
}

Tensor to_float(const Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// The layers both nn.LSTM and nn.GRU run: `layer(input, index, reverse)` runs one
// layer and direction (index = layer * directions + direction) on a float32 [T, B, I]
// input and returns its y; directions' outputs are concatenated, with dropout between
// layers in training, as PyTorch's composite does. Returns the last layer's output
// in the caller's layout.
template <class Layer>
Tensor run_layers(const Tensor& input, int64_t num_layers, double dropout, bool train,
                  bool bidirectional, bool batch_first, Layer&& layer) {
  const int64_t dirs = bidirectional ? 2 : 1;
  Tensor layer_in = to_float(batch_first ? input.transpose(0, 1) : input).contiguous();
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> ys;
    for (int64_t d = 0; d < dirs; ++d) ys.push_back(layer(layer_in, l * dirs + d, d == 1));
    layer_in = dirs == 2 ? at::cat(ys, 2) : ys[0];
    if (dropout > 0 && train && l + 1 < num_layers)
      layer_in = at::dropout(layer_in, dropout, train);
  }
  return batch_first ? layer_in.transpose(0, 1) : layer_in;
}

// Whether a layer's call needs its autograd node (else it runs without saving).
bool wants_grad(const Tensor& x, std::initializer_list<const Tensor*> others) {
  if (!at::GradMode::is_enabled()) return false;
  if (x.requires_grad()) return true;
  for (const Tensor* t : others)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

// aten::lstm.input for neuron tensors. Half types compute in float32 (converted on
// the way in and out, so autograd sees the conversions).
std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, at::TensorList hx,
                                        at::TensorList params, bool has_biases, int64_t num_layers,
                                        double dropout, bool train, bool bidirectional,
                                        bool batch_first) {
  if (hx.size() != 2 ||
      !whole_sequence_applies(input, hx, params, has_biases, num_layers, bidirectional))
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train,
                            bidirectional, batch_first);
  const int64_t per = has_biases ? 4 : 2;
  const Tensor h_all = to_float(hx[0]), c_all = to_float(hx[1]);
  std::vector<Tensor> h_n, c_n;
  auto layer = [&](const Tensor& x, int64_t i, bool reverse) {
    const Tensor* w = params.data() + i * per;
    const Tensor w_ih = to_float(w[0]), w_hh = to_float(w[1]);
    const Tensor b_ih = has_biases ? to_float(w[2]) : Tensor();
    const Tensor b_hh = has_biases ? to_float(w[3]) : Tensor();
    const Tensor h0 = h_all[i], c0 = c_all[i];
    const variable_list r =
        wants_grad(x, {&h0, &c0, &w_ih, &w_hh, &b_ih, &b_hh})
            ? LstmLayer::apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse)
            : lstm_layer_forward(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, /*save=*/false);
    h_n.push_back(r[1]);
    c_n.push_back(r[2]);
    return r[0];
  };
  Tensor output = run_layers(input, num_layers, dropout, train, bidirectional, batch_first, layer);
  Tensor h = at::stack(h_n, 0), c = at::stack(c_n, 0);
  const auto dtype = input.scalar_type();
  if (dtype != at::kFloat) return {output.to(dtype), h.to(dtype), c.to(dtype)};
  return {output, h, c};
}

// aten::gru.input for neuron tensors, as lstm above.
std::tuple<Tensor, Tensor> gru(const Tensor& input, const Tensor& hx, at::TensorList params,
                               bool has_biases, int64_t num_layers, double dropout, bool train,
                               bool bidirectional, bool batch_first) {
  if (!whole_sequence_applies(input, {hx}, params, has_biases, num_layers, bidirectional))
    return at::native::gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                           batch_first);
  const int64_t per = has_biases ? 4 : 2;
  const Tensor h_all = to_float(hx);
  std::vector<Tensor> h_n;
  auto layer = [&](const Tensor& x, int64_t i, bool reverse) {
    const Tensor* w = params.data() + i * per;
    const Tensor w_ih = to_float(w[0]), w_hh = to_float(w[1]);
    const Tensor b_ih = has_biases ? to_float(w[2]) : Tensor();
    const Tensor b_hh = has_biases ? to_float(w[3]) : Tensor();
    const Tensor h0 = h_all[i];
    const variable_list r =
        wants_grad(x, {&h0, &w_ih, &w_hh, &b_ih, &b_hh})
            ? GruLayer::apply(x, h0, w_ih, w_hh, b_ih, b_hh, reverse)
            : gru_layer_forward(x, h0, w_ih, w_hh, b_ih, b_hh, reverse, /*save=*/false);
    h_n.push_back(r[1]);
    return r[0];
  };
  Tensor output = run_layers(input, num_layers, dropout, train, bidirectional, batch_first, layer);
  Tensor h = at::stack(h_n, 0);
  const auto dtype = input.scalar_type();
  if (dtype != at::kFloat) return {output.to(dtype), h.to(dtype)};
  return {output, h};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, lib) {
  lib.impl("lstm.input", lstm);
  lib.impl("gru.input", gru);
}

}  // namespace openneuron::bridge
