// Element types, tensor layouts, and the loop plans the compiler bakes into
// elementwise and reduction params.
#include <algorithm>
#include <cstdlib>
#include <utility>

#include "openneuron/kernels/params.h"
#include "openneuron/kernels/types.h"

namespace openneuron {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8:
    case DType::Float8E4M3: case DType::Float8E5M2: return 1;
    case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: case DType::Complex64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "UInt8";
    case DType::Int8: return "Int8";
    case DType::Int16: return "Int16";
    case DType::Int32: return "Int32";
    case DType::Int64: return "Int64";
    case DType::Float16: return "Float16";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float32";
    case DType::Float64: return "Float64";
    case DType::Complex64: return "Complex64";
    case DType::Float8E4M3: return "Float8E4M3";
    case DType::Float8E5M2: return "Float8E5M2";
  }
  return "?";
}

bool is_floating(DType t) {
  switch (t) {
    case DType::Float16: case DType::BFloat16: case DType::Float32: case DType::Float64:
    case DType::Float8E4M3: case DType::Float8E5M2: return true;
    default: return false;
  }
}

bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::Bool: return include_bool;
    case DType::UInt8: case DType::Int8: case DType::Int16: case DType::Int32:
    case DType::Int64: return true;
    default: return false;
  }
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

bool TensorType::is_contiguous() const {
  int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool TensorType::is_channels_last() const {
  if (ndim < 3 || ndim > 5) return false;
  int order[5] = {1};  // innermost first: C, then the spatial dims from the last, then N
  for (int i = 1; i < ndim - 1; ++i) order[i] = ndim - i;
  order[ndim - 1] = 0;
  int64_t expected = 1;
  for (int i = 0; i < ndim; ++i) {
    const int d = order[i];
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

namespace kernels {

template <int N>
BasicLoopPlan<N> make_basic_loop_plan(const TensorType* const* types, int nops) {
  BasicLoopPlan<N> p;
  p.nops = nops;
  const TensorType& out = *types[0];
  p.numel = out.numel();
  p.ndim = 1;
  p.sizes[0] = 1;
  if (p.numel == 0) {
    p.sizes[0] = 0;
    return p;
  }
  // Dims of size > 1, innermost (highest index) first.
  int dims[kMaxDims];
  int nd = 0;
  for (int d = out.ndim - 1; d >= 0; --d)
    if (out.sizes[d] != 1) dims[nd++] = d;
  auto stride_bytes = [&](int k, int d) -> int64_t {
    return types[k] ? types[k]->strides[d] * static_cast<int64_t>(dtype_size(types[k]->dtype))
                    : 0;
  };
  // Stable insertion sort: a dim goes inner when the first operand with
  // nonzero strides on both dims has the smaller stride there (output first).
  auto inner_than = [&](int a, int b) {
    for (int k = 0; k < nops; ++k) {
      const int64_t sa = stride_bytes(k, a), sb = stride_bytes(k, b);
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb;
    }
    return false;
  };
  for (int i = 1; i < nd; ++i)
    for (int j = i; j > 0 && inner_than(dims[j], dims[j - 1]); --j) std::swap(dims[j], dims[j - 1]);
  if (nd == 0) return p;  // a single element
  int r = 0;
  p.sizes[0] = out.sizes[dims[0]];
  for (int k = 0; k < nops; ++k) p.strides[k][0] = stride_bytes(k, dims[0]);
  for (int i = 1; i < nd; ++i) {
    const int d = dims[i];
    bool merge = true;
    for (int k = 0; k < nops && merge; ++k)
      merge = stride_bytes(k, d) == p.strides[k][r] * p.sizes[r];
    if (merge) {
      p.sizes[r] *= out.sizes[d];
    } else {
      ++r;
      p.sizes[r] = out.sizes[d];
      for (int k = 0; k < nops; ++k) p.strides[k][r] = stride_bytes(k, d);
    }
  }
  p.ndim = r + 1;
  return p;
}

template LoopPlan make_basic_loop_plan<kMaxOperands>(const TensorType* const*, int);
template FusedLoopPlan make_basic_loop_plan<kMaxFusedOperands>(const TensorType* const*, int);

ReducePlan make_reduce_plan(const TensorType& in, const TensorType& out, uint32_t dim_mask) {
  ReducePlan p;
  p.out_numel = out.numel();
  p.reduce_numel = 1;
  for (int d = 0; d < in.ndim; ++d)
    if (dim_mask & (1u << d)) p.reduce_numel *= in.sizes[d];
  int dims[kMaxDims];
  int nd = 0;
  for (int d = in.ndim - 1; d >= 0; --d)
    if (in.sizes[d] != 1) dims[nd++] = d;
  // Innermost first by the input's strides: reads stay sequential.
  for (int i = 1; i < nd; ++i)
    for (int j = i; j > 0 && in.strides[dims[j]] < in.strides[dims[j - 1]]; --j)
      std::swap(dims[j], dims[j - 1]);
  int r = -1;
  for (int i = 0; i < nd; ++i) {
    const int d = dims[i];
    const bool red = dim_mask & (1u << d);
    const int64_t os = red ? 0 : out.strides[d];
    if (r >= 0 && red == static_cast<bool>(p.reduced_mask & (1u << r)) &&
        in.strides[d] == p.in_strides[r] * p.sizes[r] &&
        os == p.out_strides[r] * p.sizes[r]) {
      p.sizes[r] *= in.sizes[d];
      continue;
    }
    ++r;
    p.sizes[r] = in.sizes[d];
    p.in_strides[r] = in.strides[d];
    p.out_strides[r] = os;
    if (red) p.reduced_mask |= 1u << r;
  }
  p.ndim = r + 1;
  return p;
}

}  // namespace kernels
}  // namespace openneuron
