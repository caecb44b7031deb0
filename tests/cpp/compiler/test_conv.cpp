// Convolution (forward, backward input, backward weight, transposed, groups,
// stride, padding, dilation) against a direct reference loop; pooling and
// upsampling against reference loops.
#include "test_util.h"

namespace ontest {
namespace {

struct Conv2d {
  int64_t N = 2, C = 4, H = 7, W = 6, O = 6, KH = 3, KW = 2, G = 2;
  int64_t s[2] = {2, 1}, p[2] = {1, 1}, d[2] = {1, 2};
  int64_t OH() const { return (H + 2 * p[0] - d[0] * (KH - 1) - 1) / s[0] + 1; }
  int64_t OW() const { return (W + 2 * p[1] - d[1] * (KW - 1) - 1) / s[1] + 1; }
  std::vector<int64_t> attrs(bool transposed) const {
    return {transposed, G, s[0], s[1], p[0], p[1], d[0], d[1], 0, 0};
  }
  // y[n,o,oh,ow] = sum x[n,c,ih,iw] * w[o,c',kh,kw]; calls f(xi, wi, yi) per term.
  template <class F>
  void terms(F&& f) const {
    const int64_t cg = C / G, og = O / G;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t oh = 0; oh < OH(); ++oh)
          for (int64_t ow = 0; ow < OW(); ++ow)
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kh = 0; kh < KH; ++kh)
                for (int64_t kw = 0; kw < KW; ++kw) {
                  const int64_t ih = oh * s[0] - p[0] + kh * d[0], iw = ow * s[1] - p[1] + kw * d[1];
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int64_t ci = (o / og) * cg + c;
                  f(((n * C + ci) * H + ih) * W + iw, ((o * cg + c) * KH + kh) * KW + kw,
                    ((n * O + o) * OH() + oh) * OW() + ow);
                }
  }
};

TEST(Convolution, ForwardAndBackwardAgainstReference) {
  Conv2d cv;
  auto x = HostTensor::make(DType::Float32, {cv.N, cv.C, cv.H, cv.W}).randomize(1);
  auto w = HostTensor::make(DType::Float32, {cv.O, cv.C / cv.G, cv.KH, cv.KW}).randomize(2);
  auto b = HostTensor::make(DType::Float32, {cv.O}).randomize(3);
  auto gy = HostTensor::make(DType::Float32, {cv.N, cv.O, cv.OH(), cv.OW()}).randomize(4);
  std::vector<double> y(gy.numel()), gx(x.numel(), 0), gw(w.numel(), 0);
  for (int64_t i = 0; i < gy.numel(); ++i) y[i] = b.get((i / (cv.OH() * cv.OW())) % cv.O);
  cv.terms([&](int64_t xi, int64_t wi, int64_t yi) {
    y[yi] += x.get(xi) * w.get(wi);
    gx[xi] += gy.get(yi) * w.get(wi);
    gw[wi] += gy.get(yi) * x.get(xi);
  });
  auto out = HostTensor::make(DType::Float32, {cv.N, cv.O, cv.OH(), cv.OW()});
  run_op(Op::Convolution, {x.vt(), w.vt(), b.vt(), out.vt()}, 3,
         {x.arg(), w.arg(), b.arg(), out.arg()}, cv.attrs(false));
  EXPECT_ALL_NEAR(out, y, 1e-4, 1e-4);
  auto gxo = HostTensor::make(DType::Float32, {cv.N, cv.C, cv.H, cv.W});
  run_op(Op::ConvolutionBackwardInput, {gy.vt(), w.vt(), gxo.vt()}, 2, {gy.arg(), w.arg(), gxo.arg()},
         cv.attrs(false));
  EXPECT_ALL_NEAR(gxo, gx, 1e-4, 1e-4);
  auto gwo = HostTensor::make(DType::Float32, {cv.O, cv.C / cv.G, cv.KH, cv.KW});
  run_op(Op::ConvolutionBackwardWeight, {gy.vt(), x.vt(), gwo.vt()}, 2, {gy.arg(), x.arg(), gwo.arg()},
         cv.attrs(false));
  EXPECT_ALL_NEAR(gwo, gw, 1e-4, 1e-4);

  // Transposed convolution of gy with the same weight is the backward input of
  // the forward one (weight [C_in_t = O, C_out_t / G, ...]); plus bias.
  auto bt = HostTensor::make(DType::Float32, {cv.C}).randomize(5);
  auto yt = HostTensor::make(DType::Float32, {cv.N, cv.C, cv.H, cv.W});
  run_op(Op::Convolution, {gy.vt(), w.vt(), bt.vt(), yt.vt()}, 3, {gy.arg(), w.arg(), bt.arg(), yt.arg()},
         cv.attrs(true));
  std::vector<double> want(gx);
  for (int64_t i = 0; i < yt.numel(); ++i) want[i] += bt.get((i / (cv.H * cv.W)) % cv.C);
  EXPECT_ALL_NEAR(yt, want, 1e-4, 1e-4);
  // Its grad_input is the forward convolution; its grad_weight swaps the roles.
  auto gti = HostTensor::make(DType::Float32, {cv.N, cv.O, cv.OH(), cv.OW()});
  run_op(Op::ConvolutionBackwardInput, {x.vt(), w.vt(), gti.vt()}, 2, {x.arg(), w.arg(), gti.arg()},
         cv.attrs(true));
  std::vector<double> ynb(gy.numel(), 0);
  cv.terms([&](int64_t xi, int64_t wi, int64_t yi) { ynb[yi] += x.get(xi) * w.get(wi); });
  EXPECT_ALL_NEAR(gti, ynb, 1e-4, 1e-4);
  auto gtw = HostTensor::make(DType::Float32, {cv.O, cv.C / cv.G, cv.KH, cv.KW});
  run_op(Op::ConvolutionBackwardWeight, {x.vt(), gy.vt(), gtw.vt()}, 2, {x.arg(), gy.arg(), gtw.arg()},
         cv.attrs(true));
  EXPECT_ALL_NEAR(gtw, gw, 1e-4, 1e-4);
}

