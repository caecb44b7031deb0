// Norms: layer norm, RMS norm, group norm, batch norm (forward and backward)
// executed as single-op graphs and compared with reference loops.
#include "test_util.h"

namespace ontest {
namespace {

ValueType none() { return ValueType::none(); }
ValueType fscalar() { return ValueType::scalar_float(); }
onrt_arg nul() { onrt_arg a; a.ptr = nullptr; return a; }

// Reference layer norm over rows of [M, N]; returns y, mean, rstd.
void ref_ln(const HostTensor& x, const HostTensor* w, const HostTensor* b, int64_t M, int64_t N,
            double eps, bool rms, std::vector<double>& y, std::vector<double>& mean,
            std::vector<double>& rstd) {
  y.assign(M * N, 0);
  mean.assign(M, 0);
  rstd.assign(M, 0);
  for (int64_t r = 0; r < M; ++r) {
    double s = 0, q = 0;
    for (int64_t j = 0; j < N; ++j) s += x.get(r * N + j);
    const double m = rms ? 0 : s / N;
    for (int64_t j = 0; j < N; ++j) q += (x.get(r * N + j) - m) * (x.get(r * N + j) - m);
    const double rs = 1 / std::sqrt(q / N + eps);
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t j = 0; j < N; ++j)
      y[r * N + j] = (x.get(r * N + j) - m) * rs * (w ? w->get(j) : 1) + (b ? b->get(j) : 0);
  }
}

TEST(Norm, LayerNormForward) {
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    const int64_t M = 6, N = 37;
    auto x = HostTensor::make(dt, {2, 3, N}).randomize(1, -3, 3);
    auto w = HostTensor::make(DType::Float32, {N}).randomize(2);
    auto b = HostTensor::make(dt, {N}).randomize(3);  // converted by the compiler
    auto y = HostTensor::make(dt, {2, 3, N});
    auto mean = HostTensor::make(DType::Float32, {2, 3, 1});
    auto rstd = HostTensor::make(dt, {2, 3, 1});
    run_op(Op::LayerNorm, {x.vt(), w.vt(), b.vt(), fscalar(), y.vt(), mean.vt(), rstd.vt()}, 4,
           {x.arg(), w.arg(), b.arg(), farg(1e-5), y.arg(), mean.arg(), rstd.arg()}, {2});
    std::vector<double> ry, rm, rr;
    ref_ln(x, &w, &b, M, N, 1e-5, false, ry, rm, rr);
    const double tol = dt == DType::Float32 ? 1e-5 : 2e-2;
    EXPECT_ALL_NEAR(y, ry, tol, tol);
    EXPECT_ALL_NEAR(mean, rm, 1e-5, 1e-6);
    EXPECT_ALL_NEAR(rstd, rr, tol, 1e-6);
  }
}

TEST(Norm, LayerNormStridedInputAndNoAffine) {
  const int64_t M = 5, N = 8;
  auto x = HostTensor::make(DType::Float32, {M, N}, {1, M}).randomize(4);  // transposed
  auto y = HostTensor::make(DType::Float32, {M, N});
  auto mean = HostTensor::make(DType::Float32, {M, 1});
  auto rstd = HostTensor::make(DType::Float32, {M, 1});
  run_op(Op::LayerNorm, {x.vt(), none(), none(), fscalar(), y.vt(), mean.vt(), rstd.vt()}, 4,
         {x.arg(), nul(), nul(), farg(1e-5), y.arg(), mean.arg(), rstd.arg()}, {1});
  std::vector<double> ry, rm, rr;
  ref_ln(x, nullptr, nullptr, M, N, 1e-5, false, ry, rm, rr);
  EXPECT_ALL_NEAR(y, ry, 1e-5, 1e-6);
}

TEST(Norm, LayerNormAndRmsBackward) {
  const int64_t M = 4, N = 70;
  for (bool rms : {false, true}) {
    auto x = HostTensor::make(DType::Float32, {M, N}).randomize(5);
    auto g = HostTensor::make(DType::Float32, {M, N}).randomize(6);
    auto w = HostTensor::make(DType::Float32, {N}).randomize(7);
    std::vector<double> ry, rm, rr;
    ref_ln(x, &w, nullptr, M, N, 1e-5, rms, ry, rm, rr);
    auto mean = HostTensor::make(DType::Float32, {M}).fill_fn([&](int64_t i) { return rm[i]; });
    auto rstd = HostTensor::make(DType::Float32, {M}).fill_fn([&](int64_t i) { return rr[i]; });
    auto dx = HostTensor::make(DType::Float32, {M, N});
    auto dw = HostTensor::make(DType::Float32, {N});
    auto db = HostTensor::make(DType::Float32, {N});
    if (rms) {
      run_op(Op::RmsNormBackward, {g.vt(), x.vt(), rstd.vt(), w.vt(), dx.vt(), dw.vt()}, 4,
             {g.arg(), x.arg(), rstd.arg(), w.arg(), dx.arg(), dw.arg()}, {1, 3});
    } else {
      run_op(Op::LayerNormBackward,
             {g.vt(), x.vt(), mean.vt(), rstd.vt(), w.vt(), dx.vt(), dw.vt(), db.vt()}, 5,
             {g.arg(), x.arg(), mean.arg(), rstd.arg(), w.arg(), dx.arg(), dw.arg(), db.arg()}, {1, 7});
    }
    std::vector<double> rdx(M * N), rdw(N, 0), rdb(N, 0);
    for (int64_t r = 0; r < M; ++r) {
      double a = 0, c = 0;
      for (int64_t j = 0; j < N; ++j) {
        const double gw = g.get(r * N + j) * w.get(j);
        const double xh = (x.get(r * N + j) - rm[r]) * rr[r];
        a += gw;
        c += gw * xh;
        rdw[j] += g.get(r * N + j) * xh;
        rdb[j] += g.get(r * N + j);
      }
      a = rms ? 0 : a / N;
      c /= N;
      for (int64_t j = 0; j < N; ++j) {
        const double xh = (x.get(r * N + j) - rm[r]) * rr[r];
        rdx[r * N + j] = rr[r] * (g.get(r * N + j) * w.get(j) - a - xh * c);
      }
    }
    EXPECT_ALL_NEAR(dx, rdx, 1e-4, 1e-5);
    EXPECT_ALL_NEAR(dw, rdw, 1e-4, 1e-5);
    if (!rms) EXPECT_ALL_NEAR(db, rdb, 1e-4, 1e-5);
  }
}

