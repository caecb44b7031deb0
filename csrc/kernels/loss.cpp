// Loss engines with PyTorch's semantics and formulas.
//
// nll_loss forward/backward (LossNLL.cpp): weight optional, ignore_index
// skipped before the bounds check, total_weight = sum of the weights of the
// counted targets (their count without weight), reduction none on 2-d input
// gives per-sample losses and total_weight 0.
//
// Pointwise losses (ATen/native/Loss.cpp, BinaryOps): mse, l1, smooth_l1
// (beta), huber (delta), binary cross entropy (weight optional, logs clamped
// at -100). Reductions accumulate in double per chunk.
#include <algorithm>
#include <cmath>
#include <limits>

#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {

// ------------------------------------------------------------ nll_loss

namespace detail {
namespace {

inline int64_t target_at(const TensorArg& ta, const char* base, int64_t i) {
  const int64_t st = ta.type.ndim ? ta.type.strides[0] : 0;
  if (ta.type.dtype == DType::Int32) return reinterpret_cast<const int32_t*>(base)[i * st];
  return reinterpret_cast<const int64_t*>(base)[i * st];
}

// The [N, C] (or [C]) layout of nll_loss's self or grad_in, in elements:
// row stride rs (0 for 1-d), class stride cs, and the weight's stride ws.
struct NllLayout {
  int64_t C, cs, N, rs, ws;
};
NllLayout nll_layout(const TensorType& t, const NllLossParams& p, bool weighted) {
  return {t.sizes[t.ndim - 1], t.strides[t.ndim - 1], t.ndim == 2 ? t.sizes[0] : 1,
          t.ndim == 2 ? t.strides[0] : 0, weighted ? p.weight.type.strides[0] : 0};
}

template <class T>
int nll_loss_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NllLossParams*>(params);
  const TensorType& st = p.self.type;
  const char* self = p.self.resolve(args);
  const char* target = p.target.resolve(args);
  const char* weight = p.weight.present() ? p.weight.resolve(args) : nullptr;
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  T* tw = reinterpret_cast<T*>(p.total_weight.resolve(args));
  const auto [C, cs, N, rs, ws] = nll_layout(st, p, weight != nullptr);
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
int nll_loss_backward_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NllLossParams*>(params);
  const TensorType& gt = p.grad_in.type;
  const char* target = p.target.resolve(args);
  const char* weight = p.weight.present() ? p.weight.resolve(args) : nullptr;
  const T* go = reinterpret_cast<const T*>(p.grad_out.resolve(args));
  T* gi = reinterpret_cast<T*>(p.grad_in.resolve(args));
  const auto [C, cs, N, rs, ws] = nll_layout(gt, p, weight != nullptr);
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
    if constexpr (is_float3_v<T>) return &nll_loss_entry<T>;
    else return nullptr;
  });
}

onrt_kernel_fn nll_loss_backward_kernel(DType self) {
  using namespace detail;
  return visit(self, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return &nll_loss_backward_entry<T>;
    else return nullptr;
  });
}

// ------------------------------------------------------------ pointwise losses

namespace detail {
namespace {

template <LossKind k>
ON_INLINE double loss_value(double x, double t, double param) {
  const double d = x - t;
  switch (k) {
    case LossKind::Mse: return d * d;
    case LossKind::L1: return std::fabs(d);
    case LossKind::SmoothL1: {
      const double z = std::fabs(d);
      if (param == 0) return z;
      return z < param ? 0.5 * z * z / param : z - 0.5 * param;
    }
    case LossKind::Huber: {
      const double z = std::fabs(d);
      return z < param ? 0.5 * z * z : param * (z - 0.5 * param);
    }
    case LossKind::BinaryCrossEntropy:
      return (t - 1) * std::max(std::log1p(-x), -100.0) - t * std::max(std::log(x), -100.0);
  }
  return 0;
}

// d loss / d x, before the reduction norm.
template <LossKind k>
ON_INLINE double loss_grad(double x, double t, double param) {
  const double d = x - t;
  switch (k) {
    case LossKind::Mse: return 2 * d;
    case LossKind::L1: return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
    case LossKind::SmoothL1:
      if (param == 0) return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
      return d < -param ? -1.0 : d > param ? 1.0 : d / param;
    case LossKind::Huber: return d < -param ? -param : d > param ? param : d;
    case LossKind::BinaryCrossEntropy:
      return (x - t) / std::max((1 - x) * x, 1e-12);
  }
  return 0;
}

// The kind is a template parameter so each loop is one straight formula that
// GCC vectorises (both arms of a branch computed and selected: this file is
// built with -fno-trapping-math). Sums run in 16 independent double lanes.
template <LossKind K, class T>
int forward_kind(const PointwiseLossParams& p, const onrt_arg* args, char* err, size_t errlen) {
  const int64_t n = p.numel;
  const T* x = reinterpret_cast<const T*>(p.self.resolve(args));
  const T* t = reinterpret_cast<const T*>(p.target.resolve(args));
  const T* w = p.weight.present() ? reinterpret_cast<const T*>(p.weight.resolve(args)) : nullptr;
  T* out = reinterpret_cast<T*>(p.out.resolve(args));
  const double param = p.param.as_double(args);
  if constexpr (K == LossKind::BinaryCrossEntropy) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = load(x + i);
      if (!(v >= 0 && v <= 1))
        return fail(err, errlen, "all elements of input should be between 0 and 1");
    }
  }
  auto elem = [&](int64_t i) {
    double v = loss_value<K>(load(x + i), load(t + i), param);
    if (w) v *= static_cast<double>(load(w + i));
    return v;
  };
  if (p.reduction == 0) {
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) store(out + i, static_cast<float>(elem(i)));
    };
    parallel_for(n, kGrain, body);
    return 0;
  }
  constexpr int64_t kMaxChunks = 64;
  constexpr int L = 16;
  const int64_t chunks = std::min<int64_t>(std::max<int64_t>(n / kGrain, 1), kMaxChunks);
  double part[kMaxChunks] = {};
  auto body = [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double lanes[L] = {};
      int64_t i = c * n / chunks;
      const int64_t e = (c + 1) * n / chunks;
      for (; i + L <= e; i += L)
        for (int l = 0; l < L; ++l) lanes[l] += elem(i + l);
      for (; i < e; ++i) lanes[0] += elem(i);
      for (int h = L / 2; h > 0; h /= 2)
        for (int l = 0; l < h; ++l) lanes[l] += lanes[l + h];
      part[c] = lanes[0];
    }
  };
  parallel_for(chunks, 1, body);
  double s = 0;
  for (int64_t c = 0; c < chunks; ++c) s += part[c];
  if (p.reduction == 1) s = n == 0 ? std::nan("") : s / static_cast<double>(n);
  store(out, static_cast<float>(s));
  return 0;
}

