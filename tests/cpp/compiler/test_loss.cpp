// PointwiseLoss and PointwiseLossBackward against reference formulas.
#include "test_util.h"

namespace ontest {
namespace {

double ref_loss(int kind, double x, double t, double p) {
  const double d = x - t, z = std::fabs(d);
  switch (kind) {
    case 0: return d * d;
    case 1: return z;
    case 2: return z < p ? 0.5 * z * z / p : z - 0.5 * p;
    case 3: return z < p ? 0.5 * z * z : p * (z - 0.5 * p);
    default: return -(t * std::max(std::log(x), -100.0) + (1 - t) * std::max(std::log(1 - x), -100.0));
  }
}
double ref_grad(int kind, double x, double t, double p) {
  const double d = x - t;
  switch (kind) {
    case 0: return 2 * d;
    case 1: return (d > 0) - (d < 0);
    case 2: return d < -p ? -1 : d > p ? 1 : d / p;
    case 3: return d < -p ? -p : d > p ? p : d;
    default: return (x - t) / std::max(x * (1 - x), 1e-12);
  }
}

TEST(PointwiseLoss, ForwardBackwardAllKindsAndReductions) {
  const std::vector<int64_t> sz{33, 65};
  for (int kind = 0; kind <= 4; ++kind) {
    auto x = HostTensor::make(DType::Float32, sz).randomize(1, kind == 4 ? 0.01 : -2, kind == 4 ? 0.99 : 2);
    auto t = HostTensor::make(DType::Float32, sz).randomize(2, 0, 1);
    auto w = HostTensor::make(DType::Float32, sz).randomize(3, 0, 1);
    const double param = 0.6;
    const int64_t n = x.numel();
    for (bool weighted : {false, true}) {
      if (weighted && kind != 4) continue;
      auto wt = weighted ? w.vt() : ValueType::none();
      onrt_arg wa = weighted ? w.arg() : onrt_arg{};
      for (int red = 0; red <= 2; ++red) {
        std::vector<double> per(n);
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          per[i] = ref_loss(kind, x.get(i), t.get(i), param) * (weighted ? w.get(i) : 1.0);
          sum += per[i];
        }
        auto out = red == 0 ? HostTensor::make(DType::Float32, sz) : HostTensor::make(DType::Float32, {});
        run_op(Op::PointwiseLoss, {x.vt(), t.vt(), wt, ValueType::scalar_float(), out.vt()}, 4,
               {x.arg(), t.arg(), wa, farg(param), out.arg()}, {kind, red});
        if (red == 0) EXPECT_ALL_NEAR(out, per, 1e-5, 1e-6);
        else EXPECT_TRUE(near_rel(out.get(0), red == 1 ? sum / n : sum, 1e-5)) << kind << red;
        // Backward: 1-element grad for reduced losses, elementwise for none.
        auto go = red == 0 ? HostTensor::make(DType::Float32, sz).randomize(4)
                           : HostTensor::make(DType::Float32, {});
        if (red != 0) go.set(0, 1.5);
        auto gi = HostTensor::make(DType::Float32, sz);
        run_op(Op::PointwiseLossBackward,
               {go.vt(), x.vt(), t.vt(), wt, ValueType::scalar_float(), gi.vt()}, 5,
               {go.arg(), x.arg(), t.arg(), wa, farg(param), gi.arg()}, {kind, red});
        std::vector<double> want(n);
        for (int64_t i = 0; i < n; ++i)
          want[i] = ref_grad(kind, x.get(i), t.get(i), param) * (red == 0 ? go.get(i) : 1.5) *
                    (red == 1 ? 1.0 / n : 1.0) * (weighted ? w.get(i) : 1.0);
        EXPECT_ALL_NEAR(gi, want, 1e-5, 1e-6);
      }
    }
  }
}

TEST(PointwiseLoss, BceRejectsOutOfRangeInput) {
  auto x = HostTensor::make(DType::Float32, {3});
  x.set(0, 1.5);
  auto t = HostTensor::make(DType::Float32, {3});
  auto out = HostTensor::make(DType::Float32, {});
  Graph g = Graph::single_op(Op::PointwiseLoss,
                             {x.vt(), t.vt(), ValueType::none(), ValueType::scalar_float(), out.vt()},
                             4, {4, 1});
  EXPECT_NE(run_graph(g, {x.arg(), t.arg(), onrt_arg{}, farg(0), out.arg()}).find("between 0 and 1"),
            std::string::npos);
}

TEST(PointwiseLoss, RejectsMismatchedSizes) {
  auto x = HostTensor::make(DType::Float32, {3});
  auto t = HostTensor::make(DType::Float32, {4});
  auto out = HostTensor::make(DType::Float32, {});
  Graph g = Graph::single_op(Op::PointwiseLoss,
                             {x.vt(), t.vt(), ValueType::none(), ValueType::scalar_float(), out.vt()},
                             4, {0, 1});
  EXPECT_THROW(compile(g), CompileError);
}

}  // namespace
}  // namespace ontest
