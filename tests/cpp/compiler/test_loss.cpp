// The losses: NllLoss (reductions, weights, ignore_index, errors) and
// PointwiseLoss/PointwiseLossBackward against reference formulas.
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

TEST(NllLoss, ReductionsWeightsIgnoreIndex) {
  const int64_t N = 6, C = 4;
  auto self = HostTensor::make(DType::Float32, {N, C}).randomize(6, -3, 0);
  auto target = HostTensor::make(DType::Int64, {N});
  const int64_t tv[] = {0, 3, -100, 2, 1, 3};
  for (int i = 0; i < N; ++i) target.set_int(i, tv[i]);
  auto weight = HostTensor::make(DType::Float32, {C}).fill_fn([](int64_t c) { return 0.5 + c; });
  for (bool use_w : {false, true})
    for (int red = 0; red < 3; ++red) {
      const bool per_sample = red == 0;
      auto out = per_sample ? HostTensor::make(DType::Float32, {N}) : HostTensor::make(DType::Float32, {});
      auto tw = HostTensor::make(DType::Float32, {});
      std::vector<ValueType> types = {self.vt(), target.vt(), use_w ? weight.vt() : ValueType::none(), out.vt(), tw.vt()};
      std::vector<onrt_arg> args = {self.arg(), target.arg(), use_w ? weight.arg() : iarg(0), out.arg(), tw.arg()};
      run_op(Op::NllLoss, types, 3, args, {red, -100});
      double loss = 0, wsum = 0;
      for (int64_t i = 0; i < N; ++i) {
        if (tv[i] == -100) {
          if (per_sample) {
            EXPECT_EQ(out.get(i), 0.0);
          }
          continue;
        }
        const double w = use_w ? weight.get(tv[i]) : 1.0;
        const double l = -self.get(i * C + tv[i]) * w;
        if (per_sample) {
          EXPECT_TRUE(near_rel(out.get(i), l, 1e-6));
        }
        loss += l;
        wsum += w;
      }
      if (per_sample) {
        EXPECT_EQ(tw.get(0), 0.0);
      } else {
        EXPECT_TRUE(near_rel(tw.get(0), wsum, 1e-7)) << use_w << red;  // 5 without weight
        EXPECT_TRUE(near_rel(out.get(0), red == 1 ? loss / wsum : loss, 1e-6)) << use_w << red;
      }
      // Backward.
      auto go = per_sample ? HostTensor::make(DType::Float32, {N}).randomize(7) : HostTensor::make(DType::Float32, {});
      if (!per_sample) go.set(0, 1.5);
      auto gi = HostTensor::make(DType::Float32, {N, C}).fill_fn([](int64_t) { return 9.0; });
      run_op(Op::NllLossBackward,
             {go.vt(), self.vt(), target.vt(), use_w ? weight.vt() : ValueType::none(), tw.vt(), gi.vt()}, 5,
             {go.arg(), self.arg(), target.arg(), use_w ? weight.arg() : iarg(0), tw.arg(), gi.arg()}, {red, -100});
      for (int64_t i = 0; i < N; ++i)
        for (int64_t c = 0; c < C; ++c) {
          double want = 0;
          if (tv[i] != -100 && c == tv[i]) {
            const double w = use_w ? weight.get(c) : 1.0;
            const double g = per_sample ? go.get(i) : go.get(0);
            want = -w * g / (red == 1 ? wsum : 1.0);
          }
          ASSERT_TRUE(near_rel(gi.get(i * C + c), want, 1e-6)) << use_w << red << " " << i << "," << c;
        }
    }
}

TEST(NllLoss, OneDimInputAndAllIgnoredMean) {
  auto self = HostTensor::make(DType::Float32, {5}).randomize(8);
  auto target = HostTensor::make(DType::Int64, {});
  target.set_int(0, 2);
  auto out = HostTensor::make(DType::Float32, {}), tw = HostTensor::make(DType::Float32, {});
  run_op(Op::NllLoss, {self.vt(), target.vt(), ValueType::none(), out.vt(), tw.vt()}, 3,
         {self.arg(), target.arg(), iarg(0), out.arg(), tw.arg()}, {0, -100});
  EXPECT_FLOAT_EQ(out.get(0), -self.get(2));
  EXPECT_EQ(tw.get(0), 1.0);
  auto s2 = HostTensor::make(DType::Float32, {2, 3}).randomize(9);
  auto t2 = HostTensor::make(DType::Int64, {2});
  t2.set_int(0, 1); t2.set_int(1, 1);
  run_op(Op::NllLoss, {s2.vt(), t2.vt(), ValueType::none(), out.vt(), tw.vt()}, 3,
         {s2.arg(), t2.arg(), iarg(0), out.arg(), tw.arg()}, {1, 1});
  EXPECT_TRUE(std::isnan(out.get(0)));  // 0 / 0
  EXPECT_EQ(tw.get(0), 0.0);
}

TEST(NllLoss, TargetOutOfBoundsIsAnError) {
  auto self = HostTensor::make(DType::Float32, {2, 5}).randomize(10);
  auto target = HostTensor::make(DType::Int64, {2});
  target.set_int(0, 1);
  target.set_int(1, 7);
  auto out = HostTensor::make(DType::Float32, {}), tw = HostTensor::make(DType::Float32, {});
  Graph g = Graph::single_op(Op::NllLoss, {self.vt(), target.vt(), ValueType::none(), out.vt(), tw.vt()}, 3, {1, -100});
  EXPECT_EQ(run_graph(g, {self.arg(), target.arg(), iarg(0), out.arg(), tw.arg()}),
            "NllLoss: NllLoss: Target 7 is out of bounds.");
}

}  // namespace
}  // namespace ontest
