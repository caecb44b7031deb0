// Helpers for the compiler/kernel tests: host tensors of any dtype and layout,
// and a runner that compiles a graph and executes it on host memory.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "openneuron/compiler/compiler.h"
#include "openneuron/compiler/graph.h"
#include "openneuron/kernels/half.h"
#include "openneuron/kernels/kernels.h"
#include "tensor_types.h"

namespace ontest {

using namespace openneuron;
using namespace openneuron::compiler;
namespace k = openneuron::kernels;

// Rounds like storing into dtype `dt` (for expected values).
inline double round_to(DType dt, double v) {
  switch (dt) {
    case DType::BFloat16: return k::bf16_to_f32(k::f32_to_bf16(static_cast<float>(v)));
    case DType::Float16: return k::f16_to_f32(k::f32_to_f16(static_cast<float>(v)));
    case DType::Float32: return static_cast<float>(v);
    case DType::Float8E4M3: return k::f8e4m3_to_f32(k::f32_to_f8e4m3(static_cast<float>(v)));
    case DType::Float8E5M2: return k::f8e5m2_to_f32(k::f32_to_f8e5m2(static_cast<float>(v)));
    case DType::Bool: return v != 0;
    case DType::UInt8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case DType::Int8: return static_cast<int8_t>(static_cast<int64_t>(v));
    case DType::Int16: return static_cast<int16_t>(static_cast<int64_t>(v));
    case DType::Int32: return static_cast<int32_t>(static_cast<int64_t>(v));
    case DType::Int64: return static_cast<double>(static_cast<int64_t>(v));
    default: return v;
  }
}

struct HostTensor {
  TensorType type;
  std::shared_ptr<std::vector<uint64_t>> buf;  // 8-byte aligned storage
  int64_t offset_elems = 0;

  static HostTensor make(DType dt, const std::vector<int64_t>& sizes,
                         std::vector<int64_t> strides = {}) {
    HostTensor t;
    t.type = make_type(dt, sizes, strides);
    int64_t span = 1;
    for (int d = 0; d < t.type.ndim; ++d)
      if (t.type.sizes[d] > 0) span += (t.type.sizes[d] - 1) * t.type.strides[d];
    const size_t bytes = static_cast<size_t>(span) * dtype_size(dt);
    t.buf = std::make_shared<std::vector<uint64_t>>((bytes + 7) / 8 + 1, 0);
    return t;
  }
  ValueType vt() const { return ValueType::of(type); }
  int64_t numel() const { return type.numel(); }
  char* base() const { return reinterpret_cast<char*>(buf->data()); }
  void* ptr() const { return base() + offset_elems * dtype_size(type.dtype); }
  onrt_arg arg() const {
    onrt_arg a;
    a.ptr = ptr();
    return a;
  }

  // Byte address of the element with row-major logical index i.
  char* addr(int64_t i) const {
    int64_t off = 0;
    for (int d = type.ndim - 1; d >= 0; --d) {
      const int64_t s = type.sizes[d];
      off += (i % s) * type.strides[d];
      i /= s;
    }
    return static_cast<char*>(ptr()) + off * static_cast<int64_t>(dtype_size(type.dtype));
  }

  double get(int64_t i) const {
    const char* p = addr(i);
    switch (type.dtype) {
      case DType::Bool: return *reinterpret_cast<const uint8_t*>(p) != 0;
      case DType::UInt8: return *reinterpret_cast<const uint8_t*>(p);
      case DType::Int8: return *reinterpret_cast<const int8_t*>(p);
      case DType::Int16: return *reinterpret_cast<const int16_t*>(p);
      case DType::Int32: return *reinterpret_cast<const int32_t*>(p);
      case DType::Int64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
      case DType::Float16: return k::f16_to_f32(*reinterpret_cast<const uint16_t*>(p));
      case DType::BFloat16: return k::bf16_to_f32(*reinterpret_cast<const uint16_t*>(p));
      case DType::Float32: return *reinterpret_cast<const float*>(p);
      case DType::Float8E4M3: return k::f8e4m3_to_f32(*reinterpret_cast<const uint8_t*>(p));
      case DType::Float8E5M2: return k::f8e5m2_to_f32(*reinterpret_cast<const uint8_t*>(p));
      default: return NAN;
    }
  }
  int64_t get_int(int64_t i) const {
    if (type.dtype == DType::Int64) return *reinterpret_cast<const int64_t*>(addr(i));
    return static_cast<int64_t>(get(i));
  }

