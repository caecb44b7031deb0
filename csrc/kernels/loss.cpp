// nll_loss forward/backward with PyTorch's semantics (LossNLL.cpp): weight
// optional, ignore_index skipped before the bounds check, total_weight = sum
// of the weights of the counted targets (their count without weight),
// reduction none on 2-d input gives per-sample losses and total_weight 0.
#include <limits>

#include "internal.h"

namespace openneuron::kernels {
namespace detail {
namespace {

inline int64_t target_at(const TensorArg& ta, const char* base, int64_t i) {
  const int64_t st = ta.type.ndim ? ta.type.strides[0] : 0;
  if (ta.type.dtype == DType::Int32) return reinterpret_cast<const int32_t*>(base)[i * st];
  return reinterpret_cast<const int64_t*>(base)[i * st];
}

template <class T>
int nll_forward(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NllLossParams*>(params);
  const TensorType& st = p.self.type;
  const char* self = p.self.resolve(args);
  const char* target = p.target.resolve(args);
  const char* weight = p.weight.present() ? p.weight.resolve(args) : nullptr;
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  T* tw = reinterpret_cast<T*>(p.total_weight.resolve(args));
  const int64_t C = st.sizes[st.ndim - 1];
  const int64_t cs = st.strides[st.ndim - 1];
  const int64_t N = st.ndim == 2 ? st.sizes[0] : 1;
  const int64_t rs = st.ndim == 2 ? st.strides[0] : 0;
  const int64_t ws = weight ? p.weight.type.strides[0] : 0;
  auto x_at = [&](int64_t i, int64_t t) {
    return static_cast<double>(load(reinterpret_cast<const T*>(self) + i * rs + t * cs));
  };
  auto w_at = [&](int64_t t) {
    return static_cast<double>(load(reinterpret_cast<const T*>(weight) + t * ws));
  };
  if (p.reduction == 0 && st.ndim == 2) {
    const int64_t os = p.out.type.strides[0];
    for (int64_t i = 0; i < N; ++i) {
      const int64_t t = target_at(p.target, target, i);
      if (t == p.ignore_index) {
        store_cvt(out + i * os, 0.0f);
        continue;
      }
      if (t < 0 || t >= C) return fail(err, errlen, "Target %lld is out of bounds.", static_cast<long long>(t));
      const double w = weight ? w_at(t) : 1.0;
      store_cvt(out + i * os, static_cast<float>(-x_at(i, t) * w));
    }
    store_cvt(tw, 0.0f);
    return 0;
  }
  if (N == 0) {
    store_cvt(out, p.reduction == 1 ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
    store_cvt(tw, 0.0f);
    return 0;
  }
  double loss = 0, wsum = 0;
  int64_t ignored = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = target_at(p.target, target, i);
    if (t == p.ignore_index) {
      ++ignored;
      continue;
    }
    if (t < 0 || t >= C) return fail(err, errlen, "Target %lld is out of bounds.", static_cast<long long>(t));
    if (weight) {
      const double w = w_at(t);
      loss -= x_at(i, t) * w;
      wsum += w;
    } else {
      loss -= x_at(i, t);
    }
  }
  const double total = weight ? wsum : static_cast<double>(N - ignored);
  if (p.reduction == 1) loss /= total;
  store_cvt(out, static_cast<float>(loss));
  store_cvt(tw, static_cast<float>(total));
  return 0;
}

template <class T>
int nll_backward(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NllLossParams*>(params);
  const TensorType& gt = p.grad_in.type;
  const char* target = p.target.resolve(args);
  const char* weight = p.weight.present() ? p.weight.resolve(args) : nullptr;
  const T* go = reinterpret_cast<const T*>(p.grad_out.resolve(args));
  T* gi = reinterpret_cast<T*>(p.grad_in.resolve(args));
  const int64_t C = gt.sizes[gt.ndim - 1];
  const int64_t cs = gt.strides[gt.ndim - 1];
  const int64_t N = gt.ndim == 2 ? gt.sizes[0] : 1;
  const int64_t rs = gt.ndim == 2 ? gt.strides[0] : 0;
  const int64_t ws = weight ? p.weight.type.strides[0] : 0;
  auto w_at = [&](int64_t t) { return load(reinterpret_cast<const T*>(weight) + t * ws); };
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < C; ++j) store_cvt(gi + i * rs + j * cs, 0.0f);
  if (p.reduction == 0 && gt.ndim == 2) {
    const int64_t gs = p.grad_out.type.ndim ? p.grad_out.type.strides[0] : 0;
    for (int64_t i = 0; i < N; ++i) {
      const int64_t t = target_at(p.target, target, i);
      if (t == p.ignore_index) continue;
      if (t < 0 || t >= C) return fail(err, errlen, "Target %lld is out of bounds.", static_cast<long long>(t));
      const float w = weight ? static_cast<float>(w_at(t)) : 1.0f;
      store_cvt(gi + i * rs + t * cs, -w * static_cast<float>(load(go + i * gs)));
    }
    return 0;
  }
  const float g = load(go);
  const float total = load(reinterpret_cast<const T*>(p.total_weight.resolve(args)));
  const float grad = -(p.reduction == 1 ? g / total : g);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = target_at(p.target, target, i);
    if (t == p.ignore_index) continue;
    if (t < 0 || t >= C) return fail(err, errlen, "Target %lld is out of bounds.", static_cast<long long>(t));
    store_cvt(gi + i * rs + t * cs, weight ? static_cast<float>(w_at(t)) * grad : grad);
  }
  return 0;
}

}  // namespace
}  // namespace detail

onrt_kernel_fn nll_loss_kernel(DType self) {
  using namespace detail;
  return visit(self, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return &nll_forward<T>;
    else return nullptr;
  });
}

onrt_kernel_fn nll_loss_backward_kernel(DType self) {
  using namespace detail;
  return visit(self, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return &nll_backward<T>;
    else return nullptr;
  });
}

}  // namespace openneuron::kernels
