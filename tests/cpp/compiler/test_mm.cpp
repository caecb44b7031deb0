// Mm/Addmm/Bmm through oneDNN against a naive reference loop.
#include "test_util.h"

namespace ontest {
namespace {

// ref[b][i][j] = sum_k a[b][i][k] * b[b][k][j] in double.
std::vector<double> ref_mm(const HostTensor& a, const HostTensor& b, int64_t B, int64_t M,
                           int64_t K, int64_t N) {
  std::vector<double> r(B * M * N, 0.0);
  for (int64_t x = 0; x < B; ++x)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a.get((x * M + i) * K + k) * b.get((x * K + k) * N + j);
        r[(x * M + i) * N + j] = s;
      }
  return r;
}

HostTensor transposed_view(DType dt, int64_t R, int64_t C, uint32_t seed) {
  // Logical [R, C] stored column-major.
  auto t = HostTensor::make(dt, {R, C}, {1, R});
  t.randomize(seed, -1, 1);
  return t;
}

TEST(Gemm, MmF32AllTransposeCombinations) {
  const int64_t M = 13, K = 17, N = 9;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      auto a = ta ? transposed_view(DType::Float32, M, K, 1) : HostTensor::make(DType::Float32, {M, K}).randomize(1, -1, 1);
      auto b = tb ? transposed_view(DType::Float32, K, N, 2) : HostTensor::make(DType::Float32, {K, N}).randomize(2, -1, 1);
      auto out = HostTensor::make(DType::Float32, {M, N});
      run_op(Op::Mm, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
      EXPECT_ALL_NEAR(out, ref_mm(a, b, 1, M, K, N), 1e-5, 1e-5);
    }
}

TEST(Gemm, MmGeneralStridesAndTransposedOutput) {
  // Every-other-column view of a, and an output stored column-major.
  const int64_t M = 8, K = 6, N = 5;
  auto a = HostTensor::make(DType::Float32, {M, K}, {2 * K, 2}).randomize(3, -1, 1);
  auto b = HostTensor::make(DType::Float32, {K, N}).randomize(4, -1, 1);
  auto out = HostTensor::make(DType::Float32, {M, N}, {1, M});
  run_op(Op::Mm, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  EXPECT_ALL_NEAR(out, ref_mm(a, b, 1, M, K, N), 1e-5, 1e-5);
}

TEST(Gemm, AddmmBetaAlphaExpandedBias) {
  const int64_t M = 7, K = 33, N = 11;
  auto a = HostTensor::make(DType::Float32, {M, K}).randomize(5, -1, 1);
  auto b = transposed_view(DType::Float32, K, N, 6);  // like linear's weight.t()
  auto bias_row = HostTensor::make(DType::Float32, {N}).randomize(7);
  HostTensor bias = bias_row;
  bias.type = make_type(DType::Float32, {M, N}, {0, 1});
  auto out = HostTensor::make(DType::Float32, {M, N});
  run_op(Op::Addmm,
         {bias.vt(), a.vt(), b.vt(), ValueType::scalar_float(), ValueType::scalar_float(), out.vt()}, 5,
         {bias.arg(), a.arg(), b.arg(), farg(0.5), farg(2.0), out.arg()});
  auto r = ref_mm(a, b, 1, M, K, N);
  for (int64_t i = 0; i < M * N; ++i) r[i] = 0.5 * bias_row.get(i % N) + 2.0 * r[i];
  EXPECT_ALL_NEAR(out, r, 1e-5, 1e-5);
  // beta = 0 ignores the bias even when it holds NaN.
  bias_row.set(0, NAN);
  run_op(Op::Addmm,
         {bias.vt(), a.vt(), b.vt(), ValueType::scalar_int(), ValueType::scalar_int(), out.vt()}, 5,
         {bias.arg(), a.arg(), b.arg(), iarg(0), iarg(1), out.arg()});
  EXPECT_ALL_NEAR(out, ref_mm(a, b, 1, M, K, N), 1e-5, 1e-5);
}

TEST(Gemm, BmmWithTransposedBatchesAndBroadcastBatch) {
  const int64_t B = 3, M = 5, K = 4, N = 6;
  auto a = HostTensor::make(DType::Float32, {B, M, K}).randomize(8, -1, 1);
  // b[x] = stored transposed per batch.
  auto b = HostTensor::make(DType::Float32, {B, K, N}, {K * N, 1, K}).randomize(9, -1, 1);
  auto out = HostTensor::make(DType::Float32, {B, M, N});
  run_op(Op::Bmm, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  EXPECT_ALL_NEAR(out, ref_mm(a, b, B, M, K, N), 1e-5, 1e-5);
  auto b1 = HostTensor::make(DType::Float32, {K, N}).randomize(10, -1, 1);
  HostTensor bb = b1;
  bb.type = make_type(DType::Float32, {B, K, N}, {0, N, 1});
  run_op(Op::Bmm, {a.vt(), bb.vt(), out.vt()}, 2, {a.arg(), bb.arg(), out.arg()});
  EXPECT_ALL_NEAR(out, ref_mm(a, bb, B, M, K, N), 1e-5, 1e-5);
}

TEST(Gemm, HalfTypesAccumulateInFloatRoundOnce) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    const int64_t M = 16, K = 64, N = 24;
    auto a = HostTensor::make(dt, {M, K}).randomize(11, -1, 1);
    auto b = transposed_view(dt, K, N, 12);
    auto out = HostTensor::make(dt, {M, N});
    run_op(Op::Mm, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
    auto r = ref_mm(a, b, 1, M, K, N);
    for (int64_t i = 0; i < M * N; ++i) {
      // Exact products, f32 sums: the result is the double reference rounded once
      // (up to one half-type ulp when the f32 sum lands near a rounding boundary).
      const double want = round_to(dt, r[i]);
      const double ulp = dt == DType::BFloat16 ? std::ldexp(std::fabs(want), -7) : std::ldexp(std::fabs(want), -10);
      ASSERT_LE(std::fabs(out.get(i) - want), ulp + 1e-6) << dtype_name(dt) << " " << i;
    }
  }
}

TEST(Gemm, ZeroInnerDimAndLarge) {
  auto a = HostTensor::make(DType::Float32, {3, 0});
  auto b = HostTensor::make(DType::Float32, {0, 4});
  auto out = HostTensor::make(DType::Float32, {3, 4}).randomize(1);
  run_op(Op::Mm, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out.get(i), 0.0);
  const int64_t M = 96, K = 128, N = 80;
  auto x = HostTensor::make(DType::Float32, {M, K}).randomize(13, -1, 1);
  auto y = HostTensor::make(DType::Float32, {K, N}).randomize(14, -1, 1);
  auto z = HostTensor::make(DType::Float32, {M, N});
  run_op(Op::Mm, {x.vt(), y.vt(), z.vt()}, 2, {x.arg(), y.arg(), z.arg()});
  EXPECT_ALL_NEAR(z, ref_mm(x, y, 1, M, K, N), 1e-5, 1e-5);
}

// inf * 0 is NaN in every column, whatever the width, the layouts and the
// BLIS kernel family (AVX2 sup kernels dropped it from odd-width edges).
TEST(Gemm, InfTimesZeroIsNaNInEveryColumn) {
  for (int64_t m : {2, 3, 7})
    for (int64_t n : {3, 5, 9, 17})
      for (int64_t kk : {1, 2, 5, 9})
        for (int layout = 0; layout < 8; ++layout) {
          auto a = layout & 1 ? transposed_view(DType::Float32, m, kk, 1)
                              : HostTensor::make(DType::Float32, {m, kk}).randomize(1, -1, 1);
          auto b = layout & 2 ? transposed_view(DType::Float32, kk, n, 2)
                              : HostTensor::make(DType::Float32, {kk, n}).randomize(2, -1, 1);
          auto out = layout & 4 ? HostTensor::make(DType::Float32, {m, n}, {1, m})
                                : HostTensor::make(DType::Float32, {m, n});
          a.set((m - 1) * kk + kk - 1, INFINITY);  // last row's last term: inf * 0
          for (int64_t j = 0; j < n; ++j) b.set((kk - 1) * n + j, 0.0);
          run_op(Op::Mm, {a.vt(), b.vt(), out.vt()}, 2, {a.arg(), b.arg(), out.arg()});
          for (int64_t j = 0; j < n; ++j)
            ASSERT_TRUE(std::isnan(out.get((m - 1) * n + j)))
                << "m=" << m << " n=" << n << " k=" << kk << " layout=" << layout << " column "
                << j;
        }
}

TEST(Gemm, RejectsIntegerAndMismatchedShapes) {
  auto ia = HostTensor::make(DType::Int64, {2, 3}), ib = HostTensor::make(DType::Int64, {3, 4}),
       io = HostTensor::make(DType::Int64, {2, 4});
  try {
    compile(Graph::single_op(Op::Mm, {ia.vt(), ib.vt(), io.vt()}, 2));
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_STREQ(e.what(), "Mm: unsupported dtype Int64 (operands: Int64[2, 3], Int64[3, 4] -> Int64[2, 4])");
  }
  auto a = HostTensor::make(DType::Float32, {2, 3}), b = HostTensor::make(DType::Float32, {4, 4}),
       o = HostTensor::make(DType::Float32, {2, 4});
  EXPECT_THROW(compile(Graph::single_op(Op::Mm, {a.vt(), b.vt(), o.vt()}, 2)), CompileError);
}

}  // namespace
}  // namespace ontest
