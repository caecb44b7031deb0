// The RNN cell ops against a double-precision reference of PyTorch's fused cell
// formulas, forward and backward, with and without biases; the whole-sequence LSTM
// and GRU ops against the same cells run step by step and backpropagated through
// time, in both directions; bad shapes are compile errors.
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

// y, the cells and the gates of an LSTM over xw (the input projections), in double.
struct LstmReference {
  int64_t T, B, H;
  bool reverse;
  std::vector<double> y, c, g;  // [T,B,H], [T,B,H], [T,B,4H] (activated)
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }

  LstmReference(const HostTensor& xw, const HostTensor& w, const HostTensor& h0,
                const HostTensor& c0, int64_t T_, int64_t B_, int64_t H_, bool rev)
      : T(T_), B(B_), H(H_), reverse(rev), y(T * B * H), c(T * B * H), g(T * B * 4 * H) {
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = time(s), tp = s ? time(s - 1) : -1;
      for (int64_t b = 0; b < B; ++b) {
        auto hp = [&](int64_t k) { return tp < 0 ? h0.get(b * H + k) : y[(tp * B + b) * H + k]; };
        for (int64_t q = 0; q < 4 * H; ++q) {
          double v = xw.get((t * B + b) * 4 * H + q);
          for (int64_t k = 0; k < H; ++k) v += hp(k) * w.get(q * H + k);
          g[(t * B + b) * 4 * H + q] = q / H == 2 ? std::tanh(v) : sig(v);
        }
        for (int64_t j = 0; j < H; ++j) {
          const double* gt = &g[(t * B + b) * 4 * H];
          const double cp = tp < 0 ? c0.get(b * H + j) : c[(tp * B + b) * H + j];
          const double cn = gt[H + j] * cp + gt[j] * gt[2 * H + j];
          c[(t * B + b) * H + j] = cn;
          y[(t * B + b) * H + j] = gt[3 * H + j] * std::tanh(cn);
        }
      }
    }
  }
};

TEST(Rnn, LstmSequenceForwardAndBackwardThroughTime) {
  // 70 units: two blocks of hidden units when the pool has two threads or more.
  const int64_t T = 4, B = 2, H = 70;
  for (bool reverse : {false, true}) {
    auto xw = HostTensor::make(DType::Float32, {T, B, 4 * H}).randomize(11);
    auto w = HostTensor::make(DType::Float32, {4 * H, H}).randomize(12);
    for (int64_t i = 0; i < 4 * H * H; ++i) w.set(i, w.get(i) * 0.1);  // keep gates unsaturated
    auto h0 = HostTensor::make(DType::Float32, {B, H}).randomize(13);
    auto c0 = HostTensor::make(DType::Float32, {B, H}).randomize(14);
    auto y = HostTensor::make(DType::Float32, {T, B, H}),
         hn = HostTensor::make(DType::Float32, {B, H}),
         cn = HostTensor::make(DType::Float32, {B, H}),
         cells = HostTensor::make(DType::Float32, {T, B, H}),
         gates = HostTensor::make(DType::Float32, {T, B, 4 * H});
    run_op(Op::LstmSequence,
           {xw.vt(), w.vt(), h0.vt(), c0.vt(), y.vt(), hn.vt(), cn.vt(), cells.vt(), gates.vt()}, 4,
           {xw.arg(), w.arg(), h0.arg(), c0.arg(), y.arg(), hn.arg(), cn.arg(), cells.arg(),
            gates.arg()},
           {reverse ? 1 : 0});
    const LstmReference ref(xw, w, h0, c0, T, B, H, reverse);
    for (int64_t i = 0; i < T * B * H; ++i) {
      ASSERT_TRUE(near_rel(y.get(i), ref.y[i], 1e-5, 1e-6)) << i;
      ASSERT_TRUE(near_rel(cells.get(i), ref.c[i], 1e-5, 1e-6)) << i;
    }
    for (int64_t i = 0; i < T * B * 4 * H; ++i)
      ASSERT_TRUE(near_rel(gates.get(i), ref.g[i], 1e-5, 1e-6));
    const int64_t last = ref.time(T - 1);
    for (int64_t i = 0; i < B * H; ++i) {
      EXPECT_EQ(hn.get(i), y.get(last * B * H + i));
      EXPECT_EQ(cn.get(i), cells.get(last * B * H + i));
    }
    // Backward through time in double, from gradients on y, h_n and c_n.
    auto gy = HostTensor::make(DType::Float32, {T, B, H}).randomize(15);
    auto ghn = HostTensor::make(DType::Float32, {B, H}).randomize(16);
    auto gcn = HostTensor::make(DType::Float32, {B, H}).randomize(17);
    auto gg = HostTensor::make(DType::Float32, {T, B, 4 * H}),
         gh0 = HostTensor::make(DType::Float32, {B, H}),
         gc0 = HostTensor::make(DType::Float32, {B, H});
    run_op(Op::LstmSequenceBackward,
           {gy.vt(), ghn.vt(), gcn.vt(), w.vt(), c0.vt(), cells.vt(), gates.vt(), gg.vt(), gh0.vt(),
            gc0.vt()},
           7,
           {gy.arg(), ghn.arg(), gcn.arg(), w.arg(), c0.arg(), cells.arg(), gates.arg(), gg.arg(),
            gh0.arg(), gc0.arg()},
           {reverse ? 1 : 0});
    std::vector<double> dh(B * H), dc(B * H), want(T * B * 4 * H);
    for (int64_t i = 0; i < B * H; ++i) {
      dh[i] = ghn.get(i);
      dc[i] = gcn.get(i);
    }
    for (int64_t s = T - 1; s >= 0; --s) {
      const int64_t t = ref.time(s), tp = s ? ref.time(s - 1) : -1;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          const double* gt = &ref.g[(t * B + b) * 4 * H];
          const double i_ = gt[j], f = gt[H + j], g = gt[2 * H + j], o = gt[3 * H + j];
          const double tc = std::tanh(ref.c[(t * B + b) * H + j]);
          const double cp = tp < 0 ? c0.get(b * H + j) : ref.c[(tp * B + b) * H + j];
          const double dht = dh[b * H + j] + gy.get((t * B + b) * H + j);
          const double dct = dc[b * H + j] + dht * o * (1 - tc * tc);
          double* out = &want[(t * B + b) * 4 * H];
          out[j] = dct * g * i_ * (1 - i_);
          out[H + j] = dct * cp * f * (1 - f);
          out[2 * H + j] = dct * i_ * (1 - g * g);
          out[3 * H + j] = dht * tc * o * (1 - o);
          dc[b * H + j] = dct * f;
        }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < H; ++k) {
          double v = 0;
          for (int64_t q = 0; q < 4 * H; ++q) v += want[(t * B + b) * 4 * H + q] * w.get(q * H + k);
          dh[b * H + k] = v;
        }
    }
    for (int64_t i = 0; i < T * B * 4 * H; ++i)
      ASSERT_TRUE(near_rel(gg.get(i), want[i], 1e-4, 1e-5)) << i;
    for (int64_t i = 0; i < B * H; ++i) {
      EXPECT_TRUE(near_rel(gh0.get(i), dh[i], 1e-4, 1e-5)) << i;
      EXPECT_TRUE(near_rel(gc0.get(i), dc[i], 1e-4, 1e-5)) << i;
    }
  }
}

