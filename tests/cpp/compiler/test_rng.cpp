// The rng family: Uniform, Normal, Bernoulli, RandInt, dropout (+ backward),
// Bernoulli with tensor p, exponential, geometric, log-normal, randperm,
// multinomial: statistics, determinism, errors.
#include <algorithm>
#include <set>

#include "test_util.h"

namespace ontest {
namespace {

ValueType si() { return ValueType::scalar_int(); }
ValueType sf() { return ValueType::scalar_float(); }

TEST(RandomExtra, DropoutAndBackward) {
  const int64_t n = 40000;
  auto x = HostTensor::make(DType::Float32, {200, 200}).randomize(1);
  auto out = HostTensor::make(DType::Float32, {200, 200});
  auto mask = HostTensor::make(DType::Bool, {200, 200});
  const double p = 0.25;
  run_op(Op::Dropout, {si(), si(), sf(), x.vt(), out.vt(), mask.vt()}, 4,
         {iarg(42), iarg(0), farg(p), x.arg(), out.arg(), mask.arg()});
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool m = mask.get(i) != 0;
    kept += m;
    ASSERT_TRUE(near_rel(out.get(i), m ? x.get(i) / (1 - p) : 0.0, 1e-6)) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.01);
  // Same seed and offset: same mask; backward scales the kept grads.
  auto mask2 = HostTensor::make(DType::Bool, {200, 200});
  auto out2 = HostTensor::make(DType::Float32, {200, 200});
  run_op(Op::Dropout, {si(), si(), sf(), x.vt(), out2.vt(), mask2.vt()}, 4,
         {iarg(42), iarg(0), farg(p), x.arg(), out2.arg(), mask2.arg()});
  EXPECT_EQ(mask.values(), mask2.values());
  auto gi = HostTensor::make(DType::Float32, {200, 200});
  run_op(Op::DropoutBackward, {x.vt(), mask.vt(), sf(), gi.vt()}, 3,
         {x.arg(), mask.arg(), farg(1 / (1 - p)), gi.arg()});
  EXPECT_ALL_NEAR(gi, out.values(), 1e-6, 0);
}

TEST(RandomExtra, BernoulliTensorAndDistributions) {
  const int64_t n = 100000;
  auto pr = HostTensor::make(DType::Float32, {n}).fill_fn([](int64_t i) { return (i % 2) ? 0.8 : 0.0; });
  auto b = HostTensor::make(DType::Int64, {n});
  run_op(Op::BernoulliTensor, {si(), si(), pr.vt(), b.vt()}, 3, {iarg(1), iarg(0), pr.arg(), b.arg()});
  double odd = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 2 == 0) ASSERT_EQ(b.get(i), 0);
    else odd += b.get(i);
  }
  EXPECT_NEAR(odd / (n / 2), 0.8, 0.01);

  auto e = HostTensor::make(DType::Float32, {n});
  run_op(Op::Exponential, {si(), si(), sf(), e.vt()}, 3, {iarg(2), iarg(0), farg(4.0), e.arg()});
  double s = 0;
  for (double v : e.values()) { ASSERT_GE(v, 0); s += v; }
  EXPECT_NEAR(s / n, 0.25, 0.01);

  auto g = HostTensor::make(DType::Int32, {n});
  run_op(Op::Geometric, {si(), si(), sf(), g.vt()}, 3, {iarg(3), iarg(0), farg(0.5), g.arg()});
  s = 0;
  for (double v : g.values()) { ASSERT_GE(v, 1); s += v; }
  EXPECT_NEAR(s / n, 2.0, 0.03);

  auto ln = HostTensor::make(DType::BFloat16, {n});
  run_op(Op::LogNormal, {si(), si(), sf(), sf(), ln.vt()}, 4,
         {iarg(4), iarg(0), farg(1.0), farg(0.25), ln.arg()});
  s = 0;
  for (double v : ln.values()) s += std::log(v);
  EXPECT_NEAR(s / n, 1.0, 0.01);
}

TEST(RandomExtra, RandpermIsAPermutation) {
  for (int64_t n : {1, 2, 5, 1000}) {
    auto out = HostTensor::make(DType::Int64, {n});
    run_op(Op::Randperm, {si(), si(), out.vt()}, 2, {iarg(9), iarg(0), out.arg()});
    std::vector<double> v = out.values();
    std::sort(v.begin(), v.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i);
  }
  // Strided float output.
  auto f = HostTensor::make(DType::Float32, {50}, {2});
  run_op(Op::Randperm, {si(), si(), f.vt()}, 2, {iarg(9), iarg(4), f.arg()});
  const std::vector<double> fv = f.values();
  std::set<double> seen(fv.begin(), fv.end());
  EXPECT_EQ(seen.size(), 50u);
}

