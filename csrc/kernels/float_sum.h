// Float summation in double with a fixed order (results do not depend on the
// thread count): 512-value float blocks folded into double lanes, the row sum
// of float32/bfloat16/float16 and the 8-lane float sum.
#pragma once

#include <cstdint>
#include <cstring>

#include "storage.h"

namespace openneuron::kernels::detail {

// Eight floats / four doubles as one value: GCC lowers these to single ymm
// registers (two xmm without AVX), where its vectoriser, given 64-float arrays,
// spilled the block sums to the stack and folded them through memory.
using f32x8 = float __attribute__((vector_size(32)));
using f64x4 = double __attribute__((vector_size(32)));

template <class T>
ON_INLINE f32x8 load_f32x8(const T* p) {
  f32x8 v;
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(&v, p, sizeof v);
  } else {
    float f[8];
    for (int k = 0; k < 8; ++k) f[k] = static_cast<float>(load(p + k));
    std::memcpy(&v, f, sizeof v);
  }
  return v;
}

// Adds the leading whole blocks of 512 values into the L double lanes and
// returns how many values it consumed. 64 float lanes first add 8 values each,
// then fold pairwise down to L lanes, each a float sum of at most 11 additions
// deep (within 2^-20 relative of exact, far below a half type's rounding and
// the float32 tolerance of PyTorch's own cascade sum); only those L go into
// double. The double work drops to one vector add per block, and 64 float
// lanes are several independent vector add chains, so the loop runs at load
// speed instead of waiting on one chain's latency. The order is fixed: results
// do not depend on thread count. `value8(i)` gives the floats added for
// indices i..i+7 (x[i], (x[i] - m)^2, a[i] * b[i], ...).
template <int L, class F>
inline int64_t add_float_blocks_of(int64_t n, const F& value8, f64x4 (&acc)[L / 4]) {
  static_assert(L == 8 || L == 16);
  constexpr int V = 8, B = 8;  // 64 float lanes as 8 vectors; 8 values per lane
  int64_t j = 0;
  for (; j + V * 8 * B <= n; j += V * 8 * B) {
    f32x8 f[V];
    for (int k = 0; k < V; ++k) f[k] = value8(j + 8 * k);
    for (int b = 1; b < B; ++b)
      for (int k = 0; k < V; ++k) f[k] += value8(j + b * V * 8 + 8 * k);
    // Lane l += lane l + q for q = 32, 16 (and 8 when L = 8): vector adds.
    for (int k = 0; k < 4; ++k) f[k] += f[k + 4];
    for (int k = 0; k < 2; ++k) f[k] += f[k + 2];
    if constexpr (L == 8) f[0] += f[1];
    for (int k = 0; k < L / 8; ++k) {
      acc[2 * k] +=
          __builtin_convertvector(__builtin_shufflevector(f[k], f[k], 0, 1, 2, 3), f64x4);
      acc[2 * k + 1] +=
          __builtin_convertvector(__builtin_shufflevector(f[k], f[k], 4, 5, 6, 7), f64x4);
    }
  }
  return j;
}

// The same on double lanes in memory.
template <int L, class F>
inline int64_t add_float_blocks_of(int64_t n, const F& value8, double (&lanes)[L]) {
  f64x4 acc[L / 4];
  std::memcpy(acc, lanes, sizeof acc);
  const int64_t j = add_float_blocks_of<L>(n, value8, acc);
  std::memcpy(lanes, acc, sizeof acc);
  return j;
}

template <int L, class T>
inline int64_t add_float_blocks(const T* x, int64_t n, double (&lanes)[L]) {
  return add_float_blocks_of(n, [x](int64_t i) { return load_f32x8(x + i); }, lanes);
}

// Double sum of a contiguous row of float32/bfloat16/float16 in 16 lanes:
// 512-value float blocks, then 16 values at a time, the rest into lane 0, and
// the lanes folded pairwise (l += l + 8, + 4, + 2, + 1). Straight-line register
// code: per-row setup and folding through memory had cost a fifth of a
// 1024-value row.
template <class T>
inline double float_row_sum(const T* x, int64_t n) {
  f64x4 acc[4] = {};
  int64_t j = add_float_blocks_of<16>(n, [x](int64_t i) { return load_f32x8(x + i); }, acc);
  if (j < n) {  // tail: the same order on the lanes in memory
    double lanes[16];
    std::memcpy(lanes, acc, sizeof lanes);
    for (; j + 16 <= n; j += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += static_cast<double>(load(x + j + l));
    for (; j < n; ++j) lanes[0] += static_cast<double>(load(x + j));
    std::memcpy(acc, lanes, sizeof lanes);
  }
  acc[0] += acc[2];
  acc[1] += acc[3];
  acc[0] += acc[1];
  return (acc[0][0] + acc[0][2]) + (acc[0][1] + acc[0][3]);
}

// Double sum of floats in 8 fixed lanes: vectorises, and the order does not
// depend on thread count.
inline double lane_sum8(const float* x, int64_t n) {
  double l[8] = {};
  int64_t j = add_float_blocks(x, n, l);
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) l[k] += x[j + k];
  for (; j < n; ++j) l[0] += x[j];
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

}  // namespace openneuron::kernels::detail
