// Creation and copy: Copy/convert across dtypes and layouts, Fill, Arange.
#include "test_util.h"

namespace ontest {
namespace {

const DType kReal9[] = {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32,
                        DType::Int64, DType::Float16, DType::BFloat16, DType::Float32};

TEST(Copy, AllDtypePairsStrided) {
  for (DType from : kReal9)
    for (DType to : kReal9) {
      auto in = HostTensor::make(from, {3, 4}, {1, 3});  // transposed layout
      in.fill_fn([](int64_t i) { return double(i % 7) * 1.5 - 3; });
      auto out = HostTensor::make(to, {3, 4});
      run_op(Op::Copy, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()});
      for (int64_t i = 0; i < 12; ++i)
        ASSERT_EQ(out.get(i), round_to(to, in.get(i))) << dtype_name(from) << "->" << dtype_name(to) << " " << i;
    }
}

TEST(Copy, TiledTransposeOddSizesWithOuterDim) {
  // [3, 70, 45] permuted view -> contiguous: exercises the tiled walker,
  // including partial tiles and an outer dim, in bf16 -> f32.
  auto src = HostTensor::make(DType::BFloat16, {3, 45, 70}).randomize(3);
  HostTensor view = src;
  view.type = make_type(DType::BFloat16, {3, 70, 45}, {45 * 70, 1, 70});
  auto out = HostTensor::make(DType::Float32, {3, 70, 45});
  run_op(Op::Copy, {view.vt(), out.vt()}, 1, {view.arg(), out.arg()});
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t j = 0; j < 45; ++j)
        ASSERT_EQ(out.get((b * 70 + i) * 45 + j), src.get((b * 45 + j) * 70 + i)) << b << "," << i << "," << j;
}

TEST(Copy, FloatToIntTruncatesAndUint8WrapsThroughInt64) {
  auto in = HostTensor::make(DType::Float32, {4});
  in.set(0, -1.7); in.set(1, 2.9); in.set(2, 300.0); in.set(3, -3.0);
  auto u8 = HostTensor::make(DType::UInt8, {4}), i32 = HostTensor::make(DType::Int32, {4});
  run_op(Op::Copy, {in.vt(), u8.vt()}, 1, {in.arg(), u8.arg()});
  run_op(Op::Copy, {in.vt(), i32.vt()}, 1, {in.arg(), i32.arg()});
  EXPECT_EQ(u8.get(0), 255);  // -1 -> 255
  EXPECT_EQ(u8.get(1), 2);
  EXPECT_EQ(u8.get(2), 44);   // 300 mod 256
  EXPECT_EQ(u8.get(3), 253);
  EXPECT_EQ(i32.get(0), -1);
  EXPECT_EQ(i32.get(2), 300);
}

TEST(Copy, BroadcastInputAndSameDtypeBits) {
  auto row = HostTensor::make(DType::BFloat16, {5}).randomize(1);
  // NaN payload survives a same-dtype copy.
  *reinterpret_cast<uint16_t*>(row.addr(0)) = 0x7F81;
  HostTensor in = row;
  in.type = make_type(DType::BFloat16, {3, 5}, {0, 1});
  auto out = HostTensor::make(DType::BFloat16, {3, 5});
  run_op(Op::Copy, {in.vt(), out.vt()}, 1, {in.arg(), out.arg()});
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(*reinterpret_cast<uint16_t*>(out.addr(i)), *reinterpret_cast<uint16_t*>(row.addr(i % 5)));
}

TEST(Copy, Float8RoundingAndSaturation) {
  // Expected bits are what PyTorch's casts produce (checked against torch 2.13):
  // e4m3fn saturates at +-448 (no inf), e5m2 overflows to inf, ties to even.
  struct Case { float v; uint8_t e4m3, e5m2; };
  const Case cases[] = {
      {0.0f, 0x00, 0x00},      {1.0f, 0x38, 0x3C},   {-2.0f, 0xC0, 0xC0},
      {448.0f, 0x7E, 0x5F},    {464.0f, 0x7E, 0x5F}, {480.0f, 0x7E, 0x60},
      {57344.0f, 0x7E, 0x7B},  {61440.0f, 0x7E, 0x7C}, {-INFINITY, 0xFE, 0xFC},
      {0.0009765625f, 0x00, 0x14}, {0.001953125f, 0x01, 0x18},
      {1.0625f, 0x38, 0x3C},   {1.1875f, 0x3A, 0x3D},  {NAN, 0x7F, 0x7F},
  };
  const int64_t n = sizeof(cases) / sizeof(cases[0]);
  auto in = HostTensor::make(DType::Float32, {n});
  for (int64_t i = 0; i < n; ++i) in.set(i, cases[i].v);
  auto e4 = HostTensor::make(DType::Float8E4M3, {n}), e5 = HostTensor::make(DType::Float8E5M2, {n});
  run_op(Op::Copy, {in.vt(), e4.vt()}, 1, {in.arg(), e4.arg()});
  run_op(Op::Copy, {in.vt(), e5.vt()}, 1, {in.arg(), e5.arg()});
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(*reinterpret_cast<uint8_t*>(e4.addr(i)), cases[i].e4m3) << cases[i].v;
    EXPECT_EQ(*reinterpret_cast<uint8_t*>(e5.addr(i)), cases[i].e5m2) << cases[i].v;
  }
  // And back to bf16 (through float).
  auto back = HostTensor::make(DType::BFloat16, {n});
  run_op(Op::Copy, {e4.vt(), back.vt()}, 1, {e4.arg(), back.arg()});
  EXPECT_EQ(back.get(1), 1.0);
  EXPECT_EQ(back.get(3), 448.0);
  EXPECT_EQ(back.get(5), 448.0);
  EXPECT_EQ(back.get(8), -448.0);
  EXPECT_TRUE(std::isnan(back.get(13)));
  // Complex64 copies only to itself.
  auto c = HostTensor::make(DType::Complex64, {2}), f = HostTensor::make(DType::Float32, {2});
  EXPECT_THROW(compile(Graph::single_op(Op::Copy, {c.vt(), f.vt()}, 1)), CompileError);
  EXPECT_NO_THROW(compile(Graph::single_op(Op::Copy, {c.vt(), c.vt()}, 1)));
}

TEST(Fill, ScalarConversionAndStridedOut) {
  auto out = HostTensor::make(DType::BFloat16, {3, 4}, {8, 2});
  run_op(Op::Fill, {ValueType::scalar_float(), out.vt()}, 1, {farg(0.1), out.arg()});
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out.get(i), round_to(DType::BFloat16, 0.1));
  auto iout = HostTensor::make(DType::Int16, {5});
  run_op(Op::Fill, {ValueType::scalar_int(), iout.vt()}, 1, {iarg(-7), iout.arg()});
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(iout.get(i), -7);
}

TEST(Arange, FloatAndInt) {
  auto f = HostTensor::make(DType::Float32, {10});
  run_op(Op::Arange, {ValueType::scalar_float(), ValueType::scalar_float(), f.vt()}, 2, {farg(1.0), farg(0.1), f.arg()});
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(f.get(i), static_cast<float>(1.0 + i * 0.1));
  auto n = HostTensor::make(DType::Int64, {4}, {3});
  run_op(Op::Arange, {ValueType::scalar_int(), ValueType::scalar_int(), n.vt()}, 2, {iarg(10), iarg(-3), n.arg()});
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(n.get_int(i), 10 - 3 * i);
}

}  // namespace
}  // namespace ontest