TEST(Convolution, StridedInputsAndHalfTypes) {
  Conv2d cv;
  cv.G = 1;
  cv.O = 3;
  auto xt = HostTensor::make(DType::BFloat16, {cv.N, cv.C, cv.H, cv.W},
                             {cv.C * cv.H * cv.W, 1, cv.W * cv.C, cv.C})  // channels-last
                .randomize(6);
  auto w = HostTensor::make(DType::BFloat16, {cv.O, cv.C, cv.KH, cv.KW}).randomize(7);
  std::vector<double> y(cv.N * cv.O * cv.OH() * cv.OW(), 0);
  cv.terms([&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += xt.get(xi) * w.get(wi); });
  for (DType odt : {DType::BFloat16}) {
    auto out = HostTensor::make(odt, {cv.N, cv.O, cv.OH(), cv.OW()});
    run_op(Op::Convolution, {xt.vt(), w.vt(), ValueType::none(), out.vt()}, 3,
           {xt.arg(), w.arg(), onrt_arg{}, out.arg()}, cv.attrs(false));
    EXPECT_ALL_NEAR(out, y, 2e-2, 5e-2);
  }
}

TEST(Convolution, RejectsMismatchedShapes) {
  auto x = HostTensor::make(DType::Float32, {1, 3, 5, 5});
  auto w = HostTensor::make(DType::Float32, {2, 4, 3, 3});
  auto out = HostTensor::make(DType::Float32, {1, 2, 3, 3});
  Graph g = Graph::single_op(Op::Convolution, {x.vt(), w.vt(), ValueType::none(), out.vt()}, 3,
                             {0, 1, 1, 1, 0, 0, 1, 1, 0, 0});
  EXPECT_THROW(compile(g), CompileError);
}