TEST(RandomExtra, Multinomial) {
  auto probs = HostTensor::make(DType::Float32, {2, 4});
  const double pv[] = {0.1, 0.0, 0.6, 0.3, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) probs.set(i, pv[i]);
  const int64_t S = 20000;
  auto out = HostTensor::make(DType::Int64, {2, S});
  run_op(Op::Multinomial, {si(), si(), probs.vt(), out.vt()}, 3,
         {iarg(5), iarg(0), probs.arg(), out.arg()}, {1});
  std::vector<double> freq(8, 0);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t j = 0; j < S; ++j) freq[r * 4 + out.get_int(r * S + j)] += 1.0 / S;
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(freq[i], pv[i] / (i < 4 ? 1.0 : 4.0), 0.015) << i;
  auto wo = HostTensor::make(DType::Int64, {2, 3});
  run_op(Op::Multinomial, {si(), si(), probs.vt(), wo.vt()}, 3,
         {iarg(6), iarg(0), probs.arg(), wo.arg()}, {0});
  for (int64_t r = 0; r < 2; ++r) {
    std::set<int64_t> s;
    for (int j = 0; j < 3; ++j) s.insert(wo.get_int(r * 3 + j));
    EXPECT_EQ(s.size(), 3u);
    if (r == 0) EXPECT_EQ(s.count(1), 0u);
  }
  // Invalid distribution: reported by the kernel.
  probs.set(0, -1);
  Graph g = Graph::single_op(Op::Multinomial, {si(), si(), probs.vt(), out.vt()}, 3, {1});
  EXPECT_NE(run_graph(g, {iarg(5), iarg(0), probs.arg(), out.arg()}).find("element < 0"),
            std::string::npos);
}

TEST(Random, UniformDeterministicAndInRange) {
  const int64_t n = 100000;
  auto a = HostTensor::make(DType::Float32, {n}), b = HostTensor::make(DType::Float32, {n});
  std::vector<ValueType> types = {ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_float(),
                                  ValueType::scalar_float(), a.vt()};
  run_op(Op::Uniform, types, 4, {iarg(42), iarg(0), farg(-1), farg(3), a.arg()});
  run_op(Op::Uniform, types, 4, {iarg(42), iarg(0), farg(-1), farg(3), b.arg()});
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.get(i), b.get(i));
    ASSERT_GE(a.get(i), -1.0);
    ASSERT_LT(a.get(i), 3.0);
    mean += a.get(i) / n;
  }
  EXPECT_NEAR(mean, 1.0, 0.02);
  // Offsets: a later offset continues the stream instead of repeating it.
  const int64_t inc = k::random_offset_increment(k::RandomOp::Uniform, DType::Float32, 8);
  EXPECT_EQ(inc, 2);
  auto c = HostTensor::make(DType::Float32, {8});
  run_op(Op::Uniform, {types[0], types[1], types[2], types[3], c.vt()}, 4, {iarg(42), iarg(inc), farg(-1), farg(3), c.arg()});
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(c.get(i), a.get(8 + i));
  // Strided output gets the same values in logical order.
  auto s = HostTensor::make(DType::Float32, {4, 2}, {1, 4});
  run_op(Op::Uniform, {types[0], types[1], types[2], types[3], s.vt()}, 4, {iarg(42), iarg(0), farg(-1), farg(3), s.arg()});
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(s.get(i), a.get(i));
}

TEST(Random, NormalMoments) {
  const int64_t n = 200000;
  auto a = HostTensor::make(DType::Float32, {n});
  run_op(Op::Normal, {ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_float(), ValueType::scalar_float(), a.vt()},
         4, {iarg(7), iarg(3), farg(2.0), farg(0.5), a.arg()});
  double m = 0, v = 0;
  for (int64_t i = 0; i < n; ++i) m += a.get(i) / n;
  for (int64_t i = 0; i < n; ++i) v += (a.get(i) - m) * (a.get(i) - m) / n;
  EXPECT_NEAR(m, 2.0, 0.01);
  EXPECT_NEAR(std::sqrt(v), 0.5, 0.01);
}

TEST(Random, BernoulliAndRandInt) {
  const int64_t n = 50000;
  auto b = HostTensor::make(DType::Bool, {n});
  run_op(Op::Bernoulli, {ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_float(), b.vt()}, 3,
         {iarg(1), iarg(0), farg(0.25), b.arg()});
  double ones = 0;
  for (int64_t i = 0; i < n; ++i) ones += b.get(i);
  EXPECT_NEAR(ones / n, 0.25, 0.01);
  auto r = HostTensor::make(DType::Int64, {n});
  run_op(Op::RandInt, {ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_int(), r.vt()}, 4,
         {iarg(5), iarg(0), iarg(-3), iarg(4), r.arg()});
  std::set<int64_t> seen;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_GE(r.get_int(i), -3);
    ASSERT_LT(r.get_int(i), 4);
    seen.insert(r.get_int(i));
  }
  EXPECT_EQ(seen.size(), 7u);
  auto w = HostTensor::make(DType::Int64, {1000});
  run_op(Op::RandInt, {ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_int(), ValueType::scalar_int(), w.vt()}, 4,
         {iarg(5), iarg(0), iarg(0), iarg(int64_t(1) << 40), w.arg()});
  int64_t big = 0;
  for (int64_t i = 0; i < 1000; ++i) big += w.get_int(i) >= (int64_t(1) << 32);
  EXPECT_GT(big, 900);
}

}  // namespace
}  // namespace ontest
