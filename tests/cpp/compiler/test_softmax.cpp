// The softmax family (Softmax, LogSoftmax and their backward ops) against
// double-precision references.
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
}  // namespace
}  // namespace ontest
