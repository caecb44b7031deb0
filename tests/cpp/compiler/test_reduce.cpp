// Reductions over dim masks against double-precision reference loops.
#include "test_util.h"

namespace ontest {
namespace {

// Reference: reduce `in` (logical row-major) over dims in mask with `op`
// (Var/Std: sum of squares, before the division).
std::vector<double> ref_reduce(const HostTensor& in, uint32_t mask, Op op) {
  const TensorType& t = in.type;
  std::vector<int64_t> osz(t.ndim);
  int64_t on = 1, count = 1;
  for (int d = 0; d < t.ndim; ++d) {
    osz[d] = (mask >> d) & 1 ? 1 : t.sizes[d];
    on *= osz[d];
    if ((mask >> d) & 1) count *= t.sizes[d];
  }
  std::vector<double> acc(on, op == Op::Prod ? 1.0 : op == Op::Amax ? -INFINITY : op == Op::Amin ? INFINITY : 0.0);
  for (int64_t i = 0; i < in.numel(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      const int64_t x = rem % t.sizes[d];
      rem /= t.sizes[d];
      if (!((mask >> d) & 1)) o += x * mul;
      mul *= osz[d];
    }
    const double v = in.get(i);
    switch (op) {
      case Op::Sum: case Op::Mean: acc[o] += v; break;
      case Op::Var:
      case Op::Std:
        acc[o] += v * v;
        break;
      case Op::Prod: acc[o] *= v; break;
      case Op::Amax: acc[o] = std::max(acc[o], v); break;
      case Op::Amin: acc[o] = std::min(acc[o], v); break;
      default: break;
    }
  }
  if (op == Op::Mean)
    for (double& v : acc) v /= static_cast<double>(count);
  return acc;
}

HostTensor reduced_out(DType dt, const HostTensor& in, uint32_t mask) {
  std::vector<int64_t> s(in.type.sizes, in.type.sizes + in.type.ndim);
  for (int d = 0; d < in.type.ndim; ++d)
    if ((mask >> d) & 1) s[d] = 1;
  return HostTensor::make(dt, s);
}

TEST(Reduce, AllOpsSeveralMasksF32) {
  auto in = HostTensor::make(DType::Float32, {4, 5, 6}).randomize(1, 0.5, 1.5);
  for (Op op : {Op::Sum, Op::Mean, Op::Prod, Op::Amax, Op::Amin})
    for (uint32_t mask : {1u, 2u, 4u, 3u, 5u, 6u, 7u}) {
      auto out = reduced_out(DType::Float32, in, mask);
      run_op(op, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()}, {mask});
      EXPECT_ALL_NEAR(out, ref_reduce(in, mask, op), 1e-6, 0);
    }
}

TEST(Reduce, NonContiguousInputAndOutput) {
  // Input is a permuted view; output strided (every other element).
  auto in = HostTensor::make(DType::Float32, {6, 7, 3}, {1, 18, 6}).randomize(2);
  for (uint32_t mask : {1u, 2u, 4u, 5u}) {
    std::vector<int64_t> s = {6, 7, 3};
    for (int d = 0; d < 3; ++d) if ((mask >> d) & 1) s[d] = 1;
    auto ct = contiguous_strides(s);
    for (auto& x : ct) x *= 2;
    auto out = HostTensor::make(DType::Float32, s, ct);
    run_op(Op::Sum, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()}, {mask});
    EXPECT_ALL_NEAR(out, ref_reduce(in, mask, Op::Sum), 1e-6, 1e-6);
  }
}

TEST(Reduce, LargeSumIsAccurateAndThreadIndependent) {
  // 1M elements: chunked partials, deterministic.
  auto in = HostTensor::make(DType::Float32, {1 << 20}).randomize(3, 0, 1);
  auto out = HostTensor::make(DType::Float32, {1});
  run_op(Op::Sum, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()}, {1});
  EXPECT_ALL_NEAR(out, ref_reduce(in, 1, Op::Sum), 1e-7, 0);
  const double first = out.get(0);
  k::set_num_threads(1);
  run_op(Op::Sum, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()}, {1});
  k::set_num_threads(0);
  EXPECT_EQ(out.get(0), first);
  // Column reduction of a [4096, 300] matrix (bias gradient shape).
  auto m = HostTensor::make(DType::Float32, {4096, 300}).randomize(4);
  auto col = HostTensor::make(DType::Float32, {1, 300});
  run_op(Op::Sum, {m.vt(), col.vt()}, 1, {m.arg(), col.arg()}, {1});
  EXPECT_ALL_NEAR(col, ref_reduce(m, 1, Op::Sum), 1e-6, 1e-5);
}

TEST(Reduce, LargeBoolMinAndMaxKeepEveryChunk) {
  // all()/any() are Amin/Amax over Bool: each chunk's partial result is written by
  // the thread that reduced it, so partials of one bit each must not share a word
  // (std::vector<bool> did, and a lost write turned all() false about once in a
  // thousand calls on a busy host). Repeated to give such a race its chances.
  auto ones = HostTensor::make(DType::Bool, {1 << 20}).fill_fn([](int64_t) { return 1.0; });
  auto zeros = HostTensor::make(DType::Bool, {1 << 20}).fill_fn([](int64_t) { return 0.0; });
  auto out = HostTensor::make(DType::Bool, {1});
  for (int rep = 0; rep < 200; ++rep) {
    run_op(Op::Amin, {ones.vt(), out.vt()}, 1, {ones.arg(), out.arg()}, {1});
    ASSERT_EQ(out.get_int(0), 1) << "all() of ones, repetition " << rep;
    run_op(Op::Amax, {zeros.vt(), out.vt()}, 1, {zeros.arg(), out.arg()}, {1});
    ASSERT_EQ(out.get_int(0), 0) << "any() of zeros, repetition " << rep;
  }
}