template <LossKind K, class T>
int backward_kind(const PointwiseLossParams& p, const onrt_arg* args) {
  const int64_t n = p.numel;
  const T* x = reinterpret_cast<const T*>(p.self.resolve(args));
  const T* t = reinterpret_cast<const T*>(p.target.resolve(args));
  const T* w = p.weight.present() ? reinterpret_cast<const T*>(p.weight.resolve(args)) : nullptr;
  const T* go = reinterpret_cast<const T*>(p.grad_out.resolve(args));
  T* gi = reinterpret_cast<T*>(p.grad_in.resolve(args));
  const double param = p.param.as_double(args);
  const bool per_elem = p.reduction == 0;
  const double norm = p.reduction == 1 ? 1.0 / static_cast<double>(n) : 1.0;
  const double g0 = per_elem ? 0.0 : static_cast<double>(load(go));
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double g = per_elem ? static_cast<double>(load(go + i)) : g0;
      double v = loss_grad<K>(load(x + i), load(t + i), param) * norm * g;
      if (w) v *= static_cast<double>(load(w + i));
      store(gi + i, static_cast<float>(v));
    }
  };
  parallel_for(n, kGrain, body);
  return 0;
}

template <class T>
int pointwise_loss_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const PointwiseLossParams*>(params);
  switch (p.kind) {
    case LossKind::Mse: return forward_kind<LossKind::Mse, T>(p, args, err, errlen);
    case LossKind::L1: return forward_kind<LossKind::L1, T>(p, args, err, errlen);
    case LossKind::SmoothL1: return forward_kind<LossKind::SmoothL1, T>(p, args, err, errlen);
    case LossKind::Huber: return forward_kind<LossKind::Huber, T>(p, args, err, errlen);
    case LossKind::BinaryCrossEntropy:
      return forward_kind<LossKind::BinaryCrossEntropy, T>(p, args, err, errlen);
  }
  return fail(err, errlen, "unknown pointwise loss kind");
}

template <class T>
int pointwise_loss_backward_entry(const void* params, const onrt_arg* args, char* err,
                                  size_t errlen) {
  const auto& p = *static_cast<const PointwiseLossParams*>(params);
  switch (p.kind) {
    case LossKind::Mse: return backward_kind<LossKind::Mse, T>(p, args);
    case LossKind::L1: return backward_kind<LossKind::L1, T>(p, args);
    case LossKind::SmoothL1: return backward_kind<LossKind::SmoothL1, T>(p, args);
    case LossKind::Huber: return backward_kind<LossKind::Huber, T>(p, args);
    case LossKind::BinaryCrossEntropy: return backward_kind<LossKind::BinaryCrossEntropy, T>(p, args);
  }
  return fail(err, errlen, "unknown pointwise loss kind");
}

}  // namespace
}  // namespace detail

onrt_kernel_fn pointwise_loss_kernel(DType dtype, bool backward) {
  using namespace detail;
  return visit(dtype, [backward](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>)
      return backward ? &pointwise_loss_backward_entry<T> : &pointwise_loss_entry<T>;
    else
      return nullptr;
  });
}

}  // namespace openneuron::kernels
