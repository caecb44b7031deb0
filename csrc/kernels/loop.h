// The strided loop walker: runs a row function over the runs of a LoopPlan's
// innermost dim (in parallel pieces, or in tiles for transposes), and the
// offset walker that maps a linear index to offsets in several layouts.
#pragma once

#include <algorithm>
#include <cstdint>

#include "openneuron/kernels/params.h"
#include "parallel.h"

namespace openneuron::kernels::detail {

// Calls row(ptrs, n) for each run of the innermost plan dim in [begin, end) of
// the plan's linear index space; ptrs[k] points at operand k's first element.
template <int N, class Plan, class Row>
inline void walk_range(const Plan& p, char* const* base, int64_t begin, int64_t end,
                       Row& row) {
  if (p.ndim <= 1) {
    char* ptr[N];
    for (int k = 0; k < N; ++k) ptr[k] = base[k] + begin * p.strides[k][0];
    row(ptr, end - begin);
    return;
  }
  int64_t idx[kMaxDims];
  char* rowp[N];
  int64_t rem = begin;
  const int64_t i0 = rem % p.sizes[0];
  rem /= p.sizes[0];
  for (int k = 0; k < N; ++k) rowp[k] = base[k];
  for (int d = 1; d < p.ndim; ++d) {
    idx[d] = rem % p.sizes[d];
    rem /= p.sizes[d];
    for (int k = 0; k < N; ++k) rowp[k] += idx[d] * p.strides[k][d];
  }
  int64_t left = end - begin;
  int64_t start = i0;
  char* ptr[N];
  while (true) {
    const int64_t n = std::min(p.sizes[0] - start, left);
    for (int k = 0; k < N; ++k) ptr[k] = rowp[k] + start * p.strides[k][0];
    row(ptr, n);
    left -= n;
    if (left <= 0) break;
    start = 0;
    for (int d = 1; d < p.ndim; ++d) {
      for (int k = 0; k < N; ++k) rowp[k] += p.strides[k][d];
      if (++idx[d] < p.sizes[d]) break;
      for (int k = 0; k < N; ++k) rowp[k] -= p.strides[k][d] * p.sizes[d];
      idx[d] = 0;
    }
  }
}

// Elementwise work on 2 cores shares them with the thread issuing the next op:
// a few pieces per thread keep a preempted thread's share from holding the op.
inline constexpr int kElementwisePieces = 4;

template <int N, class Plan, class Row>
inline void walk(const Plan& p, char* const* base, Row&& row) {
  auto body = [&](int64_t b, int64_t e) { walk_range<N>(p, base, b, e, row); };
  parallel_for(p.numel, kGrain, body, kElementwisePieces);
}

// Tiled variant for layouts where an input is contiguous along plan dim 1
// while the output is along dim 0 (transposes): rows of kTile0 elements over
// bands of kTile1 rows, so each input cache line is reused from L1.
inline constexpr int64_t kTile0 = 64, kTile1 = 16;

template <int N>
inline bool wants_tiles(const LoopPlan& p) {
  if (p.ndim < 2 || p.sizes[0] < kTile0 / 4 || p.sizes[1] < 4) return false;
  for (int k = 1; k < N; ++k) {
    const int64_t a = p.strides[k][0] < 0 ? -p.strides[k][0] : p.strides[k][0];
    const int64_t b = p.strides[k][1] < 0 ? -p.strides[k][1] : p.strides[k][1];
    if (b != 0 && a > b) return true;
  }
  return false;
}

template <int N, class Row>
inline void walk_tiled(const LoopPlan& p, char* const* base, Row& row) {
  const int64_t s0 = p.sizes[0], s1 = p.sizes[1];
  const int64_t bands = (s1 + kTile1 - 1) / kTile1;
  const int64_t outer = p.numel / (s0 * s1);
  auto body = [&](int64_t tb, int64_t te) {
    char* ptr[N];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t band = t % bands;
      int64_t rem = t / bands;
      char* ob[N];
      for (int k = 0; k < N; ++k) ob[k] = base[k];
      for (int d = 2; d < p.ndim; ++d) {
        const int64_t x = rem % p.sizes[d];
        rem /= p.sizes[d];
        for (int k = 0; k < N; ++k) ob[k] += x * p.strides[k][d];
      }
      const int64_t j_end = std::min(s1, (band + 1) * kTile1);
      for (int64_t i0 = 0; i0 < s0; i0 += kTile0) {
        const int64_t n = std::min(kTile0, s0 - i0);
        for (int64_t j = band * kTile1; j < j_end; ++j) {
          for (int k = 0; k < N; ++k) ptr[k] = ob[k] + i0 * p.strides[k][0] + j * p.strides[k][1];
          row(ptr, n);
        }
      }
    }
  };
  parallel_for(outer * bands, std::max<int64_t>(1, kGrain / (s0 * kTile1)), body);
}

// Element offsets of the row-major linear index `lin` over `n` dims in up to
// K layouts that share sizes (st[q] are the strides of layout q).
template <int K>
struct OffsetWalk {
  int n = 0;
  int64_t size[kMaxDims] = {}, st[K][kMaxDims] = {};
  void offsets(int64_t lin, int64_t* o, int k) const {
    for (int q = 0; q < k; ++q) o[q] = 0;
    for (int d = n - 1; d >= 0; --d) {
      const int64_t x = lin % size[d];
      lin /= size[d];
      for (int q = 0; q < k; ++q) o[q] += x * st[q][d];
    }
  }
};

}  // namespace openneuron::kernels::detail
