// The memory layout of a fresh elementwise result, chosen as PyTorch's
// TensorIterator chooses it on the CPU: the output follows the dim order of its
// inputs (x.t().exp() is transposed too, the result of a slice of a [B, L, H, E]
// buffer seen as [B, H, L, E] keeps that order). Users may rely on it (.view()
// after an elementwise op), and torch.compile does: AOTAutograd graphs take views
// whose validity the meta functions' strides decided.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <c10/core/MemoryFormat.h>

#include <initializer_list>
#include <vector>

#include "engine.h"

namespace openneuron::bridge {

// Dense strides for `shape` with the dims laid out in `order`, innermost first.
inline std::vector<int64_t> strides_in_order(at::IntArrayRef shape,
                                             const std::vector<int64_t>& order) {
  std::vector<int64_t> out(shape.size());
  int64_t acc = 1;
  for (int64_t d : order) {
    out[d] = acc;
    acc *= shape[d];
  }
  return out;
}

// Strides of an output of `shape` over `inputs` (in the op's argument order;
// undefined tensors are skipped), or an empty vector for a contiguous output, the
// common case, which then costs no allocation (this runs on every op's dispatch).
inline std::vector<int64_t> elementwise_strides(at::IntArrayRef shape,
                                                std::initializer_list<const at::Tensor*> inputs) {
  const int64_t n = static_cast<int64_t>(shape.size());
  if (n <= 1) return {};

  // Every input of the output's shape: contiguous inputs give a contiguous
  // output; dense inputs that agree on their strides give those strides.
  bool same_shape = true, all_contiguous = true, same_dense_strides = true;
  const at::Tensor* first = nullptr;
  for (const at::Tensor* t : inputs) {
    if (t == nullptr || !t->defined()) continue;
    same_shape = same_shape && t->sizes().equals(shape);
    all_contiguous = all_contiguous && t->is_contiguous();
    same_dense_strides = same_dense_strides && t->is_non_overlapping_and_dense() &&
                         (first == nullptr || first->strides().equals(t->strides()));
    if (first == nullptr) first = t;
  }
  if (first == nullptr || (same_shape && all_contiguous)) return {};
  if (same_shape && (n == 4 || n == 5)) {
    const auto cl = n == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
    bool all_cl = true;
    for (const at::Tensor* t : inputs) {
      if (t != nullptr && t->defined()) all_cl = all_cl && t->is_contiguous(cl);
    }
    if (all_cl) return n == 4 ? c10::get_channels_last_strides_2d(shape)
                              : c10::get_channels_last_strides_3d(shape);
  }
  if (same_shape && same_dense_strides) return first->strides().vec();

  // Otherwise order the dims by the inputs' strides (broadcast dims say nothing),
  // innermost first, the first input with an opinion deciding; ties of equal
  // strides put the smaller dim inside.
  std::vector<std::vector<int64_t>> strides;
  for (const at::Tensor* t : inputs) {
    if (t == nullptr || !t->defined()) continue;
    std::vector<int64_t> s(n, 0);
    const int64_t offset = n - t->dim();
    for (int64_t d = std::max<int64_t>(offset, 0); d < n; ++d) {
      const int64_t size = t->size(d - offset);
      s[d] = size == 1 && shape[d] != 1 ? 0 : t->stride(d - offset);
    }
    strides.push_back(std::move(s));
  }
  auto order = [&](int64_t d0, int64_t d1) {  // > 0: d0 belongs outside d1
    for (const auto& s : strides) {
      if (s[d0] == 0 || s[d1] == 0) continue;
      if (s[d0] != s[d1]) return s[d0] < s[d1] ? -1 : 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(n);  // innermost first
  for (int64_t i = 0; i < n; ++i) perm[i] = n - 1 - i;
  bool row_major = true;
  for (int64_t i = 1; i < n; ++i) {
    for (int64_t j = i - 1, at = i; j >= 0; --j) {
      const int c = order(perm[j], perm[at]);
      if (c > 0) {
        std::swap(perm[j], perm[at]);
        at = j;
        row_major = false;
      } else if (c < 0) {
        break;
      }
    }
  }
  // Row-major keeps the plain contiguous strides (zero-size dims included, as the CPU).
  return row_major ? std::vector<int64_t>{} : strides_in_order(shape, perm);
}

// A fresh device tensor for an elementwise result, laid out as above.
inline at::Tensor empty_elementwise(at::IntArrayRef shape, c10::ScalarType dtype,
                                    c10::Device device,
                                    std::initializer_list<const at::Tensor*> inputs) {
  const std::vector<int64_t> strides = elementwise_strides(shape, inputs);
  return strides.empty() ? empty_device(shape, dtype, device)
                         : empty_device_strided(shape, strides, dtype, device);
}

// Dense strides of `format` for `shape` (channels-last for 4-d, channels-last-3d for 5-d),
// or an empty vector for a contiguous layout.
inline std::vector<int64_t> memory_format_strides(at::IntArrayRef shape, at::MemoryFormat format) {
  if (format == at::MemoryFormat::ChannelsLast && shape.size() == 4)
    return c10::get_channels_last_strides_2d(shape);
  if (format == at::MemoryFormat::ChannelsLast3d && shape.size() == 5)
    return c10::get_channels_last_strides_3d(shape);
  return {};
}

// A fresh device tensor laid out in `format` (pooling and cat results follow their
// inputs' suggested format, as the CPU's kernels allocate them).
inline at::Tensor empty_in_format(at::IntArrayRef shape, c10::ScalarType dtype, c10::Device device,
                                  at::MemoryFormat format) {
  const std::vector<int64_t> strides = memory_format_strides(shape, format);
  return strides.empty() ? empty_device(shape, dtype, device)
                         : empty_device_strided(shape, strides, dtype, device);
}

// Resizes an elementwise op's out= as TensorIterator does: an out that must be resized
// takes the layout a fresh result would have (above); one of the right size keeps its own.
inline void resize_elementwise_out(const at::Tensor& out, at::IntArrayRef shape,
                                   std::initializer_list<const at::Tensor*> inputs) {
  if (!at::native::resize_output(out, shape)) return;
  const std::vector<int64_t> strides = elementwise_strides(shape, inputs);
  if (!strides.empty()) out.as_strided_(shape, strides);
}

}  // namespace openneuron::bridge
