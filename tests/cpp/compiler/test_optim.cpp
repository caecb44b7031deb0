// Optimizer ops (FusedAdam, FusedSgd) and NormAll against reference loops.
#include "test_util.h"

namespace ontest {
namespace {

struct AdamRef {
  double lr = 0.01, b1 = 0.9, b2 = 0.99, wd = 0.1, eps = 1e-8;
  bool ams = false, maxi = false, adamw = false;
  double step = 3;
  void run(std::vector<double>& p, std::vector<double> g, std::vector<double>& m,
           std::vector<double>& v, std::vector<double>& vmax) const {
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = maxi ? -g[i] : g[i];
      if (adamw) p[i] *= 1 - lr * wd;
      else gi += p[i] * wd;
      m[i] = m[i] * b1 + gi * (1 - b1);
      v[i] = v[i] * b2 + gi * gi * (1 - b2);
      double den = v[i];
      if (ams) den = vmax[i] = std::max(vmax[i], v[i]);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(den) / std::sqrt(bc2) + eps);
    }
  }
};

void run_adam(const AdamRef& r, DType dt, bool tensor_lr) {
  const std::vector<int64_t> sz{37, 129};
  auto p = HostTensor::make(dt, sz).randomize(1);
  auto g = HostTensor::make(dt, sz).randomize(2);
  auto m = HostTensor::make(dt, sz).randomize(3, -0.1, 0.1);
  auto v = HostTensor::make(dt, sz).randomize(4, 0, 0.1);
  auto vm = HostTensor::make(dt, sz).randomize(5, 0, 0.1);
  auto step = HostTensor::make(DType::Float32, {});
  step.set(0, r.step);
  auto lr_t = HostTensor::make(DType::Float32, {});
  lr_t.set(0, r.lr);
  std::vector<double> P = p.values(), M = m.values(), V = v.values(), VM = vm.values();
  r.run(P, g.values(), M, V, VM);
  // Outputs alias the inputs (in-place update), as the bridge launches it.
  std::vector<ValueType> types{p.vt(), g.vt(), m.vt(), v.vt(),
                               r.ams ? vm.vt() : ValueType::none(), step.vt(),
                               tensor_lr ? lr_t.vt() : ValueType::scalar_float(),
                               ValueType::scalar_float(), ValueType::scalar_float(),
                               ValueType::scalar_float(), ValueType::scalar_float(),
                               ValueType::none(), ValueType::none(),
                               p.vt(), g.vt(), m.vt(), v.vt()};
  std::vector<onrt_arg> args{p.arg(), g.arg(), m.arg(), v.arg(), r.ams ? vm.arg() : onrt_arg{},
                             step.arg(), tensor_lr ? lr_t.arg() : farg(r.lr), farg(r.b1),
                             farg(r.b2), farg(r.wd), farg(r.eps), onrt_arg{}, onrt_arg{},
                             p.arg(), g.arg(), m.arg(), v.arg()};
  if (r.ams) {
    types.push_back(vm.vt());
    args.push_back(vm.arg());
  }
  const int64_t flags = (r.ams ? 1 : 0) | (r.maxi ? 2 : 0) | (r.adamw ? 4 : 0);
  run_op(Op::FusedAdam, types, 13, args, {flags});
  const double tol = dt == DType::Float32 ? 2e-5 : 2e-2;
  EXPECT_ALL_NEAR(p, P, tol, tol);
  EXPECT_ALL_NEAR(m, M, tol, 1e-6);
  EXPECT_ALL_NEAR(v, V, tol, 1e-6);
  if (r.ams) EXPECT_ALL_NEAR(vm, VM, tol, 1e-6);
}

TEST(FusedAdam, AdamAndAdamWVariants) {
  for (bool adamw : {false, true})
    for (bool ams : {false, true})
      for (bool maxi : {false, true}) {
        AdamRef r;
        r.adamw = adamw;
        r.ams = ams;
        r.maxi = maxi;
        run_adam(r, DType::Float32, adamw);
      }
}

TEST(FusedAdam, HalfTypes) {
  AdamRef r;
  r.adamw = true;
  run_adam(r, DType::BFloat16, false);
  run_adam(r, DType::Float16, true);
}

TEST(FusedAdam, GradScaleAndFoundInf) {
  auto p = HostTensor::make(DType::Float32, {10}).randomize(1);
  auto g = HostTensor::make(DType::Float32, {10}).randomize(2);
  auto m = HostTensor::make(DType::Float32, {10});
  auto v = HostTensor::make(DType::Float32, {10});
  auto step = HostTensor::make(DType::Float32, {});
  step.set(0, 1);
  auto scale = HostTensor::make(DType::Float32, {});
  scale.set(0, 4);
  auto inf = HostTensor::make(DType::Float32, {});
  const auto p0 = p.values(), g0 = g.values();
  auto launch = [&]() {
    run_op(Op::FusedAdam,
           {p.vt(), g.vt(), m.vt(), v.vt(), ValueType::none(), step.vt(),
            ValueType::scalar_float(), ValueType::scalar_float(), ValueType::scalar_float(),
            ValueType::scalar_float(), ValueType::scalar_float(), scale.vt(), inf.vt(), p.vt(),
            g.vt(), m.vt(), v.vt()},
           13,
           {p.arg(), g.arg(), m.arg(), v.arg(), onrt_arg{}, step.arg(), farg(0.1), farg(0.9),
            farg(0.999), farg(0), farg(1e-8), scale.arg(), inf.arg(), p.arg(), g.arg(), m.arg(),
            v.arg()},
           {0});
  };
  inf.set(0, 1);
  launch();
  EXPECT_ALL_NEAR(p, p0, 0, 0);
  EXPECT_ALL_NEAR(g, g0, 0, 0);
  inf.set(0, 0);
  launch();
  std::vector<double> gs(g0);
  for (double& x : gs) x /= 4;
  EXPECT_ALL_NEAR(g, gs, 1e-7, 0);
  // First Adam step moves every element by ~lr * sign(grad).
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(near_rel(p.get(i), p0[i] - 0.1 * (g0[i] > 0 ? 1 : -1), 1e-4, 1e-4)) << i;
}

