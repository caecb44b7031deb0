// Softmax family, nll_loss, index_select, embedding backward.
#include "test_util.h"

namespace ontest {
namespace {

// Reference softmax / log_softmax over `dim` (logical indexing).
std::vector<double> ref_softmax(const HostTensor& x, int dim, bool log) {
  const TensorType& t = x.type;
  std::vector<double> r(x.numel());
  int64_t inner = 1;
  for (int d = t.ndim - 1; d > dim; --d) inner *= t.sizes[d];
  const int64_t D = t.sizes[dim], outer = x.numel() / (D * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -INFINITY, s = 0;
      for (int64_t j = 0; j < D; ++j) mx = std::max(mx, x.get((o * D + j) * inner + i));
      for (int64_t j = 0; j < D; ++j) s += std::exp(x.get((o * D + j) * inner + i) - mx);
      for (int64_t j = 0; j < D; ++j) {
        const double v = x.get((o * D + j) * inner + i);
        r[(o * D + j) * inner + i] = log ? v - mx - std::log(s) : std::exp(v - mx) / s;
      }
    }
  return r;
}

TEST(Softmax, ForwardAnyDimAndLayout) {
  auto x = HostTensor::make(DType::Float32, {3, 5, 7}).randomize(1, -5, 5);
  for (int dim = 0; dim < 3; ++dim)
    for (bool log : {false, true}) {
      auto out = HostTensor::make(DType::Float32, {3, 5, 7});
      run_op(log ? Op::LogSoftmax : Op::Softmax, {x.vt(), out.vt()}, 1, {x.arg(), out.arg()}, {dim});
      EXPECT_ALL_NEAR(out, ref_softmax(x, dim, log), 1e-6, 1e-7);
    }
  // Transposed input, negative dim.
  auto xt = HostTensor::make(DType::Float32, {6, 4}, {1, 6}).randomize(2, -3, 3);
  auto out = HostTensor::make(DType::Float32, {6, 4});
  run_op(Op::LogSoftmax, {xt.vt(), out.vt()}, 1, {xt.arg(), out.arg()}, {-1});
  EXPECT_ALL_NEAR(out, ref_softmax(xt, 1, true), 1e-6, 1e-7);
}

TEST(Softmax, Bf16InAndHalfToFloat) {
  auto x = HostTensor::make(DType::BFloat16, {4, 33}).randomize(3, -4, 4);
  auto ob = HostTensor::make(DType::BFloat16, {4, 33});
  auto of = HostTensor::make(DType::Float32, {4, 33});
  run_op(Op::Softmax, {x.vt(), ob.vt()}, 1, {x.arg(), ob.arg()}, {1});
  run_op(Op::Softmax, {x.vt(), of.vt()}, 1, {x.arg(), of.arg()}, {1});
  auto r = ref_softmax(x, 1, false);
  EXPECT_ALL_NEAR(of, r, 1e-6, 1e-7);
  EXPECT_ALL_NEAR(ob, r, 8e-3, 1e-7);
}

TEST(Softmax, Backward) {
  const int64_t R = 5, D = 9;
  auto x = HostTensor::make(DType::Float32, {R, D}).randomize(4);
  auto g = HostTensor::make(DType::Float32, {R, D}).randomize(5);
  for (bool log : {false, true}) {
    auto y = HostTensor::make(DType::Float32, {R, D});
    run_op(log ? Op::LogSoftmax : Op::Softmax, {x.vt(), y.vt()}, 1, {x.arg(), y.arg()}, {1});
    auto gi = HostTensor::make(DType::Float32, {R, D});
    run_op(log ? Op::LogSoftmaxBackward : Op::SoftmaxBackward, {g.vt(), y.vt(), gi.vt()}, 2,
           {g.arg(), y.arg(), gi.arg()}, {1});
    for (int64_t r = 0; r < R; ++r) {
      double s = 0;
      for (int64_t j = 0; j < D; ++j) s += log ? g.get(r * D + j) : g.get(r * D + j) * y.get(r * D + j);
      for (int64_t j = 0; j < D; ++j) {
        const double yv = y.get(r * D + j), gv = g.get(r * D + j);
        const double want = log ? gv - std::exp(yv) * s : yv * (gv - s);
        ASSERT_TRUE(near_rel(gi.get(r * D + j), want, 1e-5, 1e-6)) << log << " " << r << "," << j;
      }
    }
  }
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

TEST(IndexSelect, AnyDimAndStrides) {
  auto self = HostTensor::make(DType::Float32, {4, 5, 3}).randomize(11);
  auto index = HostTensor::make(DType::Int64, {3});
  index.set_int(0, 2); index.set_int(1, 0); index.set_int(2, 2);
  for (int dim = 0; dim < 3; ++dim) {
    std::vector<int64_t> os = {4, 5, 3};
    os[dim] = 3;
    auto out = HostTensor::make(DType::Float32, os);
    run_op(Op::IndexSelect, {self.vt(), index.vt(), out.vt()}, 2, {self.arg(), index.arg(), out.arg()}, {dim});
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t c[3], rem = i;
      for (int d = 2; d >= 0; --d) { c[d] = rem % os[d]; rem /= os[d]; }
      c[dim] = index.get_int(c[dim]);
      ASSERT_EQ(out.get(i), self.get((c[0] * 5 + c[1]) * 3 + c[2])) << dim << " " << i;
    }
  }
  auto bad = HostTensor::make(DType::Int32, {1});
  bad.set_int(0, 4);
  auto out = HostTensor::make(DType::Float32, {1, 5, 3});
  Graph g = Graph::single_op(Op::IndexSelect, {self.vt(), bad.vt(), out.vt()}, 2, {0});
  EXPECT_EQ(run_graph(g, {self.arg(), bad.arg(), out.arg()}), "IndexSelect: IndexSelect: index out of range in self");
}

TEST(EmbeddingBackward, SumsRowsSkipsPadding) {
  const int64_t W = 6, D = 4;
  auto idx = HostTensor::make(DType::Int64, {2, 3});
  const int64_t iv[] = {1, 3, 1, 0, 5, 3};
  for (int i = 0; i < 6; ++i) idx.set_int(i, iv[i]);
  auto grad = HostTensor::make(DType::Float32, {2, 3, D}).randomize(12);
  for (DType od : {DType::Float32, DType::BFloat16}) {
    auto out = HostTensor::make(od, {W, D}).fill_fn([](int64_t) { return 7.0; });
    run_op(Op::EmbeddingBackward, {grad.vt(), idx.vt(), out.vt()}, 2, {grad.arg(), idx.arg(), out.arg()}, {3});
    for (int64_t r = 0; r < W; ++r)
      for (int64_t j = 0; j < D; ++j) {
        double s = 0;
        for (int i = 0; i < 6; ++i)
          if (iv[i] == r && r != 3) s += grad.get(i * D + j);
        ASSERT_TRUE(near_rel(out.get(r * D + j), round_to(od, s), 1e-6, 1e-7)) << r << "," << j;
      }
  }
}

}  // namespace
}  // namespace ontest
