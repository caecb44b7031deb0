// The fused LSTM and GRU cell ops (lower_rnn.cpp). For a PrivateUse1 device,
// PyTorch's nn.LSTM / nn.GRU / LSTMCell / GRUCell compute the gate GEMMs with
// matmul and hand the pointwise rest to these ops, as on CUDA; they have no CPU
// kernel, so without them the RNN family could not run at all.
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeOps m(lib);
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

}  // namespace openneuron::bridge
