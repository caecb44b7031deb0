// The gather and index family as single-op graphs against reference loops:
// Gather/Scatter, Index, IndexSelect, EmbeddingBackward, Sort and Isin.
#include <algorithm>

#include "test_util.h"

namespace ontest {
namespace {

TEST(Gather, GatherAndScatterAddAlongDim1) {
  auto x = HostTensor::make(DType::Float32, {3, 5}).randomize(1);
  auto idx = HostTensor::make(DType::Int64, {3, 4}).randomize(2, 0, 5);
  auto out = HostTensor::make(DType::Float32, {3, 4});
  run_op(Op::Gather, {x.vt(), idx.vt(), out.vt()}, 2, {x.arg(), idx.arg(), out.arg()}, {1});
  std::vector<double> ref(12);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) ref[r * 4 + c] = x.get(r * 5 + idx.get_int(r * 4 + c));
  EXPECT_ALL_NEAR(out, ref, 0, 0);

  auto src = HostTensor::make(DType::Float32, {3, 4}).randomize(3);
  auto sout = HostTensor::make(DType::Float32, {3, 5});
  run_op(Op::Scatter, {x.vt(), idx.vt(), src.vt(), sout.vt()}, 3, {x.arg(), idx.arg(), src.arg(), sout.arg()},
         {1, 1, 1});
  std::vector<double> sref = x.values();
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) sref[r * 5 + idx.get_int(r * 4 + c)] += src.get(r * 4 + c);
  EXPECT_ALL_NEAR(sout, sref, 1e-6, 1e-6);
}

TEST(Gather, OutOfRangeIndexFails) {
  auto x = HostTensor::make(DType::Float32, {2, 3}).randomize(1);
  auto idx = HostTensor::make(DType::Int64, {2, 1});
  idx.set_int(0, 3);
  auto out = HostTensor::make(DType::Float32, {2, 1});
  Graph g = Graph::single_op(Op::Gather, {x.vt(), idx.vt(), out.vt()}, 2, {1});
  const std::string err = run_graph(g, {x.arg(), idx.arg(), out.arg()});
  EXPECT_NE(err.find("out of bounds"), std::string::npos) << err;
}

TEST(Gather, IndexRowsWithNegativeIndices) {
  auto x = HostTensor::make(DType::BFloat16, {4, 3}).randomize(4);
  auto ind = HostTensor::make(DType::Int64, {1, 3});
  const int64_t v[] = {3, -4, 1};
  for (int i = 0; i < 3; ++i) ind.set_int(i, v[i]);
  auto out = HostTensor::make(DType::BFloat16, {3, 3});
  run_op(Op::Index, {x.vt(), ind.vt(), out.vt()}, 2, {x.arg(), ind.arg(), out.arg()}, {0});
  std::vector<double> ref(9);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) ref[r * 3 + c] = x.get(((v[r] + 4) % 4) * 3 + c);
  EXPECT_ALL_NEAR(out, ref, 0, 0);
}

TEST(Gather, StableSortDescendingWithNan) {
  auto x = HostTensor::make(DType::Float32, {1, 6});
  const double v[] = {1, NAN, 2, 1, NAN, 0};
  x.fill_fn([&](int64_t i) { return v[i]; });
  auto val = HostTensor::make(DType::Float32, {1, 6});
  auto idx = HostTensor::make(DType::Int64, {1, 6});
  run_op(Op::Sort, {x.vt(), val.vt(), idx.vt()}, 1, {x.arg(), val.arg(), idx.arg()}, {1, 1});
  const int64_t want[] = {1, 4, 2, 0, 3, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(idx.get_int(i), want[i]) << i;
}

TEST(Gather, IsinInvert) {
  auto el = HostTensor::make(DType::Int32, {7}).fill_fn([](int64_t i) { return i; });
  auto te = HostTensor::make(DType::Int32, {3}).fill_fn([](int64_t i) { return 2 * i + 1; });
  auto out = HostTensor::make(DType::Bool, {7});
  run_op(Op::Isin, {el.vt(), te.vt(), out.vt()}, 2, {el.arg(), te.arg(), out.arg()}, {1});
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(out.get(i), (i == 1 || i == 3 || i == 5) ? 0 : 1) << i;
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
