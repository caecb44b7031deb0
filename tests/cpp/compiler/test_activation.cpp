// Activations and unary math (lower_activation.cpp, kernels/activation.cpp)
// against double-precision references written from the definitions, without
// torch: values (incl. the threshold boundaries), coefficients as launch
// scalars, strided inputs, Bool results, integer fmod and the compile errors.
#include <algorithm>

#include "test_util.h"

namespace ontest {
namespace {

ValueType sf() { return ValueType::scalar_float(); }

double softplus(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

// x in [-8, 8] plus the boundary points, over `n` elements.
HostTensor sample(DType dt, int64_t n, std::vector<int64_t> strides = {}) {
  auto x = HostTensor::make(dt, {n}, std::move(strides)).randomize(7, -8, 8);
  const double points[] = {-3, 3, 0, 2.5, -2.5};
  for (int i = 0; i < 5; ++i) x.set(i, points[i]);
  return x;
}

TEST(Activation, UnaryFloatOpsMatchTheDefinitions) {
  struct Case {
    Op op;
    double (*ref)(double);
  };
  const Case cases[] = {
      {Op::Mish, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }},
      {Op::Hardswish, [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
      {Op::Hardsigmoid, [](double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
      {Op::LogSigmoid, [](double x) { return -std::log1p(std::exp(-x)); }},
      {Op::Atan, [](double x) { return std::atan(x); }},
      {Op::Sinh, [](double x) { return std::sinh(x); }},
      {Op::Asinh, [](double x) { return std::asinh(x); }},
      {Op::Exp2, [](double x) { return std::exp2(x); }},
      {Op::Expm1, [](double x) { return std::expm1(x); }},
      {Op::Trunc, [](double x) { return std::trunc(x); }},
      {Op::Frac, [](double x) { return x - std::trunc(x); }},
  };
  // 70001 elements: several threads and a ragged vector tail.
  auto x = sample(DType::Float32, 70001);
  for (const Case& c : cases) {
    auto out = HostTensor::make(DType::Float32, {70001});
    run_op(c.op, {x.vt(), out.vt()}, 1, {x.arg(), out.arg()});
    std::vector<double> ref;
    for (double v : x.values()) ref.push_back(c.ref(v));
    EXPECT_ALL_NEAR(out, ref, 2e-6, 1e-6);
  }
}

TEST(Activation, CoefficientsAreLaunchScalars) {
  // One program, two coefficient sets: the coefficients are not baked in.
  auto x = sample(DType::Float32, 1000);
  auto out = HostTensor::make(DType::Float32, {1000});
  Graph g = Graph::single_op(Op::Softplus, {x.vt(), sf(), sf(), out.vt()}, 3);
  for (auto [beta, threshold] : {std::pair{1.0, 20.0}, std::pair{2.0, 5.0}}) {
    ASSERT_EQ(run_graph(g, {x.arg(), farg(beta), farg(threshold), out.arg()}), "");
    std::vector<double> ref;
    for (double v : x.values()) ref.push_back(softplus(v, beta, threshold));
    EXPECT_ALL_NEAR(out, ref, 2e-6, 1e-6);
  }
  // Elu: alpha, scale, input_scale; the backward from self and from the result agree.
  const double alpha = 0.7, scale = 1.2, in_scale = 0.9;
  auto y = HostTensor::make(DType::Float32, {1000});
  run_op(Op::Elu, {x.vt(), sf(), sf(), sf(), y.vt()}, 4,
         {x.arg(), farg(alpha), farg(scale), farg(in_scale), y.arg()});
  std::vector<double> ref, dref;
  for (double v : x.values()) {
    ref.push_back(v <= 0 ? std::expm1(v * in_scale) * alpha * scale : v * scale);
    dref.push_back(v <= 0 ? in_scale * alpha * scale * std::exp(v * in_scale) : scale);
  }
  EXPECT_ALL_NEAR(y, ref, 2e-6, 1e-6);
  auto grad = HostTensor::make(DType::Float32, {1000}).fill_fn([](int64_t) { return 1.0; });
  for (int64_t is_result : {0, 1}) {
    auto gi = HostTensor::make(DType::Float32, {1000});
    const HostTensor& in = is_result ? y : x;
    run_op(Op::EluBackward, {grad.vt(), in.vt(), sf(), sf(), sf(), gi.vt()}, 5,
           {grad.arg(), in.arg(), farg(alpha), farg(scale), farg(in_scale), gi.arg()},
           {is_result});
    EXPECT_ALL_NEAR(gi, dref, 1e-5, 1e-6);
  }
}

TEST(Activation, BackwardBoundariesAndHalfTypes) {
  // bf16 in and out, strided input: computed in float, rounded once.
  auto x = sample(DType::BFloat16, 300, {2});
  auto grad = HostTensor::make(DType::BFloat16, {300}).randomize(3);
  auto gi = HostTensor::make(DType::BFloat16, {300});
  run_op(Op::HardswishBackward, {grad.vt(), x.vt(), gi.vt()}, 2, {grad.arg(), x.arg(), gi.arg()});
  std::vector<double> ref;
  for (int64_t i = 0; i < 300; ++i) {
    const double v = x.get(i), g = grad.get(i);
    ref.push_back(round_to(DType::BFloat16, v <= -3 ? 0 : v < 3 ? g * (v / 3 + 0.5) : g));
  }
  EXPECT_ALL_NEAR(gi, ref, 8e-3, 1e-6);
  EXPECT_EQ(gi.get(0), 0);         // x = -3
  EXPECT_EQ(gi.get(1), grad.get(1));  // x = 3
}

TEST(Activation, HardtanhIntegersAndIsInfBool) {
  auto x = HostTensor::make(DType::Int32, {50}).fill_fn([](int64_t i) { return i - 25.0; });
  auto out = HostTensor::make(DType::Int32, {50});
  run_op(Op::Hardtanh, {x.vt(), ValueType::scalar_int(), ValueType::scalar_int(), out.vt()}, 3,
         {x.arg(), iarg(-3), iarg(7), out.arg()});
  for (int64_t i = 0; i < 50; ++i) ASSERT_EQ(out.get(i), std::clamp(i - 25.0, -3.0, 7.0));

  auto f = HostTensor::make(DType::Float16, {4});
  const double vals[] = {INFINITY, -INFINITY, NAN, 65504};
  for (int i = 0; i < 4; ++i) f.set(i, vals[i]);
  auto inf = HostTensor::make(DType::Bool, {4}), fin = HostTensor::make(DType::Bool, {4});
  run_op(Op::IsInf, {f.vt(), inf.vt()}, 1, {f.arg(), inf.arg()});
  run_op(Op::IsFinite, {f.vt(), fin.vt()}, 1, {f.arg(), fin.arg()});
  EXPECT_EQ(inf.values(), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(fin.values(), (std::vector<double>{0, 0, 0, 1}));
}

TEST(Activation, FmodIntegersAndDivisionByZero) {
  auto a = HostTensor::make(DType::Int64, {6}).fill_fn([](int64_t i) { return i * 7.0 - 20; });
  auto b = HostTensor::make(DType::Int64, {6}).fill_fn([](int64_t i) { return i % 2 ? -3 : 4; });
  auto out = HostTensor::make(DType::Int64, {6});
  run_op(Op::Fmod, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  for (int64_t i = 0; i < 6; ++i) ASSERT_EQ(out.get_int(i), a.get_int(i) % b.get_int(i));
  b.set(3, 0);
  Graph g = Graph::single_op(Op::Fmod, {a.vt(), b.vt(), out.vt()}, 2);
  EXPECT_EQ(run_graph(g, {a.arg(), b.arg(), out.arg()}), "Fmod: Fmod: ZeroDivisionError");
}

TEST(Activation, CompileErrorsNameTheProblem) {
  auto xi = HostTensor::make(DType::Int32, {4});
  auto oi = HostTensor::make(DType::Int32, {4});
  try {
    compile(Graph::single_op(Op::Softplus, {xi.vt(), sf(), sf(), oi.vt()}, 3));
    ADD_FAILURE() << "Softplus on Int32 compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported dtype Int32"), std::string::npos) << e.what();
  }
  auto x = HostTensor::make(DType::Float32, {4});
  auto o = HostTensor::make(DType::Float32, {4});
  // The coefficient must be a scalar, not a tensor.
  EXPECT_THROW(compile(Graph::single_op(Op::LeakyRelu, {x.vt(), x.vt(), o.vt()}, 2)),
               CompileError);
  EXPECT_THROW(compile(Graph::single_op(Op::EluBackward,
                                        {x.vt(), x.vt(), sf(), sf(), sf(), o.vt()}, 5, {2})),
               CompileError);
}

}  // namespace
}  // namespace ontest
