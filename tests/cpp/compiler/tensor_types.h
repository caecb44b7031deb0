// TensorType values for tests and tools: a dtype, sizes and strides (contiguous
// unless given). Free of gtest, so the fuzzers' seed writer uses it too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "openneuron/compiler/graph.h"

namespace ontest {

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t s = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    st[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

inline openneuron::TensorType make_type(openneuron::DType dt, const std::vector<int64_t>& sizes,
                                        std::vector<int64_t> strides = {}) {
  if (strides.empty()) strides = contiguous_strides(sizes);
  openneuron::TensorType t;
  t.dtype = dt;
  t.ndim = static_cast<int32_t>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides[d];
  }
  return t;
}

}  // namespace ontest