TEST(Norm, GroupNormForward) {
  const int64_t N = 2, C = 6, HW = 9, G = 3, D = C / G * HW;
  auto x = HostTensor::make(DType::Float32, {N, C, HW}).randomize(8);
  auto w = HostTensor::make(DType::Float32, {C}).randomize(9);
  auto b = HostTensor::make(DType::Float32, {C}).randomize(10);
  auto y = HostTensor::make(DType::Float32, {N, C, HW});
  auto mean = HostTensor::make(DType::Float32, {N, G});
  auto rstd = HostTensor::make(DType::Float32, {N, G});
  run_op(Op::GroupNorm, {x.vt(), w.vt(), b.vt(), fscalar(), y.vt(), mean.vt(), rstd.vt()}, 4,
         {x.arg(), w.arg(), b.arg(), farg(1e-5), y.arg(), mean.arg(), rstd.arg()}, {G});
  std::vector<double> ry, rm, rr;
  ref_ln(x, nullptr, nullptr, N * G, D, 1e-5, false, ry, rm, rr);
  for (int64_t i = 0; i < N * C * HW; ++i) {
    const int64_t c = (i / HW) % C;
    ry[i] = ry[i] * w.get(c) + b.get(c);
  }
  EXPECT_ALL_NEAR(y, ry, 1e-5, 1e-5);
  EXPECT_ALL_NEAR(rstd, rr, 1e-5, 1e-6);
}

TEST(Norm, BatchNormTrainingUpdatesRunningStats) {
  const int64_t N = 3, C = 4, HW = 5, cnt = N * HW;
  auto x = HostTensor::make(DType::Float32, {N, C, HW}).randomize(11);
  auto rm = HostTensor::make(DType::Float32, {C}).fill_fn([](int64_t) { return 0.5; });
  auto rv = HostTensor::make(DType::Float32, {C}).fill_fn([](int64_t) { return 2.0; });
  auto y = HostTensor::make(DType::Float32, {N, C, HW});
  auto sm = HostTensor::make(DType::Float32, {C});
  auto si = HostTensor::make(DType::Float32, {C});
  run_op(Op::BatchNorm,
         {x.vt(), none(), none(), rm.vt(), rv.vt(), fscalar(), fscalar(), y.vt(), sm.vt(), si.vt()}, 7,
         {x.arg(), nul(), nul(), rm.arg(), rv.arg(), farg(0.1), farg(1e-5), y.arg(), sm.arg(), si.arg()},
         {1});
  for (int64_t c = 0; c < C; ++c) {
    double s = 0, q = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) s += x.get((n * C + c) * HW + j);
    const double m = s / cnt;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) q += std::pow(x.get((n * C + c) * HW + j) - m, 2);
    EXPECT_TRUE(near_rel(sm.get(c), m, 1e-5, 1e-6));
    EXPECT_TRUE(near_rel(si.get(c), 1 / std::sqrt(q / cnt + 1e-5), 1e-5));
    EXPECT_TRUE(near_rel(rm.get(c), 0.9 * 0.5 + 0.1 * m, 1e-5, 1e-6));
    EXPECT_TRUE(near_rel(rv.get(c), 0.9 * 2.0 + 0.1 * q / (cnt - 1), 1e-5));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) {
        const int64_t i = (n * C + c) * HW + j;
        EXPECT_TRUE(near_rel(y.get(i), (x.get(i) - m) / std::sqrt(q / cnt + 1e-5), 1e-5, 1e-5));
      }
  }
}

TEST(Norm, RejectsIntegerInput) {
  auto x = HostTensor::make(DType::Int32, {2, 4});
  auto y = HostTensor::make(DType::Int32, {2, 4});
  auto r = HostTensor::make(DType::Float32, {2});
  Graph g = Graph::single_op(Op::RmsNorm, {x.vt(), none(), fscalar(), y.vt(), r.vt()}, 3, {1});
  EXPECT_THROW(compile(g), CompileError);
}

}  // namespace
}  // namespace ontest