TEST(FusedAdam, RejectsBadOperands) {
  auto p = HostTensor::make(DType::Float32, {4, 5});
  auto pt = HostTensor::make(DType::Float32, {4, 5}, {1, 4});
  auto gi = HostTensor::make(DType::Int32, {4, 5});
  auto step = HostTensor::make(DType::Float32, {});
  auto f = ValueType::scalar_float();
  auto n = ValueType::none();
  for (auto [a, b] : {std::pair{pt.vt(), p.vt()}, std::pair{p.vt(), gi.vt()}}) {
    Graph g = Graph::single_op(
        Op::FusedAdam, {a, b, a, a, n, step.vt(), f, f, f, f, f, n, n, a, b, a, a}, 13, {0});
    EXPECT_THROW(compile(g), CompileError);
  }
}

TEST(FusedSgd, MomentumNesterovFirstStep) {
  for (int flags : {0, 1, 2, 4, 5}) {
    auto p = HostTensor::make(DType::Float32, {300}).randomize(1);
    auto g = HostTensor::make(DType::Float32, {300}).randomize(2);
    auto b = HostTensor::make(DType::Float32, {300}).randomize(3);
    const double lr = 0.1, wd = 0.01, mom = 0.9, damp = 0.1;
    std::vector<double> P = p.values(), G = g.values(), B = b.values();
    for (size_t i = 0; i < P.size(); ++i) {
      double gi = (flags & 2) ? -G[i] : G[i];
      gi += P[i] * wd;
      B[i] = (flags & 4) ? gi : B[i] * mom + gi * (1 - damp);
      gi = (flags & 1) ? gi + mom * B[i] : B[i];
      P[i] -= lr * gi;
    }
    auto f = ValueType::scalar_float();
    auto n = ValueType::none();
    run_op(Op::FusedSgd, {p.vt(), g.vt(), b.vt(), f, f, f, f, n, n, p.vt(), g.vt(), b.vt()}, 9,
           {p.arg(), g.arg(), b.arg(), farg(lr), farg(wd), farg(mom), farg(damp), onrt_arg{},
            onrt_arg{}, p.arg(), g.arg(), b.arg()},
           {flags});
    EXPECT_ALL_NEAR(p, P, 1e-5, 1e-6);
    EXPECT_ALL_NEAR(b, B, 1e-5, 1e-6);
  }
}

TEST(FusedSgd, NoMomentumBuffer) {
  auto p = HostTensor::make(DType::BFloat16, {64}).randomize(1);
  auto g = HostTensor::make(DType::BFloat16, {64}).randomize(2);
  std::vector<double> P = p.values(), G = g.values();
  for (size_t i = 0; i < P.size(); ++i) P[i] -= 0.5 * G[i];
  auto f = ValueType::scalar_float();
  auto n = ValueType::none();
  run_op(Op::FusedSgd, {p.vt(), g.vt(), n, f, f, f, f, n, n, p.vt(), g.vt()}, 9,
         {p.arg(), g.arg(), onrt_arg{}, farg(0.5), farg(0), farg(0), farg(0), onrt_arg{},
          onrt_arg{}, p.arg(), g.arg()},
         {0});
  EXPECT_ALL_NEAR(p, P, 1e-2, 1e-2);
}

TEST(NormAll, OrdersAndLayouts) {
  auto x = HostTensor::make(DType::Float32, {50, 70}, {1, 50}).randomize(7, -3, 3);
  const auto vals = x.values();
  for (double ord : {2.0, 1.0, 3.0, 0.0, double(INFINITY), -double(INFINITY)}) {
    double want = 0;
    if (std::isinf(ord)) {
      want = ord > 0 ? 0 : INFINITY;
      for (double v : vals) want = ord > 0 ? std::max(want, std::fabs(v)) : std::min(want, std::fabs(v));
    } else if (ord == 0) {
      for (double v : vals) want += v != 0;
    } else {
      for (double v : vals) want += std::pow(std::fabs(v), ord);
      want = std::pow(want, 1 / ord);
    }
    auto out = HostTensor::make(DType::Float32, {});
    run_op(Op::NormAll, {x.vt(), ValueType::scalar_float(), out.vt()}, 2,
           {x.arg(), farg(ord), out.arg()});
    EXPECT_TRUE(near_rel(out.get(0), want, 1e-6)) << ord;
  }
  // Large bf16 input (parallel chunks), float32 output.
  auto big = HostTensor::make(DType::BFloat16, {200000}).randomize(8);
  double s = 0;
  for (double v : big.values()) s += v * v;
  auto out = HostTensor::make(DType::Float32, {1});
  run_op(Op::NormAll, {big.vt(), ValueType::scalar_float(), out.vt()}, 2,
         {big.arg(), farg(2), out.arg()});
  EXPECT_TRUE(near_rel(out.get(0), std::sqrt(s), 1e-5));
}

}  // namespace
}  // namespace ontest
