// Tril/Triu, ArgMax/ArgMin (with values) and Cumsum/Cumprod as single-op graphs.
#include "test_util.h"

namespace ontest {
namespace {

TEST(Select, TrilTriuAnyStrides) {
  auto x = HostTensor::make(DType::Float32, {2, 5, 4}).randomize(1);
  auto xt = HostTensor::make(DType::Float32, {2, 4, 5}, {20, 1, 4});  // transposed view of x
  xt.buf = x.buf;
  for (int64_t k : {-1, 0, 2}) {
    for (Op op : {Op::Tril, Op::Triu}) {
      auto out = HostTensor::make(DType::Float32, {2, 4, 5});
      run_op(op, {xt.vt(), out.vt()}, 1, {xt.arg(), out.arg()}, {k});
      std::vector<double> ref(40);
      for (int64_t i = 0; i < 40; ++i) {
        const int64_t c = i % 5, r = (i / 5) % 4;
        const bool keep = op == Op::Tril ? c - r <= k : c - r >= k;
        ref[i] = keep ? xt.get(i) : 0.0;
      }
      EXPECT_ALL_NEAR(out, ref, 0, 0);
    }
  }
}

TEST(Select, ArgMaxWithValuesNanAndTies) {
  auto x = HostTensor::make(DType::Float32, {2, 5});
  const double v[] = {1, 3, 3, NAN, 5, 2, 2, 0, 1, 2};
  x.fill_fn([&](int64_t i) { return v[i]; });
  auto idx = HostTensor::make(DType::Int64, {2, 1});
  auto val = HostTensor::make(DType::Float32, {2, 1});
  run_op(Op::ArgMax, {x.vt(), idx.vt(), val.vt()}, 1, {x.arg(), idx.arg(), val.arg()}, {1});
  EXPECT_EQ(idx.get_int(0), 3);
  EXPECT_TRUE(std::isnan(val.get(0)));
  EXPECT_EQ(idx.get_int(1), 0);
  EXPECT_EQ(val.get(1), 2);
  run_op(Op::ArgMin, {x.vt(), idx.vt()}, 1, {x.arg(), idx.arg()}, {-1});
  EXPECT_EQ(idx.get_int(0), 3);
  EXPECT_EQ(idx.get_int(1), 2);
}

TEST(Select, ArgMinOverDim0Ints) {
  auto x = HostTensor::make(DType::Int32, {4, 3}).randomize(2, -50, 50);
  auto idx = HostTensor::make(DType::Int64, {1, 3});
  run_op(Op::ArgMin, {x.vt(), idx.vt()}, 1, {x.arg(), idx.arg()}, {0});
  for (int64_t c = 0; c < 3; ++c) {
    int64_t best = 0;
    for (int64_t r = 1; r < 4; ++r)
      if (x.get(r * 3 + c) < x.get(best * 3 + c)) best = r;
    EXPECT_EQ(idx.get_int(c), best);
  }
}

TEST(Select, CumsumCumprod) {
  auto x = HostTensor::make(DType::Int32, {3, 6}).randomize(3, -5, 5);
  auto out = HostTensor::make(DType::Int64, {3, 6});
  run_op(Op::Cumsum, {x.vt(), out.vt()}, 1, {x.arg(), out.arg()}, {1});
  std::vector<double> ref(18);
  for (int64_t r = 0; r < 3; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < 6; ++c) ref[r * 6 + c] = acc += x.get(r * 6 + c);
  }
  EXPECT_ALL_NEAR(out, ref, 0, 0);
  auto f = HostTensor::make(DType::Float32, {4, 3}).randomize(4, 0.5, 1.5);
  auto fo = HostTensor::make(DType::Float32, {4, 3});
  run_op(Op::Cumprod, {f.vt(), fo.vt()}, 1, {f.arg(), fo.arg()}, {0});
  std::vector<double> fr(12);
  for (int64_t c = 0; c < 3; ++c) {
    double acc = 1;
    for (int64_t r = 0; r < 4; ++r) fr[r * 3 + c] = acc *= f.get(r * 3 + c);
  }
  EXPECT_ALL_NEAR(fo, fr, 1e-6, 0);
}

TEST(Select, RejectsBadShapes) {
  auto x = HostTensor::make(DType::Float32, {4});
  auto o = HostTensor::make(DType::Float32, {4});
  EXPECT_THROW(compile(Graph::single_op(Op::Tril, {x.vt(), o.vt()}, 1, {0})), CompileError);
  auto y = HostTensor::make(DType::Float32, {2, 3});
  auto bad = HostTensor::make(DType::Int64, {2, 3});
  EXPECT_THROW(compile(Graph::single_op(Op::ArgMax, {y.vt(), bad.vt()}, 1, {1})), CompileError);
}

}  // namespace
}  // namespace ontest
