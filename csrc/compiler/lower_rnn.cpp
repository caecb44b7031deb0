// Lowering of the RNN cell ops (LstmCell, GruCell and their backward ops) to the
// rnn engine: one instruction per cell step; operands must be contiguous and of
// one float dtype, with the sizes graph.h gives.
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

}  // namespace openneuron::compiler::detail