TEST(Rnn, GruSequenceForwardAndBackwardThroughTime) {
  const int64_t T = 4, B = 2, H = 70;
  for (bool reverse : {false, true}) {
    auto xw = HostTensor::make(DType::Float32, {T, B, 3 * H}).randomize(21);
    auto w = HostTensor::make(DType::Float32, {3 * H, H}).randomize(22);
    for (int64_t i = 0; i < 3 * H * H; ++i) w.set(i, w.get(i) * 0.1);  // keep gates unsaturated
    auto bh = HostTensor::make(DType::Float32, {3 * H}).randomize(23);
    auto h0 = HostTensor::make(DType::Float32, {B, H}).randomize(24);
    auto y = HostTensor::make(DType::Float32, {T, B, H}),
         hn = HostTensor::make(DType::Float32, {B, H}),
         gates = HostTensor::make(DType::Float32, {T, B, 4 * H});
    run_op(Op::GruSequence, {xw.vt(), w.vt(), bh.vt(), h0.vt(), y.vt(), hn.vt(), gates.vt()}, 4,
           {xw.arg(), w.arg(), bh.arg(), h0.arg(), y.arg(), hn.arg(), gates.arg()},
           {reverse ? 1 : 0});
    // Reference in double: r, z, n, h_n per step.
    auto time = [&](int64_t s) { return reverse ? T - 1 - s : s; };
    std::vector<double> ry(T * B * H), rg(T * B * 4 * H);
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = time(s), tp = s ? time(s - 1) : -1;
      for (int64_t b = 0; b < B; ++b) {
        auto hp = [&](int64_t k) { return tp < 0 ? h0.get(b * H + k) : ry[(tp * B + b) * H + k]; };
        for (int64_t j = 0; j < H; ++j) {
          double hg[3];
          for (int q = 0; q < 3; ++q) {
            hg[q] = bh.get(q * H + j);
            for (int64_t k = 0; k < H; ++k) hg[q] += hp(k) * w.get((q * H + j) * H + k);
          }
          auto x = [&](int q) { return xw.get((t * B + b) * 3 * H + q * H + j); };
          const double r = sig(x(0) + hg[0]), z = sig(x(1) + hg[1]);
          const double n = std::tanh(x(2) + r * hg[2]);
          ry[(t * B + b) * H + j] = n + z * (hp(j) - n);
          double* g = &rg[(t * B + b) * 4 * H];
          g[j] = r;
          g[H + j] = z;
          g[2 * H + j] = n;
          g[3 * H + j] = hg[2];
        }
      }
    }
    for (int64_t i = 0; i < T * B * H; ++i) ASSERT_TRUE(near_rel(y.get(i), ry[i], 1e-5, 1e-6)) << i;
    for (int64_t i = 0; i < T * B * 4 * H; ++i)
      ASSERT_TRUE(near_rel(gates.get(i), rg[i], 1e-5, 1e-5)) << i;
    for (int64_t i = 0; i < B * H; ++i) EXPECT_EQ(hn.get(i), y.get(time(T - 1) * B * H + i));
    // Backward through time in double.
    auto gy = HostTensor::make(DType::Float32, {T, B, H}).randomize(25);
    auto ghn = HostTensor::make(DType::Float32, {B, H}).randomize(26);
    auto gi = HostTensor::make(DType::Float32, {T, B, 3 * H}),
         ghd = HostTensor::make(DType::Float32, {T, B, 3 * H}),
         gh0 = HostTensor::make(DType::Float32, {B, H});
    run_op(Op::GruSequenceBackward,
           {gy.vt(), ghn.vt(), w.vt(), h0.vt(), y.vt(), gates.vt(), gi.vt(), ghd.vt(), gh0.vt()}, 6,
           {gy.arg(), ghn.arg(), w.arg(), h0.arg(), y.arg(), gates.arg(), gi.arg(), ghd.arg(),
            gh0.arg()},
           {reverse ? 1 : 0});
    std::vector<double> dh(B * H), wi(T * B * 3 * H), wh(T * B * 3 * H);
    for (int64_t i = 0; i < B * H; ++i) dh[i] = ghn.get(i);
    for (int64_t s = T - 1; s >= 0; --s) {
      const int64_t t = time(s), tp = s ? time(s - 1) : -1;
      std::vector<double> next(B * H);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          const double* g = &rg[(t * B + b) * 4 * H];
          const double r = g[j], z = g[H + j], n = g[2 * H + j], hn_ = g[3 * H + j];
          const double hp = tp < 0 ? h0.get(b * H + j) : ry[(tp * B + b) * H + j];
          const double d = dh[b * H + j] + gy.get((t * B + b) * H + j);
          const double gz = d * (hp - n) * (1 - z) * z, gn = d * (1 - z) * (1 - n * n);
          const double gr = gn * hn_ * (1 - r) * r;
          double *oi = &wi[(t * B + b) * 3 * H], *oh = &wh[(t * B + b) * 3 * H];
          oi[j] = oh[j] = gr;
          oi[H + j] = oh[H + j] = gz;
          oi[2 * H + j] = gn;
          oh[2 * H + j] = gn * r;
          next[b * H + j] = d * z;
        }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < H; ++k)
          for (int64_t q = 0; q < 3 * H; ++q)
            next[b * H + k] += wh[(t * B + b) * 3 * H + q] * w.get(q * H + k);
      dh = next;
    }
    for (int64_t i = 0; i < T * B * 3 * H; ++i) {
      ASSERT_TRUE(near_rel(gi.get(i), wi[i], 1e-4, 1e-5)) << i;
      ASSERT_TRUE(near_rel(ghd.get(i), wh[i], 1e-4, 1e-5)) << i;
    }
    for (int64_t i = 0; i < B * H; ++i) EXPECT_TRUE(near_rel(gh0.get(i), dh[i], 1e-4, 1e-5)) << i;
  }
}

