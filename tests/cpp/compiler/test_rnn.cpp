// The RNN cell ops against a double-precision reference of PyTorch's fused cell
// formulas, forward and backward, with and without biases; bad shapes are compile
// errors.
#include "test_util.h"

namespace {

using namespace ontest;

double sig(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Rnn, LstmCellForwardAndBackward) {
  const int64_t B = 3, H = 5;
  for (bool bias : {true, false}) {
    auto ig = HostTensor::make(DType::Float32, {B, 4 * H}).randomize(1);
    auto hg = HostTensor::make(DType::Float32, {B, 4 * H}).randomize(2);
    auto cx = HostTensor::make(DType::Float32, {B, H}).randomize(3);
    auto ib = HostTensor::make(DType::Float32, {4 * H}).randomize(4);
    auto hb = HostTensor::make(DType::Float32, {4 * H}).randomize(5);
    auto hy = HostTensor::make(DType::Float32, {B, H}),
         cy = HostTensor::make(DType::Float32, {B, H});
    auto ws = HostTensor::make(DType::Float32, {B, 4 * H});
    const ValueType none = ValueType::none();
    run_op(Op::LstmCell,
           {ig.vt(), hg.vt(), cx.vt(), bias ? ib.vt() : none, bias ? hb.vt() : none, hy.vt(),
            cy.vt(), ws.vt()},
           5,
           {ig.arg(), hg.arg(), cx.arg(), bias ? ib.arg() : onrt_arg{},
            bias ? hb.arg() : onrt_arg{}, hy.arg(), cy.arg(), ws.arg()});
    auto gh = HostTensor::make(DType::Float32, {B, H}).randomize(6);
    auto gc = HostTensor::make(DType::Float32, {B, H}).randomize(7);
    auto gg = HostTensor::make(DType::Float32, {B, 4 * H}),
         gcx = HostTensor::make(DType::Float32, {B, H});
    run_op(Op::LstmCellBackward, {gh.vt(), gc.vt(), cx.vt(), cy.vt(), ws.vt(), gg.vt(), gcx.vt()},
           5, {gh.arg(), gc.arg(), cx.arg(), cy.arg(), ws.arg(), gg.arg(), gcx.arg()});
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        double g[4];
        for (int k = 0; k < 4; ++k) {
          const int64_t at = b * 4 * H + k * H + j;
          g[k] = ig.get(at) + hg.get(at) + (bias ? ib.get(k * H + j) + hb.get(k * H + j) : 0.0);
        }
        const double i = sig(g[0]), f = sig(g[1]), c = std::tanh(g[2]), o = sig(g[3]);
        const double c1 = f * cx.get(b * H + j) + i * c;
        EXPECT_TRUE(near_rel(cy.get(b * H + j), c1, 1e-5, 1e-6));
        EXPECT_TRUE(near_rel(hy.get(b * H + j), o * std::tanh(c1), 1e-5, 1e-6));
        EXPECT_TRUE(near_rel(ws.get(b * 4 * H + 3 * H + j), o, 1e-6, 1e-7));
        const double t = std::tanh(cy.get(b * H + j));
        const double go = gh.get(b * H + j);
        const double dc = go * o * (1 - t * t) + gc.get(b * H + j);
        const double want[4] = {dc * c * (1 - i) * i, dc * cx.get(b * H + j) * (1 - f) * f,
                                dc * i * (1 - c * c), go * t * (1 - o) * o};
        for (int k = 0; k < 4; ++k)
          EXPECT_TRUE(near_rel(gg.get(b * 4 * H + k * H + j), want[k], 1e-4, 1e-6)) << k;
        EXPECT_TRUE(near_rel(gcx.get(b * H + j), dc * f, 1e-4, 1e-6));
      }
    }
  }
}

TEST(Rnn, GruCellForwardAndBackward) {
  const int64_t B = 2, H = 4;
  auto ig = HostTensor::make(DType::Float32, {B, 3 * H}).randomize(1);
  auto hg = HostTensor::make(DType::Float32, {B, 3 * H}).randomize(2);
  auto hx = HostTensor::make(DType::Float32, {B, H}).randomize(3);
  auto ib = HostTensor::make(DType::Float32, {3 * H}).randomize(4);
  auto hb = HostTensor::make(DType::Float32, {3 * H}).randomize(5);
  auto hy = HostTensor::make(DType::Float32, {B, H}),
       ws = HostTensor::make(DType::Float32, {B, 5 * H});
  run_op(Op::GruCell, {ig.vt(), hg.vt(), hx.vt(), ib.vt(), hb.vt(), hy.vt(), ws.vt()}, 5,
         {ig.arg(), hg.arg(), hx.arg(), ib.arg(), hb.arg(), hy.arg(), ws.arg()});
  auto go = HostTensor::make(DType::Float32, {B, H}).randomize(6);
  auto gi = HostTensor::make(DType::Float32, {B, 3 * H}),
       ghd = HostTensor::make(DType::Float32, {B, 3 * H});
  auto ghx = HostTensor::make(DType::Float32, {B, H});
  run_op(Op::GruCellBackward, {go.vt(), ws.vt(), gi.vt(), ghd.vt(), ghx.vt()}, 2,
         {go.arg(), ws.arg(), gi.arg(), ghd.arg(), ghx.arg()});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < H; ++j) {
      auto gate = [&](const HostTensor& t, int k) { return t.get(b * 3 * H + k * H + j); };
      const double r = sig(gate(ig, 0) + gate(hg, 0) + ib.get(j) + hb.get(j));
      const double z = sig(gate(ig, 1) + gate(hg, 1) + ib.get(H + j) + hb.get(H + j));
      const double hn = gate(hg, 2) + hb.get(2 * H + j);
      const double n = std::tanh(gate(ig, 2) + ib.get(2 * H + j) + r * hn);
      const double h = hx.get(b * H + j);
      EXPECT_TRUE(near_rel(hy.get(b * H + j), n + z * (h - n), 1e-5, 1e-6));
      const double g = go.get(b * H + j);
      const double dn = g * (1 - z) * (1 - n * n), dr = dn * hn * (1 - r) * r;
      const double dz = g * (h - n) * (1 - z) * z;
      EXPECT_TRUE(near_rel(gate(gi, 0), dr, 1e-4, 1e-6));
      EXPECT_TRUE(near_rel(gate(gi, 1), dz, 1e-4, 1e-6));
      EXPECT_TRUE(near_rel(gate(gi, 2), dn, 1e-4, 1e-6));
      EXPECT_TRUE(near_rel(gate(ghd, 2), dn * r, 1e-4, 1e-6));
      EXPECT_TRUE(near_rel(ghx.get(b * H + j), g * z, 1e-5, 1e-6));
    }
  }
}

TEST(Rnn, BadShapesAreCompileErrors) {
  const auto g = ValueType::of(make_type(DType::Float32, {2, 8}));
  const auto h = ValueType::of(make_type(DType::Float32, {2, 3}));  // 8 / 4 = 2, not 3
  const auto w = ValueType::of(make_type(DType::Float32, {2, 12}));
  EXPECT_THROW(compile(Graph::single_op(
                   Op::LstmCell, {g, g, h, ValueType::none(), ValueType::none(), h, h, w}, 5)),
               CompileError);
  const auto ints = ValueType::of(make_type(DType::Int32, {2, 2}));
  const auto gi = ValueType::of(make_type(DType::Int32, {2, 8}));
  EXPECT_THROW(
      compile(Graph::single_op(
          Op::LstmCell, {gi, gi, ints, ValueType::none(), ValueType::none(), ints, ints, gi}, 5)),
      CompileError);
}

}  // namespace