TEST(Reduce, IntegerSumIntoInt64AndBool) {
  auto in = HostTensor::make(DType::Int32, {3, 4}).randomize(5, -1000, 1000);
  auto out = HostTensor::make(DType::Int64, {3, 1});
  run_op(Op::Sum, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()}, {2});
  auto r = ref_reduce(in, 2, Op::Sum);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out.get_int(i), static_cast<int64_t>(r[i]));
  auto b = HostTensor::make(DType::Bool, {10}).fill_fn([](int64_t i) { return i % 3 == 0; });
  auto bo = HostTensor::make(DType::Int64, {1});
  run_op(Op::Sum, {b.vt(), bo.vt()}, 1, {b.arg(), bo.arg()}, {1});
  EXPECT_EQ(bo.get_int(0), 4);
}

TEST(Reduce, Bf16InputFloatAccumulation) {
  auto in = HostTensor::make(DType::BFloat16, {2, 1000}).randomize(6, 0, 1);
  auto out = HostTensor::make(DType::BFloat16, {2, 1});
  auto outf = HostTensor::make(DType::Float32, {2, 1});
  run_op(Op::Mean, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()}, {2});
  run_op(Op::Sum, {in.vt(), outf.vt()}, 1, {in.arg(), outf.arg()}, {2});
  auto rm = ref_reduce(in, 2, Op::Mean), rs = ref_reduce(in, 2, Op::Sum);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(out.get(i), round_to(DType::BFloat16, rm[i]));
    EXPECT_TRUE(near_rel(outf.get(i), rs[i], 1e-7));
  }
}

TEST(Reduce, EmptyAndNaN) {
  auto e = HostTensor::make(DType::Float32, {0, 3});
  auto s = HostTensor::make(DType::Float32, {1, 3}).fill_fn([](int64_t) { return 5.0; });
  run_op(Op::Sum, {e.vt(), s.vt()}, 1, {e.arg(), s.arg()}, {1});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.get(i), 0.0);
  run_op(Op::Mean, {e.vt(), s.vt()}, 1, {e.arg(), s.arg()}, {1});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(s.get(i)));
  EXPECT_THROW(compile(Graph::single_op(Op::Amax, {e.vt(), s.vt()}, 1, {1})), CompileError);
  auto x = HostTensor::make(DType::Float32, {5}).fill_fn([](int64_t i) { return i == 2 ? NAN : double(i); });
  auto mx = HostTensor::make(DType::Float32, {1});
  run_op(Op::Amax, {x.vt(), mx.vt()}, 1, {x.arg(), mx.arg()}, {1});
  EXPECT_TRUE(std::isnan(mx.get(0)));
}

TEST(Reduce, VarAndStdOfDeviationsSquareInDouble) {
  auto in = HostTensor::make(DType::Float32, {4, 5, 6}).randomize(4, -2, 2);
  for (Op op : {Op::Var, Op::Std})
    for (uint32_t mask : {1u, 2u, 4u, 5u, 7u}) {  // row and column strategies
      auto out = reduced_out(DType::Float32, in, mask);
      run_op(op, {in.vt(), ValueType::scalar_float(), out.vt()}, 2,
             {in.arg(), farg(3.0), out.arg()}, {mask});
      auto r = ref_reduce(in, mask, op);
      for (double& v : r) v = op == Op::Std ? std::sqrt(v / 3.0) : v / 3.0;
      EXPECT_ALL_NEAR(out, r, 1e-6, 0);
    }
  // Squares beyond float32's range: Std stays finite (as the CPU's double
  // accumulation), Var overflows only when narrowed.
  auto big =
      HostTensor::make(DType::Float32, {2}).fill_fn([](int64_t i) { return i ? -1e20 : 1e20; });
  auto s = HostTensor::make(DType::Float32, {1});
  run_op(Op::Std, {big.vt(), ValueType::scalar_float(), s.vt()}, 2, {big.arg(), farg(1.0), s.arg()},
         {1});
  EXPECT_NEAR(s.get(0), std::sqrt(2.0) * 1e20, 1e14);
  run_op(Op::Var, {big.vt(), ValueType::scalar_float(), s.vt()}, 2, {big.arg(), farg(1.0), s.arg()},
         {1});
  EXPECT_TRUE(std::isinf(s.get(0)));
  // No degrees of freedom (correction = n): sum / 0, as on the CPU.
  run_op(Op::Var, {big.vt(), ValueType::scalar_float(), s.vt()}, 2, {big.arg(), farg(0.0), s.arg()},
         {1});
  EXPECT_TRUE(std::isinf(s.get(0)));
  EXPECT_THROW(compile(Graph::single_op(Op::Var, {big.vt(), s.vt()}, 1, {1})), CompileError);
}

TEST(Reduce, BadShapesAreCompileErrors) {
  auto in = HostTensor::make(DType::Float32, {4, 5});
  auto wrong = HostTensor::make(DType::Float32, {4, 5});
  EXPECT_THROW(compile(Graph::single_op(Op::Sum, {in.vt(), wrong.vt()}, 1, {2})), CompileError);
  auto o = HostTensor::make(DType::Float32, {4, 1});
  EXPECT_THROW(compile(Graph::single_op(Op::Sum, {in.vt(), o.vt()}, 1, {8})), CompileError);
}

}  // namespace
}  // namespace ontest
