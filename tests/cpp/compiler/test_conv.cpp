// Convolution (forward, backward input, backward weight, transposed, groups,
// stride, padding, dilation) against a direct reference loop.
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

}  // namespace
}  // namespace ontest
