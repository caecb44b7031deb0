// Unary, binary, comparison, ternary and elementwise backward ops against
// double-precision reference loops.
#include <limits>

#include "test_util.h"

namespace ontest {
namespace {

TEST(Elementwise, AddAlphaContiguousF32) {
  auto a = HostTensor::make(DType::Float32, {3, 7}).randomize(1);
  auto b = HostTensor::make(DType::Float32, {3, 7}).randomize(2);
  auto out = HostTensor::make(DType::Float32, {3, 7});
  run_op(Op::Add, {a.vt(), b.vt(), ValueType::scalar_float(), out.vt()}, 3,
         {a.arg(), b.arg(), farg(2.5), out.arg()});
  std::vector<double> ref(out.numel());
  for (int64_t i = 0; i < out.numel(); ++i) ref[i] = a.get(i) + 2.5 * b.get(i);
  EXPECT_ALL_NEAR(out, ref, 1e-6, 0);
}

TEST(Elementwise, SubWithoutAlphaAndBroadcastRow) {
  auto a = HostTensor::make(DType::Float32, {4, 5}).randomize(3);
  auto row = HostTensor::make(DType::Float32, {5}).randomize(4);
  HostTensor b = row;
  b.type = make_type(DType::Float32, {4, 5}, {0, 1});  // expanded view
  auto out = HostTensor::make(DType::Float32, {4, 5});
  run_op(Op::Sub, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  for (int64_t i = 0; i < 20; ++i) EXPECT_FLOAT_EQ(out.get(i), float(a.get(i) - row.get(i % 5)));
}

TEST(Elementwise, MulTransposedAndColumnBroadcast) {
  // a is a transposed view, b broadcasts along the inner dim (stride 0).
  auto at = HostTensor::make(DType::Float32, {6, 4}).randomize(5);
  HostTensor a = at;
  a.type = make_type(DType::Float32, {4, 6}, {1, 4});
  auto col = HostTensor::make(DType::Float32, {4}).randomize(6);
  HostTensor b = col;
  b.type = make_type(DType::Float32, {4, 6}, {1, 0});
  auto out = HostTensor::make(DType::Float32, {4, 6});
  run_op(Op::Mul, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_FLOAT_EQ(out.get(i * 6 + j), float(at.get(j * 4 + i) * col.get(i)));
}

TEST(Elementwise, NonContiguousOutputAndLargeParallel) {
  // 300x400 = 120K elements: above the parallel threshold; output transposed.
  const int64_t M = 300, N = 400;
  auto a = HostTensor::make(DType::Float32, {M, N}).randomize(7);
  auto b = HostTensor::make(DType::Float32, {M, N}).randomize(8);
  auto out = HostTensor::make(DType::Float32, {M, N}, {1, M});
  run_op(Op::Div, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  for (int64_t i = 0; i < M * N; i += 997) EXPECT_FLOAT_EQ(out.get(i), float(a.get(i)) / float(b.get(i)));
  auto out2 = HostTensor::make(DType::Float32, {M, N});
  run_op(Op::Add, {a.vt(), b.vt(), out2.vt()}, 2, {a.arg(), b.arg(), out2.arg()});
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(out2.get(i), float(a.get(i)) + float(b.get(i)));
}

TEST(Elementwise, Bf16ScalarOperandIsNotRoundedFirst) {
  // PyTorch multiplies in float by float(0.1), then rounds once to bf16.
  auto a = HostTensor::make(DType::BFloat16, {64}).randomize(9, -100, 100);
  auto out = HostTensor::make(DType::BFloat16, {64});
  run_op(Op::Mul, {a.vt(), ValueType::scalar_float(), out.vt()}, 2, {a.arg(), farg(0.1), out.arg()});
  for (int64_t i = 0; i < 64; ++i) {
    const float want = static_cast<float>(a.get(i)) * static_cast<float>(0.1);
    EXPECT_EQ(out.get(i), round_to(DType::BFloat16, want)) << i;
  }
}

TEST(Elementwise, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1+2^-7: ties to even (1).
  auto a = HostTensor::make(DType::Float32, {2});
  a.set(0, 1.0);
  a.set(1, 1.0 + 3.0 / 256);  // halfway between 1+2^-7 and 1+2^-6: to even (1+2^-6)
  auto b = HostTensor::make(DType::Float32, {2});
  b.set(0, 1.0 / 256);
  b.set(1, 0);
  auto out = HostTensor::make(DType::BFloat16, {2});
  // Copy a+b (computed in f32) into bf16 through a two-node graph.
  Graph g;
  ValueId va = g.add_input(a.vt()), vb = g.add_input(b.vt());
  ValueId t = g.add_value(ValueType::of(make_type(DType::Float32, {2})));
  ValueId vo = g.add_value(out.vt());
  g.add_node(Op::Add, {va, vb}, {t});
  g.add_node(Op::Copy, {t}, {vo});
  g.mark_output(vo);
  ASSERT_EQ(run_graph(g, {a.arg(), b.arg(), out.arg()}), "");
  EXPECT_EQ(out.get(0), 1.0);
  EXPECT_EQ(out.get(1), 1.0 + 1.0 / 64);
}

TEST(Elementwise, IntegerArithmeticWraps) {
  auto a = HostTensor::make(DType::Int32, {3});
  auto b = HostTensor::make(DType::Int32, {3});
  a.set(0, 2147483647); b.set(0, 1);
  a.set(1, -7); b.set(1, 3);
  a.set(2, 100); b.set(2, -30);
  auto out = HostTensor::make(DType::Int32, {3});
  run_op(Op::Add, {a.vt(), b.vt(), ValueType::scalar_int(), out.vt()}, 3,
         {a.arg(), b.arg(), iarg(2), out.arg()});
  EXPECT_EQ(out.get_int(0), -2147483647);  // 2^31-1 + 2 wraps
  EXPECT_EQ(out.get_int(1), -1);
  EXPECT_EQ(out.get_int(2), 40);
}

TEST(Elementwise, IntegerDivisionOps) {
  auto a = HostTensor::make(DType::Int64, {4});
  auto b = HostTensor::make(DType::Int64, {4});
  const int64_t av[] = {7, -7, 7, -7}, bv[] = {2, 2, -2, -2};
  for (int i = 0; i < 4; ++i) { a.set_int(i, av[i]); b.set_int(i, bv[i]); }
  auto fl = HostTensor::make(DType::Int64, {4}), tr = HostTensor::make(DType::Int64, {4}),
       rm = HostTensor::make(DType::Int64, {4});
  run_op(Op::FloorDivide, {a.vt(), b.vt(), fl.vt()}, 2, {a.arg(), b.arg(), fl.arg()});
  run_op(Op::DivTrunc, {a.vt(), b.vt(), tr.vt()}, 2, {a.arg(), b.arg(), tr.arg()});
  run_op(Op::Remainder, {a.vt(), b.vt(), rm.vt()}, 2, {a.arg(), b.arg(), rm.arg()});
  const int64_t fl_ref[] = {3, -4, -4, 3}, tr_ref[] = {3, -3, -3, 3}, rm_ref[] = {1, 1, -1, -1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(fl.get_int(i), fl_ref[i]);
    EXPECT_EQ(tr.get_int(i), tr_ref[i]);
    EXPECT_EQ(rm.get_int(i), rm_ref[i]);
  }
  b.set_int(2, 0);
  Graph g = Graph::single_op(Op::DivTrunc, {a.vt(), b.vt(), tr.vt()}, 2);
  EXPECT_EQ(run_graph(g, {a.arg(), b.arg(), tr.arg()}), "DivTrunc: DivTrunc: ZeroDivisionError");
}

TEST(Elementwise, FloatRemainderAndFloorDivide) {
  auto a = HostTensor::make(DType::Float32, {4});
  const double av[] = {5.5, -5.5, 5.5, -5.5};
  for (int i = 0; i < 4; ++i) a.set(i, av[i]);
  auto rm = HostTensor::make(DType::Float32, {4}), fd = HostTensor::make(DType::Float32, {4});
  run_op(Op::Remainder, {a.vt(), ValueType::scalar_float(), rm.vt()}, 2, {a.arg(), farg(-2.0), rm.arg()});
  run_op(Op::FloorDivide, {a.vt(), ValueType::scalar_float(), fd.vt()}, 2, {a.arg(), farg(2.0), fd.arg()});
  const double rm_ref[] = {-0.5, -1.5, -0.5, -1.5}, fd_ref[] = {2, -3, 2, -3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rm.get(i), rm_ref[i]) << i;
    EXPECT_EQ(fd.get(i), fd_ref[i]) << i;
  }
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Elementwise, UnaryFloatOps) {
  auto x = HostTensor::make(DType::Float32, {257}).randomize(11, -4, 4);
  auto pos = HostTensor::make(DType::Float32, {257}).randomize(12, 0.01, 9);
  struct Case { Op op; const HostTensor* in; std::function<double(double)> ref; std::vector<int64_t> attrs; };
  const std::vector<Case> cases = {
      {Op::Neg, &x, [](double v) { return -v; }, {}},
      {Op::Abs, &x, [](double v) { return std::fabs(v); }, {}},
      {Op::Exp, &x, [](double v) { return std::exp(v); }, {}},
      {Op::Log, &pos, [](double v) { return std::log(v); }, {}},
      {Op::Sqrt, &pos, [](double v) { return std::sqrt(v); }, {}},
      {Op::Rsqrt, &pos, [](double v) { return 1 / std::sqrt(v); }, {}},
      {Op::Reciprocal, &pos, [](double v) { return 1 / v; }, {}},
      {Op::Sin, &x, [](double v) { return std::sin(v); }, {}},
      {Op::Cos, &x, [](double v) { return std::cos(v); }, {}},
      {Op::Tanh, &x, [](double v) { return std::tanh(v); }, {}},
      {Op::Sigmoid, &x, [](double v) { return 1 / (1 + std::exp(-v)); }, {}},
      {Op::Relu, &x, [](double v) { return v < 0 ? 0 : v; }, {}},
      {Op::Silu, &x, [](double v) { return v / (1 + std::exp(-v)); }, {}},
      {Op::Erf, &x, [](double v) { return std::erf(v); }, {}},
      {Op::Floor, &x, [](double v) { return std::floor(v); }, {}},
      {Op::Ceil, &x, [](double v) { return std::ceil(v); }, {}},
      {Op::Round, &x, [](double v) { return std::nearbyint(v); }, {}},
      {Op::Sign, &x, [](double v) { return double((0 < v) - (v < 0)); }, {}},
      {Op::Gelu, &x, gelu_erf, {0}},
      {Op::Gelu, &x, gelu_tanh, {1}},
  };
  for (const Case& c : cases) {
    auto out = HostTensor::make(DType::Float32, {257});
    run_op(c.op, {c.in->vt(), out.vt()}, 1, {c.in->arg(), out.arg()}, c.attrs);
    for (int64_t i = 0; i < 257; ++i)
      // Gelu's 1 + erf(x) cancels for negative x: there float32 itself (and
      // PyTorch, ~1.1e-6) is only accurate in absolute terms.
      ASSERT_TRUE(near_rel(out.get(i), c.ref(static_cast<float>(c.in->get(i))), 2e-6,
                           c.op == Op::Gelu ? 1.5e-6 : 1e-7))
          << op_name(c.op) << " at " << i << " x=" << c.in->get(i);
  }
}

TEST(Elementwise, UnaryBf16ComputesInFloatRoundsOnce) {
  auto x = HostTensor::make(DType::BFloat16, {128}).randomize(13, -3, 3);
  auto out = HostTensor::make(DType::BFloat16, {128});
  run_op(Op::Gelu, {x.vt(), out.vt()}, 1, {x.arg(), out.arg()}, {1});
  for (int64_t i = 0; i < 128; ++i) {
    const float v = static_cast<float>(x.get(i));
    const float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;
    const float want = 0.5f * v * (1.0f + std::tanh(kBeta * (v + kKappa * (v * v * v))));
    EXPECT_EQ(out.get(i), round_to(DType::BFloat16, want)) << i;
  }
}

TEST(Elementwise, ExpOfIntTensorPromotesThroughTemporary) {
  auto x = HostTensor::make(DType::Int64, {5}).fill_fn([](int64_t i) { return double(i) - 2; });
  auto out = HostTensor::make(DType::Float32, {5});
  run_op(Op::Exp, {x.vt(), out.vt()}, 1, {x.arg(), out.arg()});
  for (int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(out.get(i), std::exp(float(i - 2)));
}

TEST(Elementwise, BackwardOps) {
  auto g = HostTensor::make(DType::Float32, {100}).randomize(14);
  auto x = HostTensor::make(DType::Float32, {100}).randomize(15, -3, 3);
  auto thr = HostTensor::make(DType::Float32, {100});
  run_op(Op::ThresholdBackward, {g.vt(), x.vt(), ValueType::scalar_float(), thr.vt()}, 3,
         {g.arg(), x.arg(), farg(0.5), thr.arg()});
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(thr.get(i), x.get(i) <= 0.5 ? 0.0 : g.get(i));
  for (int approx = 0; approx < 2; ++approx) {
    auto out = HostTensor::make(DType::Float32, {100});
    run_op(Op::GeluBackward, {g.vt(), x.vt(), out.vt()}, 2, {g.arg(), x.arg(), out.arg()}, {approx});
    for (int64_t i = 0; i < 100; ++i) {
      const double v = x.get(i), h = 1e-5;
      auto f = approx ? gelu_tanh : gelu_erf;
      const double deriv = (f(v + h) - f(v - h)) / (2 * h);
      ASSERT_TRUE(near_rel(out.get(i), g.get(i) * deriv, 1e-5, 1e-6)) << approx << " " << i;
    }
  }
  auto y = HostTensor::make(DType::Float32, {100}).randomize(16, 0, 1);
  auto sb = HostTensor::make(DType::Float32, {100}), tb = HostTensor::make(DType::Float32, {100}),
       lb = HostTensor::make(DType::Float32, {100});
  run_op(Op::SigmoidBackward, {g.vt(), y.vt(), sb.vt()}, 2, {g.arg(), y.arg(), sb.arg()});
  run_op(Op::TanhBackward, {g.vt(), y.vt(), tb.vt()}, 2, {g.arg(), y.arg(), tb.arg()});
  run_op(Op::SiluBackward, {g.vt(), x.vt(), lb.vt()}, 2, {g.arg(), x.arg(), lb.arg()});
  for (int64_t i = 0; i < 100; ++i) {
    const double gv = g.get(i), yv = y.get(i), xv = x.get(i), s = 1 / (1 + std::exp(-xv));
    EXPECT_TRUE(near_rel(sb.get(i), gv * yv * (1 - yv), 1e-6, 1e-7));
    EXPECT_TRUE(near_rel(tb.get(i), gv * (1 - yv * yv), 1e-6, 1e-7));
    EXPECT_TRUE(near_rel(lb.get(i), gv * s * (1 + xv * (1 - s)), 1e-6, 1e-7));
  }
}

TEST(Elementwise, ComparisonsWriteBool) {
  auto a = HostTensor::make(DType::Int32, {6}).fill_fn([](int64_t i) { return double(i); });
  struct Case { Op op; std::function<bool(double)> ref; };
  const std::vector<Case> cases = {
      {Op::Eq, [](double v) { return v == 2.5; }}, {Op::Ne, [](double v) { return v != 2.5; }},
      {Op::Lt, [](double v) { return v < 2.5; }},  {Op::Le, [](double v) { return v <= 2.5; }},
      {Op::Gt, [](double v) { return v > 2.5; }},  {Op::Ge, [](double v) { return v >= 2.5; }},
  };
  for (const Case& c : cases) {
    // int tensor vs float scalar compares in float (not 2.5 -> 2).
    auto out = HostTensor::make(DType::Bool, {6});
    run_op(c.op, {a.vt(), ValueType::scalar_float(), out.vt()}, 2, {a.arg(), farg(2.5), out.arg()});
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.get(i), c.ref(double(i)) ? 1.0 : 0.0) << op_name(c.op) << i;
  }
  // Tensor-tensor with mixed dtypes, and a Float32 output (through a Bool temporary).
  auto b = HostTensor::make(DType::Float32, {6}).fill_fn([](int64_t i) { return 5.0 - i; });
  auto out = HostTensor::make(DType::Float32, {6});
  run_op(Op::Lt, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.get(i), i < 5.0 - i ? 1.0 : 0.0);
}

TEST(Elementwise, LogicalAndBitwise) {
  auto a = HostTensor::make(DType::Int64, {4}).fill_fn([](int64_t i) { return double(i); });
  auto b = HostTensor::make(DType::Bool, {4}).fill_fn([](int64_t i) { return double(i % 2); });
  auto la = HostTensor::make(DType::Bool, {4}), lo = HostTensor::make(DType::Bool, {4}),
       ln = HostTensor::make(DType::Bool, {4});
  run_op(Op::LogicalAnd, {a.vt(), b.vt(), la.vt()}, 2, {a.arg(), b.arg(), la.arg()});
  run_op(Op::LogicalOr, {a.vt(), b.vt(), lo.vt()}, 2, {a.arg(), b.arg(), lo.arg()});
  run_op(Op::LogicalNot, {a.vt(), ln.vt()}, 1, {a.arg(), ln.arg()});
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(la.get(i), (i != 0) && (i % 2) ? 1.0 : 0.0);
    EXPECT_EQ(lo.get(i), (i != 0) || (i % 2) ? 1.0 : 0.0);
    EXPECT_EQ(ln.get(i), i == 0 ? 1.0 : 0.0);
  }
  auto x = HostTensor::make(DType::Int64, {4}).fill_fn([](int64_t i) { return double(i * 5); });
  auto band = HostTensor::make(DType::Int64, {4}), bxor = HostTensor::make(DType::Int64, {4});
  run_op(Op::BitwiseAnd, {x.vt(), ValueType::scalar_int(), band.vt()}, 2, {x.arg(), iarg(6), band.arg()});
  run_op(Op::BitwiseXor, {x.vt(), a.vt(), bxor.vt()}, 2, {x.arg(), a.arg(), bxor.arg()});
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(band.get_int(i), (i * 5) & 6);
    EXPECT_EQ(bxor.get_int(i), (i * 5) ^ i);
  }
}

TEST(Elementwise, MaximumMinimumPropagateNaN) {
  auto a = HostTensor::make(DType::Float32, {3}), b = HostTensor::make(DType::Float32, {3});
  a.set(0, 1); b.set(0, 2);
  a.set(1, NAN); b.set(1, 2);
  a.set(2, -1); b.set(2, NAN);
  auto mx = HostTensor::make(DType::Float32, {3}), mn = HostTensor::make(DType::Float32, {3});
  run_op(Op::Maximum, {a.vt(), b.vt(), mx.vt()}, 2, {a.arg(), b.arg(), mx.arg()});
  run_op(Op::Minimum, {a.vt(), b.vt(), mn.vt()}, 2, {a.arg(), b.arg(), mn.arg()});
  EXPECT_EQ(mx.get(0), 2);
  EXPECT_EQ(mn.get(0), 1);
  EXPECT_TRUE(std::isnan(mx.get(1)) && std::isnan(mx.get(2)) && std::isnan(mn.get(1)) && std::isnan(mn.get(2)));
}

TEST(Elementwise, PowIntAndFloat) {
  auto a = HostTensor::make(DType::Int64, {4}).fill_fn([](int64_t i) { return double(i) - 1; });
  auto out = HostTensor::make(DType::Int64, {4});
  run_op(Op::Pow, {a.vt(), ValueType::scalar_int(), out.vt()}, 2, {a.arg(), iarg(3), out.arg()});
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out.get_int(i), (i - 1) * (i - 1) * (i - 1));
  auto f = HostTensor::make(DType::Float32, {4}).fill_fn([](int64_t i) { return 0.5 + i; });
  auto fo = HostTensor::make(DType::Float32, {4});
  run_op(Op::Pow, {ValueType::scalar_float(), f.vt(), fo.vt()}, 2, {farg(2.0), f.arg(), fo.arg()});
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(near_rel(fo.get(i), std::pow(2.0, 0.5 + i), 1e-6));
}

TEST(Ternary, WhereAddcmulAddcdivLerpClamp) {
  const int64_t n = 50;
  auto c = HostTensor::make(DType::Bool, {n}).randomize(20);
  auto a = HostTensor::make(DType::Float32, {n}).randomize(21);
  auto b = HostTensor::make(DType::Float32, {n}).randomize(22);
  auto d = HostTensor::make(DType::Float32, {n}).randomize(23, 0.5, 2);
  auto w = HostTensor::make(DType::Float32, {n}).randomize(24, 0, 1);
  auto out = HostTensor::make(DType::Float32, {n});
  run_op(Op::Where, {c.vt(), a.vt(), ValueType::scalar_float(), out.vt()}, 3,
         {c.arg(), a.arg(), farg(-7), out.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out.get(i), c.get(i) ? a.get(i) : -7.0);
  run_op(Op::Addcmul, {a.vt(), b.vt(), d.vt(), ValueType::scalar_float(), out.vt()}, 4,
         {a.arg(), b.arg(), d.arg(), farg(0.5), out.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(near_rel(out.get(i), a.get(i) + 0.5 * b.get(i) * d.get(i), 1e-6, 1e-7));
  run_op(Op::Addcdiv, {a.vt(), b.vt(), d.vt(), ValueType::scalar_float(), out.vt()}, 4,
         {a.arg(), b.arg(), d.arg(), farg(-2), out.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(near_rel(out.get(i), a.get(i) - 2 * b.get(i) / d.get(i), 1e-6, 1e-6));
  run_op(Op::Lerp, {a.vt(), b.vt(), w.vt(), out.vt()}, 3, {a.arg(), b.arg(), w.arg(), out.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(near_rel(out.get(i), a.get(i) + w.get(i) * (b.get(i) - a.get(i)), 1e-6, 1e-6));
  run_op(Op::Clamp, {a.vt(), ValueType::scalar_float(), ValueType::none(), out.vt()}, 3,
         {a.arg(), farg(-0.5), iarg(0), out.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out.get(i), std::max(a.get(i), -0.5));
  run_op(Op::Clamp, {a.vt(), b.vt(), ValueType::scalar_float(), out.vt()}, 3,
         {a.arg(), b.arg(), farg(1.0), out.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out.get(i), std::min(std::max(a.get(i), b.get(i)), 1.0));
  auto ia = HostTensor::make(DType::Int8, {n}).randomize(25, -100, 100);
  auto io = HostTensor::make(DType::Int8, {n});
  run_op(Op::Clamp, {ia.vt(), ValueType::none(), ValueType::scalar_int(), io.vt()}, 3,
         {ia.arg(), iarg(0), iarg(10), io.arg()});
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(io.get(i), std::min(ia.get(i), 10.0));
}

}  // namespace
}  // namespace ontest
