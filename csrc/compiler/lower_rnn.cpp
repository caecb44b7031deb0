// Lowering of the RNN cell ops (LstmCell, GruCell and their backward ops) to the
// rnn engine: one instruction per cell step; and of LstmSequence, GruSequence and
// their backward ops: one instruction per layer and direction. Operands must be
// contiguous and of one float dtype (the sequence ops: Float32), with the sizes
// graph.h gives.
#include "lowering.h"

namespace openneuron::compiler::detail {

namespace {

struct CellShape {
  kernels::RnnCellOp op;
  int nin, nout;
  // Columns of each operand in units of H (0: an [nH] bias vector, -1: unchecked).
  std::vector<int> in_cols, out_cols;
  std::vector<bool> optional;
};

CellShape shape_of(Op op) {
  using kernels::RnnCellOp;
  switch (op) {
    case Op::LstmCell:
      return {RnnCellOp::LstmCell, 5,         3,
              {4, 4, 1, 0, 0},     {1, 1, 4}, {false, false, false, true, true}};
    case Op::LstmCellBackward:
      return {RnnCellOp::LstmCellBackward,      5, 2, {1, 1, 1, 1, 4}, {4, 1},
              {true, true, false, false, false}};
    case Op::GruCell:
      return {RnnCellOp::GruCell, 5, 2, {3, 3, 1, 0, 0}, {1, 5}, {false, false, false, true, true}};
    default:
      return {RnnCellOp::GruCellBackward, 2, 3, {1, 5}, {3, 3, 1}, {false, false}};
  }
}

}  // namespace

void lower_rnn_cell(LowerCtx& ctx) {
  const CellShape s = shape_of(ctx.op());
  ctx.expect_counts(s.nin, s.nout);
  // B and H from the first [B, H] operand.
  const Ref* unit = nullptr;
  for (int k = 0; k < s.nout && !unit; ++k)
    if (s.out_cols[k] == 1) unit = &ctx.out(k);
  ctx.expect_tensor(*unit, "hidden state output");
  const TensorType& ut = unit->type;
  if (ut.ndim != 2) ctx.fail("hidden state must be [batch, hidden], got " + describe(ut));
  const int64_t B = ut.sizes[0], H = ut.sizes[1];
  const DType dtype = ut.dtype;
  kernels::RnnCellParams p;
  p.dtype = dtype;
  p.batch = B;
  p.hidden = H;
  p.op = s.op;
  ArgMap am;
  auto check = [&](const Ref& r, int cols, const std::string& what) {
    ctx.expect_tensor(r, what.c_str());
    const TensorType& t = r.type;
    if (t.dtype != dtype)
      ctx.fail(what + " has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(dtype));
    const bool ok = cols == 0 ? t.ndim == 1  // a bias: its length is checked below
                              : t.ndim == 2 && t.sizes[0] == B && t.sizes[1] == cols * H;
    if (!ok)
      ctx.fail(what + " has sizes " + describe(t) + " for batch " + std::to_string(B) +
               ", hidden " + std::to_string(H));
    if (!t.is_contiguous()) ctx.fail(what + " must be contiguous, got " + describe(t));
  };
  const int bias_cols = s.op == kernels::RnnCellOp::LstmCell ? 4 : 3;
  for (int k = 0; k < s.nin; ++k) {
    const Ref& r = ctx.in(k);
    if (r.is_none() && s.optional[k]) continue;
    const std::string what = "input " + std::to_string(k);
    check(r, s.in_cols[k], what);
    if (s.in_cols[k] == 0 && r.type.sizes[0] != bias_cols * H)
      ctx.fail(what + " (a bias) has sizes " + describe(r.type) + ", expected [" +
               std::to_string(bias_cols * H) + "]");
    p.in[k] = am.tensor(r);
  }
  const bool forward = s.op == kernels::RnnCellOp::LstmCell || s.op == kernels::RnnCellOp::GruCell;
  if (forward && ctx.in(3).is_none() != ctx.in(4).is_none())
    ctx.fail("input_bias and hidden_bias must both be given or both absent");
  for (int k = 0; k < s.nout; ++k) {
    check(ctx.out(k), s.out_cols[k], "output " + std::to_string(k));
    p.out[k] = am.tensor(ctx.out(k));
  }
  onrt_kernel_fn fn = kernels::rnn_cell_kernel(s.op, dtype);
  if (!fn) ctx.fail(std::string("unsupported dtype ") + dtype_name(dtype));
  if (B * H == 0) return;
  ctx.emit(op_name(ctx.op()), fn, p, am);
}

namespace {

// Checks `r` is a contiguous Float32 tensor of `sizes` and maps it; an absent
// optional operand maps to an absent TensorArg.
TensorArg sequence_operand(LowerCtx& ctx, ArgMap& am, const Ref& r, std::vector<int64_t> sizes,
                           const std::string& what, bool optional) {
  if (optional && r.is_none()) return TensorArg{};
  ctx.expect_tensor(r, what.c_str());
  const TensorType& t = r.type;
  bool ok = t.dtype == DType::Float32 && t.ndim == static_cast<int>(sizes.size());
  for (int d = 0; ok && d < t.ndim; ++d) ok = t.sizes[d] == sizes[d];
  if (!ok) {
    std::string want = "Float32 [";
    for (size_t d = 0; d < sizes.size(); ++d) want += (d ? ", " : "") + std::to_string(sizes[d]);
    ctx.fail(what + " is " + describe(t) + ", expected " + want + "]");
  }
  if (!t.is_contiguous()) ctx.fail(what + " must be contiguous, got " + describe(t));
  return am.tensor(r);
}

// Steps, batch and hidden size from a [T, B, gates*H] operand and w_hh [gates*H, H],
// and the direction attribute, into a sequence op's params.
template <class P>
void sequence_dims(LowerCtx& ctx, const Ref& seq, const char* seq_name, const Ref& w, int64_t gates,
                   P& p) {
  ctx.expect_tensor(seq, seq_name);
  ctx.expect_tensor(w, "w_hh");
  const TensorType &st = seq.type, &wt = w.type;
  const std::string g = std::to_string(gates);
  if (st.ndim != 3 || wt.ndim != 2 || wt.sizes[0] != gates * wt.sizes[1] ||
      st.sizes[2] != wt.sizes[0])
    ctx.fail(std::string(seq_name) + " [T, B, " + g + "H] and w_hh [" + g + "H, H] expected, got " +
             describe(st) + " and " + describe(wt));
  p.steps = st.sizes[0];
  p.batch = st.sizes[1];
  p.hidden = wt.sizes[1];
  p.reverse = ctx.attr(0, 0) != 0 ? 1 : 0;
}

}  // namespace

void lower_lstm_sequence(LowerCtx& ctx) {
  const bool saves = ctx.num_outputs() == 5;  // cells and gates, for a backward
  ctx.expect_counts(4, saves ? 5 : 3);
  kernels::LstmSequenceParams p;
  sequence_dims(ctx, ctx.in(0), "xw", ctx.in(1), 4, p);
  const int64_t T = p.steps, B = p.batch, H = p.hidden;
  ArgMap am;
  p.xw = sequence_operand(ctx, am, ctx.in(0), {T, B, 4 * H}, "xw", false);
  p.w_hh = sequence_operand(ctx, am, ctx.in(1), {4 * H, H}, "w_hh", false);
  p.h0 = sequence_operand(ctx, am, ctx.in(2), {B, H}, "h0", false);
  p.c0 = sequence_operand(ctx, am, ctx.in(3), {B, H}, "c0", false);
  p.y = sequence_operand(ctx, am, ctx.out(0), {T, B, H}, "y", false);
  p.h_n = sequence_operand(ctx, am, ctx.out(1), {B, H}, "h_n", false);
  p.c_n = sequence_operand(ctx, am, ctx.out(2), {B, H}, "c_n", false);
  if (saves) {
    p.cells = sequence_operand(ctx, am, ctx.out(3), {T, B, H}, "cells", false);
    p.gates = sequence_operand(ctx, am, ctx.out(4), {T, B, 4 * H}, "gates", false);
  }
  if (B * H == 0) return;
  ctx.emit(op_name(ctx.op()), &kernels::lstm_sequence, p, am);
}

void lower_lstm_sequence_backward(LowerCtx& ctx) {
  ctx.expect_counts(7, 3);
  kernels::LstmSequenceBackwardParams p;
  sequence_dims(ctx, ctx.in(6), "gates", ctx.in(3), 4, p);
  const int64_t T = p.steps, B = p.batch, H = p.hidden;
  ArgMap am;
  p.grad_y = sequence_operand(ctx, am, ctx.in(0), {T, B, H}, "grad_y", true);
  p.grad_h_n = sequence_operand(ctx, am, ctx.in(1), {B, H}, "grad_h_n", true);
  p.grad_c_n = sequence_operand(ctx, am, ctx.in(2), {B, H}, "grad_c_n", true);
  p.w_hh = sequence_operand(ctx, am, ctx.in(3), {4 * H, H}, "w_hh", false);
  p.c0 = sequence_operand(ctx, am, ctx.in(4), {B, H}, "c0", false);
  p.cells = sequence_operand(ctx, am, ctx.in(5), {T, B, H}, "cells", false);
  p.gates = sequence_operand(ctx, am, ctx.in(6), {T, B, 4 * H}, "gates", false);
  p.grad_gates = sequence_operand(ctx, am, ctx.out(0), {T, B, 4 * H}, "grad_gates", false);
  p.grad_h0 = sequence_operand(ctx, am, ctx.out(1), {B, H}, "grad_h0", false);
  p.grad_c0 = sequence_operand(ctx, am, ctx.out(2), {B, H}, "grad_c0", false);
  if (B * H == 0) return;
  ctx.emit(op_name(ctx.op()), &kernels::lstm_sequence_backward, p, am);
}

void lower_gru_sequence(LowerCtx& ctx) {
  const bool saves = ctx.num_outputs() == 3;  // gates, for a backward
  ctx.expect_counts(4, saves ? 3 : 2);
  kernels::GruSequenceParams p;
  sequence_dims(ctx, ctx.in(0), "xw", ctx.in(1), 3, p);
  const int64_t T = p.steps, B = p.batch, H = p.hidden;
  ArgMap am;
  p.xw = sequence_operand(ctx, am, ctx.in(0), {T, B, 3 * H}, "xw", false);
  p.w_hh = sequence_operand(ctx, am, ctx.in(1), {3 * H, H}, "w_hh", false);
  p.b_hh = sequence_operand(ctx, am, ctx.in(2), {3 * H}, "b_hh", true);
  p.h0 = sequence_operand(ctx, am, ctx.in(3), {B, H}, "h0", false);
  p.y = sequence_operand(ctx, am, ctx.out(0), {T, B, H}, "y", false);
  p.h_n = sequence_operand(ctx, am, ctx.out(1), {B, H}, "h_n", false);
  if (saves) p.gates = sequence_operand(ctx, am, ctx.out(2), {T, B, 4 * H}, "gates", false);
  if (T * B * H == 0) return;
  ctx.emit(op_name(ctx.op()), &kernels::gru_sequence, p, am);
}

void lower_gru_sequence_backward(LowerCtx& ctx) {
  ctx.expect_counts(6, 3);
  ctx.expect_tensor(ctx.in(5), "gates");
  kernels::GruSequenceBackwardParams p;
  // gates is [T, B, 4H]: its T and B with w_hh's H.
  sequence_dims(ctx, ctx.out(0), "grad_input_gates", ctx.in(2), 3, p);
  const int64_t T = p.steps, B = p.batch, H = p.hidden;
  ArgMap am;
  p.grad_y = sequence_operand(ctx, am, ctx.in(0), {T, B, H}, "grad_y", true);
  p.grad_h_n = sequence_operand(ctx, am, ctx.in(1), {B, H}, "grad_h_n", true);
  p.w_hh = sequence_operand(ctx, am, ctx.in(2), {3 * H, H}, "w_hh", false);
  p.h0 = sequence_operand(ctx, am, ctx.in(3), {B, H}, "h0", false);
  p.y = sequence_operand(ctx, am, ctx.in(4), {T, B, H}, "y", false);
  p.gates = sequence_operand(ctx, am, ctx.in(5), {T, B, 4 * H}, "gates", false);
  p.grad_input_gates =
      sequence_operand(ctx, am, ctx.out(0), {T, B, 3 * H}, "grad_input_gates", false);
  p.grad_hidden_gates =
      sequence_operand(ctx, am, ctx.out(1), {T, B, 3 * H}, "grad_hidden_gates", false);
  p.grad_h0 = sequence_operand(ctx, am, ctx.out(2), {B, H}, "grad_h0", false);
  if (T * B * H == 0) return;
  ctx.emit(op_name(ctx.op()), &kernels::gru_sequence_backward, p, am);
}

}  // namespace openneuron::compiler::detail
