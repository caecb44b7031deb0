// kernels::reduce_buffers: the reduction the collectives run on the vector engines.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "openneuron/kernels/half.h"
#include "openneuron/kernels/kernels.h"
#include "shm_test_util.h"

namespace {

using openneuron::DType;
using openneuron::kernels::BufferReduce;
using openneuron::kernels::reduce_buffers;

template <class T>
std::vector<T> run(DType dt, BufferReduce op, std::vector<std::vector<T>> srcs) {
  std::vector<const void*> p;
  for (auto& s : srcs) p.push_back(s.data());
  std::vector<T> out(srcs[0].size());
  reduce_buffers(dt, op, out.data(), p.data(), static_cast<int>(p.size()), out.size());
  return out;
}

TEST(ReduceBuffers, IntegersWrap) {
  EXPECT_EQ(run<int8_t>(DType::Int8, BufferReduce::Sum, {{100, -128}, {100, -1}}), (std::vector<int8_t>{-56, 127}));
  EXPECT_EQ(run<int16_t>(DType::Int16, BufferReduce::Product, {{300}, {300}}), (std::vector<int16_t>{24464}));
  EXPECT_EQ(run<uint8_t>(DType::UInt8, BufferReduce::Product, {{16}, {16}, {3}}), (std::vector<uint8_t>{0}));
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(run<int64_t>(DType::Int64, BufferReduce::Sum, {{big}, {1}}),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(run<int32_t>(DType::Int32, BufferReduce::BitXor, {{6}, {3}, {1}}), (std::vector<int32_t>{4}));
  EXPECT_EQ(run<int32_t>(DType::Int32, BufferReduce::Min, {{6, -2}, {3, 5}}), (std::vector<int32_t>{3, -2}));
}

TEST(ReduceBuffers, FloatMinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto mx = run<float>(DType::Float32, BufferReduce::Max, {{1.f, nan, 2.f}, {nan, 3.f, -1.f}, {0.f, 0.f, 5.f}});
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 5.f);
  auto mn = run<float>(DType::Float32, BufferReduce::Min, {{1.f, 2.f}, {nan, 0.5f}});
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], 0.5f);
}

TEST(ReduceBuffers, HalfAccumulatesInFloatAndRoundsOnce) {
  using openneuron::kernels::bf16_to_f32;
  using openneuron::kernels::f32_to_bf16;
  // 1 + 2^-8 + 2^-8: rounding after each step would give 1 (ties to even).
  const uint16_t one = f32_to_bf16(1.f), tiny = f32_to_bf16(std::ldexp(1.f, -8));
  auto out = run<uint16_t>(DType::BFloat16, BufferReduce::Sum, {{one}, {tiny}, {tiny}});
  EXPECT_EQ(bf16_to_f32(out[0]), 1.f + std::ldexp(1.f, -7));
}

TEST(ReduceBuffers, BoolAndAliasing) {
  // Any nonzero byte is true; results are 0/1.
  auto orr = run<uint8_t>(DType::Bool, BufferReduce::Sum, {{0, 2, 0}, {0, 0, 7}});
  EXPECT_EQ(orr, (std::vector<uint8_t>{0, 1, 1}));
  auto andd = run<uint8_t>(DType::Bool, BufferReduce::Min, {{1, 2, 0}, {3, 0, 7}});
  EXPECT_EQ(andd, (std::vector<uint8_t>{1, 0, 0}));
  // dst aliases the last source.
  std::vector<float> a{1, 2}, b{10, 20}, c{100, 200};
  const void* srcs[] = {a.data(), b.data(), c.data()};
  reduce_buffers(DType::Float32, BufferReduce::Sum, c.data(), srcs, 3, 2);
  EXPECT_EQ(c, (std::vector<float>{111, 222}));
}

TEST(ReduceBuffers, CopyToReceivesTheResult) {
  // Spans several tiles, with a partial last one; the bf16 copy is the rounded value.
  const size_t n = 5000;
  std::vector<uint16_t> a(n), b(n), out(n), copy(n, 0xffff);
  using openneuron::kernels::f32_to_bf16;
  for (size_t i = 0; i < n; ++i) {
    a[i] = f32_to_bf16(static_cast<float>(i % 100));
    b[i] = f32_to_bf16(0.5f);
  }
  const void* srcs[] = {a.data(), b.data()};
  reduce_buffers(DType::BFloat16, BufferReduce::Sum, out.data(), srcs, 2, n, copy.data());
  EXPECT_EQ(out[n - 1], f32_to_bf16(static_cast<float>((n - 1) % 100) + 0.5f));
  EXPECT_EQ(copy, out);
  std::vector<uint8_t> x{0, 3, 0}, y{0, 0, 1}, bout(3), bcopy(3, 9);
  const void* bsrcs[] = {x.data(), y.data()};
  reduce_buffers(DType::Bool, BufferReduce::BitOr, bout.data(), bsrcs, 2, 3, bcopy.data());
  EXPECT_EQ(bcopy, (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(bout, bcopy);
}

TEST(ReduceBuffers, Unsupported) {
  std::vector<float> f(4);
  const void* s[] = {f.data()};
  EXPECT_THROW(reduce_buffers(DType::Float32, BufferReduce::BitAnd, f.data(), s, 1, 4), std::invalid_argument);
  EXPECT_THROW(reduce_buffers(DType::Bool, BufferReduce::BitXor, f.data(), s, 1, 4), std::invalid_argument);
  EXPECT_THROW(reduce_buffers(DType::Complex64, BufferReduce::Sum, f.data(), s, 1, 2), std::invalid_argument);
}

// Large enough to split over the pool. In a child: the pool's threads must not
// exist in the test process, whose other tests fork ranks.
TEST(ReduceBuffers, LargeParallel) {
  auto body = [](shm_test::RankContext&) {
    const size_t n = 300'001;
    std::vector<float> a(n), b(n), c(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<float>(i % 1000);
      b[i] = static_cast<float>(i % 7);
      c[i] = -1.f;
    }
    const void* srcs[] = {a.data(), b.data(), c.data()};
    reduce_buffers(DType::Float32, BufferReduce::Sum, a.data(), srcs, 3, n);
    for (size_t i = 0; i < n; ++i) RANK_CHECK(a[i] == static_cast<float>(i % 1000 + i % 7) - 1.f);
    return 0;
  };
  EXPECT_EQ(shm_test::run_ranks(1, body), shm_test::zeros(1));
}

}  // namespace