TEST(Pool2d, MaxAvgAdaptiveAndBackward) {
  const int64_t P = 3, H = 7, W = 6;
  auto x = HostTensor::make(DType::Float32, {P, H, W}).randomize(8);
  // MaxPool 3x3 stride 2 pad 1 -> 4x3.
  auto out = HostTensor::make(DType::Float32, {P, 4, 3});
  auto idx = HostTensor::make(DType::Int64, {P, 4, 3});
  run_op(Op::MaxPool2d, {x.vt(), out.vt(), idx.vt()}, 1, {x.arg(), out.arg(), idx.arg()},
         {3, 3, 2, 2, 1, 1, 1, 1});
  for (int64_t c = 0; c < P; ++c)
    for (int64_t oh = 0; oh < 4; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        double m = -INFINITY;
        int64_t mi = -1;
        for (int64_t h = oh * 2 - 1; h < oh * 2 + 2; ++h)
          for (int64_t w = ow * 2 - 1; w < ow * 2 + 2; ++w)
            if (h >= 0 && h < H && w >= 0 && w < W && x.get((c * H + h) * W + w) > m) {
              m = x.get((c * H + h) * W + w);
              mi = h * W + w;
            }
        const int64_t o = (c * 4 + oh) * 3 + ow;
        ASSERT_EQ(out.get(o), m);
        ASSERT_EQ(idx.get_int(o), mi);
      }
  // Backward scatters grad by index.
  auto go = HostTensor::make(DType::Float32, {P, 4, 3}).randomize(9);
  auto gi = HostTensor::make(DType::Float32, {P, H, W});
  run_op(Op::MaxPool2dBackward, {go.vt(), idx.vt(), gi.vt()}, 2, {go.arg(), idx.arg(), gi.arg()});
  std::vector<double> want(P * H * W, 0);
  for (int64_t o = 0; o < go.numel(); ++o) want[(o / 12) * H * W + idx.get_int(o)] += go.get(o);
  EXPECT_ALL_NEAR(gi, want, 1e-6, 1e-6);
  // Adaptive average to 3x4 and its backward (sum of grads = sum of grad_out).
  auto aa = HostTensor::make(DType::Float32, {P, 3, 4});
  run_op(Op::AdaptiveAvgPool2d, {x.vt(), aa.vt()}, 1, {x.arg(), aa.arg()});
  for (int64_t c = 0; c < P; ++c)
    for (int64_t oh = 0; oh < 3; ++oh)
      for (int64_t ow = 0; ow < 4; ++ow) {
        const int64_t h0 = oh * H / 3, h1 = ((oh + 1) * H + 2) / 3, w0 = ow * W / 4, w1 = ((ow + 1) * W + 3) / 4;
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += x.get((c * H + h) * W + w);
        ASSERT_TRUE(near_rel(aa.get((c * 3 + oh) * 4 + ow), s / ((h1 - h0) * (w1 - w0)), 1e-5, 1e-6));
      }
  // AvgPool 2x2 stride 2 (no padding): plain block means.
  auto ap = HostTensor::make(DType::Float32, {P, 3, 3});
  run_op(Op::AvgPool2d, {x.vt(), ap.vt()}, 1, {x.arg(), ap.arg()}, {2, 2, 2, 2, 0, 0, 1, 0});
  for (int64_t c = 0; c < P; ++c)
    for (int64_t oh = 0; oh < 3; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        double s = 0;
        for (int64_t h = 2 * oh; h < 2 * oh + 2; ++h)
          for (int64_t w = 2 * ow; w < 2 * ow + 2; ++w) s += x.get((c * H + h) * W + w);
        ASSERT_TRUE(near_rel(ap.get((c * 3 + oh) * 3 + ow), s / 4, 1e-5, 1e-6));
      }
}

TEST(Pool2d, UpsampleNearestAndBilinear) {
  auto x = HostTensor::make(DType::Float32, {2, 3, 4}).randomize(10);
  auto up = HostTensor::make(DType::Float32, {2, 6, 8});
  run_op(Op::UpsampleNearest2d, {x.vt(), ValueType::scalar_float(), ValueType::scalar_float(), up.vt()}, 3,
         {x.arg(), farg(0), farg(0), up.arg()});
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t w = 0; w < 8; ++w)
        ASSERT_EQ(up.get((c * 6 + h) * 8 + w), x.get((c * 3 + h / 2) * 4 + w / 2));
  // Bilinear with align_corners: corners are preserved exactly.
  auto bl = HostTensor::make(DType::Float32, {2, 5, 7});
  run_op(Op::UpsampleBilinear2d, {x.vt(), ValueType::scalar_float(), ValueType::scalar_float(), bl.vt()},
         3, {x.arg(), farg(0), farg(0), bl.arg()}, {1});
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(bl.get(c * 35), x.get(c * 12), 1e-6);
    EXPECT_NEAR(bl.get(c * 35 + 34), x.get(c * 12 + 11), 1e-6);
    EXPECT_NEAR(bl.get(c * 35 + 2 * 7 + 3), (x.get(c * 12 + 5) + x.get(c * 12 + 6)) / 2, 1e-5);
  }
  // Backward of nearest sums the 4 copies of each input pixel.
  auto g = HostTensor::make(DType::Float32, {2, 6, 8}).fill_fn([](int64_t) { return 1.0; });
  auto gi = HostTensor::make(DType::Float32, {2, 3, 4});
  run_op(Op::UpsampleNearest2dBackward, {g.vt(), ValueType::scalar_float(), ValueType::scalar_float(), gi.vt()},
         3, {g.arg(), farg(0), farg(0), gi.arg()});
  EXPECT_ALL_NEAR(gi, std::vector<double>(24, 4.0), 0, 0);
}

}  // namespace
}  // namespace ontest