  void set(int64_t i, double v) {
    char* p = addr(i);
    switch (type.dtype) {
      case DType::Bool: *reinterpret_cast<uint8_t*>(p) = v != 0; break;
      case DType::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
      case DType::Int8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
      case DType::Int16: *reinterpret_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
      case DType::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
      case DType::Int64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
      case DType::Float16: *reinterpret_cast<uint16_t*>(p) = k::f32_to_f16(static_cast<float>(v)); break;
      case DType::BFloat16: *reinterpret_cast<uint16_t*>(p) = k::f32_to_bf16(static_cast<float>(v)); break;
      case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
      case DType::Float8E4M3: *reinterpret_cast<uint8_t*>(p) = k::f32_to_f8e4m3(static_cast<float>(v)); break;
      case DType::Float8E5M2: *reinterpret_cast<uint8_t*>(p) = k::f32_to_f8e5m2(static_cast<float>(v)); break;
      default: break;
    }
  }
  void set_int(int64_t i, int64_t v) {
    if (type.dtype == DType::Int64) *reinterpret_cast<int64_t*>(addr(i)) = v;
    else set(i, static_cast<double>(v));
  }

  // Uniform random values in [lo, hi) (integers for integral dtypes).
  HostTensor& randomize(uint32_t seed, double lo = -2, double hi = 2) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < numel(); ++i) {
      double v = u(gen);
      if (!is_floating(type.dtype)) v = std::floor(v);
      if (type.dtype == DType::Bool) v = v > (lo + hi) / 2;
      set(i, v);
    }
    return *this;
  }
  HostTensor& fill_fn(const std::function<double(int64_t)>& f) {
    for (int64_t i = 0; i < numel(); ++i) set(i, f(i));
    return *this;
  }
  std::vector<double> values() const {
    std::vector<double> v(numel());
    for (int64_t i = 0; i < numel(); ++i) v[i] = get(i);
    return v;
  }
};

inline onrt_arg iarg(int64_t v) {
  onrt_arg a;
  a.i = v;
  return a;
}
inline onrt_arg farg(double v) {
  onrt_arg a;
  a.f = v;
  return a;
}

// Compiles (uncached) and runs on host memory; returns "" or the error.
inline std::string run_graph(const Graph& g, std::vector<onrt_arg> args) {
  std::shared_ptr<const Program> p = compile(g);
  std::vector<uint64_t> scratch;
  if (p->scratch_bytes > 0) {
    scratch.assign(p->scratch_bytes / 8 + 8, 0);
    onrt_arg a;
    a.ptr = scratch.data();
    args.push_back(a);
  }
  EXPECT_EQ(static_cast<int32_t>(args.size()), p->num_args) << p->name;
  std::string err;
  if (!run_on_host(*p, args.data(), static_cast<int32_t>(args.size()), &err)) return err;
  return "";
}

// Single op with tensors/scalars as given; asserts success.
inline void run_op(Op op, const std::vector<ValueType>& types, int num_inputs,
                   const std::vector<onrt_arg>& args, std::vector<int64_t> attrs = {}) {
  Graph g = Graph::single_op(op, types, num_inputs, std::move(attrs));
  const std::string err = run_graph(g, args);
  ASSERT_EQ(err, "") << op_name(op);
}

inline ::testing::AssertionResult near_rel(double got, double want, double rtol, double atol = 0) {
  if (std::isnan(want) && std::isnan(got)) return ::testing::AssertionSuccess();
  if (std::isinf(want) && got == want) return ::testing::AssertionSuccess();
  const double tol = atol + rtol * std::fabs(want);
  if (std::fabs(got - want) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " want " << want << " (tol " << tol << ")";
}

#define EXPECT_ALL_NEAR(t, ref, rtol, atol)                                     \
  do {                                                                          \
    const auto& ref_ = (ref);                                                   \
    ASSERT_EQ(static_cast<size_t>((t).numel()), ref_.size());                   \
    for (int64_t i_ = 0; i_ < (t).numel(); ++i_)                                \
      ASSERT_TRUE(::ontest::near_rel((t).get(i_), ref_[i_], rtol, atol)) << "at " << i_; \
  } while (0)

}  // namespace ontest
