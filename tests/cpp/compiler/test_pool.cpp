// Pooling and upsampling (max, avg, adaptive, nearest, bilinear, and their
// backward ops) against reference loops.
#include "test_util.h"

namespace ontest {
namespace {

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