TEST(Rnn, BadShapesAreCompileErrors) {
  const auto g = ValueType::of(make_type(DType::Float32, {2, 8}));
  const auto h = ValueType::of(make_type(DType::Float32, {2, 3}));  // 8 / 4 = 2, not 3
  const auto w = ValueType::of(make_type(DType::Float32, {2, 12}));
  EXPECT_THROW(compile(Graph::single_op(
                   Op::LstmCell, {g, g, h, ValueType::none(), ValueType::none(), h, h, w}, 5)),
               CompileError);
  // The sequence op is Float32 with w_hh [4H, H].
  const auto xw = ValueType::of(make_type(DType::Float32, {3, 2, 8}));
  const auto whh = ValueType::of(make_type(DType::Float32, {8, 3}));
  const auto s23 = ValueType::of(make_type(DType::Float32, {2, 3}));
  const auto y = ValueType::of(make_type(DType::Float32, {3, 2, 3}));
  EXPECT_THROW(compile(Graph::single_op(Op::LstmSequence, {xw, whh, s23, s23, y, s23, s23}, 4)),
               CompileError);
  const auto h16 = ValueType::of(make_type(DType::BFloat16, {3, 2, 8}));
  const auto w16 = ValueType::of(make_type(DType::BFloat16, {8, 2}));
  const auto s16 = ValueType::of(make_type(DType::BFloat16, {2, 2}));
  const auto y16 = ValueType::of(make_type(DType::BFloat16, {3, 2, 2}));
  EXPECT_THROW(compile(Graph::single_op(Op::LstmSequence, {h16, w16, s16, s16, y16, s16, s16}, 4)),
               CompileError);
  const auto ints = ValueType::of(make_type(DType::Int32, {2, 2}));
  const auto gi = ValueType::of(make_type(DType::Int32, {2, 8}));
  EXPECT_THROW(
      compile(Graph::single_op(
          Op::LstmCell, {gi, gi, ints, ValueType::none(), ValueType::none(), ints, ints, gi}, 5)),
      CompileError);
}

}  // namespace
