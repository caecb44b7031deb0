// The optim family's engines: fused Adam/AdamW and SGD steps over one
// parameter tensor (one instruction per parameter; a whole param group is one
// program), and NormAll, the full-tensor p-norm of gradient clipping
// (_foreach_norm).
//
// Numerics follow PyTorch's CPU fused kernels (ATen/native/cpu/FusedAdamKernel,
// FusedSGDKernel): bias corrections in double, element math in float (the
// compute type of half params), step read from the device step tensor.
// sqrt without errno handling, so the element loops vectorise (results are
// identical: sqrt is exactly rounded either way).
#pragma GCC optimize("no-math-errno")

#include <cmath>
#include <limits>
#include <vector>

#include "error.h"
#include "openneuron/kernels/kernels.h"
#include "parallel.h"
#include "storage.h"

namespace openneuron::kernels {
namespace detail {
namespace {

inline float read1(const TensorArg& t, const onrt_arg* args) {
  return visit(t.type.dtype, [&](auto tg) -> float {
    using T = typename decltype(tg)::type;
    if constexpr (is_real9_v<T>) {
      return static_cast<float>(load(reinterpret_cast<const T*>(t.resolve(args))));
    } else {
      return std::numeric_limits<float>::quiet_NaN();
    }
  });
}

// A step that changes nothing: the grad scaler found an inf or NaN, or the
// parameter is empty.
bool skip_step(const FusedOptimParams& p, const onrt_arg* args) {
  return (p.found_inf.present() && read1(p.found_inf, args) == 1.0f) || p.numel == 0;
}

template <class T>
T* ptr_or(const TensorArg& t, const onrt_arg* args) {
  return t.present() ? reinterpret_cast<T*>(t.resolve(args)) : nullptr;
}

template <class T, bool kAmsgrad, bool kMaximize, bool kAdamW, bool kScale>
void adam_loop(const FusedOptimParams& p, const onrt_arg* args, float lr, float step_size,
               float bc2_sqrt, float grad_scale) {
  const T* param = ptr_or<T>(p.param, args);
  const T* grad = ptr_or<T>(p.grad, args);
  const T* m_in = ptr_or<T>(p.exp_avg, args);
  const T* v_in = ptr_or<T>(p.exp_avg_sq, args);
  const T* vmax_in = ptr_or<T>(p.max_exp_avg_sq, args);
  T* param_out = ptr_or<T>(p.out_param, args);
  T* grad_out = ptr_or<T>(p.out_grad, args);
  T* m_out = ptr_or<T>(p.out_exp_avg, args);
  T* v_out = ptr_or<T>(p.out_exp_avg_sq, args);
  T* vmax_out = ptr_or<T>(p.out_max_exp_avg_sq, args);
  const float beta1 = static_cast<float>(p.beta1.as_double(args));
  const float beta2 = static_cast<float>(p.beta2.as_double(args));
  const double wd_d = p.weight_decay.as_double(args);
  const float wd = static_cast<float>(wd_d);
  const float eps = static_cast<float>(p.eps.as_double(args));
  const float c1 = static_cast<float>(1.0 - p.beta1.as_double(args));
  const float c2 = static_cast<float>(1.0 - p.beta2.as_double(args));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd_d);
  const bool has_wd = wd_d != 0.0;
  auto body = [&](int64_t b, int64_t e) {
#pragma GCC ivdep
    for (int64_t i = b; i < e; ++i) {
      float g = load(grad + i);
      if constexpr (kScale) {
        g = g / grad_scale;
        store(grad_out + i, g);
      }
      if constexpr (kMaximize) g = -g;
      float x = load(param + i);
      if (has_wd) {
        if constexpr (kAdamW) x = x * decay;
        else g = g + x * wd;
      }
      const float m = load(m_in + i) * beta1 + g * c1;
      const float v = load(v_in + i) * beta2 + g * g * c2;
      store(m_out + i, m);
      store(v_out + i, v);
      float denom;
      if constexpr (kAmsgrad) {
        const float vm = std::max(static_cast<float>(load(vmax_in + i)), v);
        store(vmax_out + i, vm);
        denom = std::sqrt(vm) / bc2_sqrt + eps;
      } else {
        denom = std::sqrt(v) / bc2_sqrt + eps;
      }
      store(param_out + i, x - step_size * m / denom);
    }
  };
  parallel_for(p.numel, kGrain, body);
}

template <class T>
int fused_adam_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const FusedOptimParams*>(params);
  if (skip_step(p, args)) return 0;
  const double lr = p.lr_tensor.present() ? static_cast<double>(read1(p.lr_tensor, args))
                                          : p.lr.as_double(args);
  const double step = static_cast<double>(read1(p.step, args));
  const double beta1 = p.beta1.as_double(args), beta2 = p.beta2.as_double(args);
  const double bc1 = 1.0 - std::pow(beta1, step);
  const double bc2 = 1.0 - std::pow(beta2, step);
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const bool scale = p.grad_scale.present();
  const float gs = scale ? read1(p.grad_scale, args) : 1.0f;
  const bool ams = p.flags & 1, maxi = p.flags & 2, adamw = p.flags & 4;
  const float lrf = static_cast<float>(lr);
  // 16 specialisations: flags are loop-invariant and must not cost per element.
#define ON_ADAM(A, M, W, S) \
  if (ams == A && maxi == M && adamw == W && scale == S) \
    return adam_loop<T, A, M, W, S>(p, args, lrf, step_size, bc2_sqrt, gs), 0;
#define ON_ADAM_S(A, M, W) ON_ADAM(A, M, W, false) ON_ADAM(A, M, W, true)
#define ON_ADAM_W(A, M) ON_ADAM_S(A, M, false) ON_ADAM_S(A, M, true)
  ON_ADAM_W(false, false) ON_ADAM_W(false, true) ON_ADAM_W(true, false) ON_ADAM_W(true, true)
#undef ON_ADAM_W
#undef ON_ADAM_S
#undef ON_ADAM
  return fail(err, errlen, "fused adam: bad flags");
}

template <class T>
int fused_sgd_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const FusedOptimParams*>(params);
  if (skip_step(p, args)) return 0;
  const float lr = p.lr_tensor.present() ? read1(p.lr_tensor, args)
                                         : static_cast<float>(p.lr.as_double(args));
  const float wd = static_cast<float>(p.weight_decay.as_double(args));
  const float momentum = static_cast<float>(p.beta1.as_double(args));
  const float dampening = static_cast<float>(p.beta2.as_double(args));
  const float c_grad = static_cast<float>(1.0 - p.beta2.as_double(args));
  const bool nesterov = p.flags & 1, maxi = p.flags & 2, first = p.flags & 4;
  const bool scale = p.grad_scale.present();
  const float gs = scale ? read1(p.grad_scale, args) : 1.0f;
  const bool has_buf = p.exp_avg.present() && momentum != 0.0f;
  (void)dampening;
  const T* param = ptr_or<T>(p.param, args);
  const T* grad = ptr_or<T>(p.grad, args);
  const T* buf_in = ptr_or<T>(p.exp_avg, args);
  T* param_out = ptr_or<T>(p.out_param, args);
  T* grad_out = ptr_or<T>(p.out_grad, args);
  T* buf_out = ptr_or<T>(p.out_exp_avg, args);
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float g = load(grad + i);
      if (scale) {
        g = g / gs;
        store(grad_out + i, g);
      }
      if (maxi) g = -g;
      const float x = load(param + i);
      if (wd != 0.0f) g = g + x * wd;
      if (has_buf) {
        float bv;
        if (first) bv = g;
        else bv = load(buf_in + i) * momentum + g * c_grad;
        store(buf_out + i, bv);
        g = nesterov ? g + bv * momentum : bv;
      }
      store(param_out + i, x - lr * g);
    }
  };
  parallel_for(p.numel, kGrain, body);
  return 0;
}

template <class T>
int norm_all_entry(const void* params, const onrt_arg* args, char* err, size_t errlen) {
  const auto& p = *static_cast<const NormAllParams*>(params);
  const int64_t n = p.in.type.numel();
  const T* x = reinterpret_cast<const T*>(p.in.resolve(args));
  const double ord = p.ord.as_double(args);
  enum Kind { Two, One, Inf, NegInf, Zero, P } kind;
  if (ord == 2.0) kind = Two;
  else if (ord == 1.0) kind = One;
  else if (std::isinf(ord)) kind = ord > 0 ? Inf : NegInf;
  else if (ord == 0.0) kind = Zero;
  else kind = P;
  const int64_t chunks_max = 64;
  const int64_t grain = kGrain;
  int64_t chunks = std::min<int64_t>(std::max<int64_t>(n / grain, 1), chunks_max);
  double part[chunks_max];
  auto chunk = [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t b = c * n / chunks, e = (c + 1) * n / chunks;
      double acc = kind == NegInf ? std::numeric_limits<double>::infinity() : 0.0;
      switch (kind) {
        case Two: {
          // Float lanes accumulate in float blocks, combined in double: fast and
          // more accurate than PyTorch's float cascade.
          // 16 independent float lanes (vectorisable without reassociation),
          // flushed to double every block.
          constexpr int L = 16;
          int64_t i = b;
          for (; i + L <= e;) {
            const int64_t ie = std::min(e - (e - i) % L, i + 2048);
            float lane[L] = {};
            for (; i < ie; i += L)
              for (int l = 0; l < L; ++l) {
                const float v = load(x + i + l);
                lane[l] += v * v;
              }
            for (int l = 0; l < L; ++l) acc += lane[l];
          }
          for (; i < e; ++i) {
            const double v = load(x + i);
            acc += v * v;
          }
          break;
        }
        case One:
          for (int64_t i = b; i < e; ++i) acc += std::fabs(static_cast<double>(load(x + i)));
          break;
        case Inf:
          for (int64_t i = b; i < e; ++i) {
            const double v = std::fabs(static_cast<double>(load(x + i)));
            acc = (v > acc || std::isnan(v)) ? v : acc;
          }
          break;
        case NegInf:
          for (int64_t i = b; i < e; ++i) {
            const double v = std::fabs(static_cast<double>(load(x + i)));
            acc = (v < acc || std::isnan(v)) ? v : acc;
          }
          break;
        case Zero:
          for (int64_t i = b; i < e; ++i) acc += load(x + i) != 0 ? 1.0 : 0.0;
          break;
        case P:
          for (int64_t i = b; i < e; ++i)
            acc += std::pow(std::fabs(static_cast<double>(load(x + i))), ord);
          break;
      }
      part[c] = acc;
    }
  };
  if (n == 0) {
    chunks = 0;
  } else {
    parallel_for(chunks, 1, chunk);
  }
  double r = kind == NegInf ? std::numeric_limits<double>::infinity() : 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    if (kind == Inf) r = (part[c] > r || std::isnan(part[c])) ? part[c] : r;
    else if (kind == NegInf) r = (part[c] < r || std::isnan(part[c])) ? part[c] : r;
    else r += part[c];
  }
  if (kind == Two) r = std::sqrt(r);
  else if (kind == P) r = std::pow(r, 1.0 / ord);
  if (n == 0 && kind == NegInf)
    return fail(err, errlen,
                "linalg.vector_norm cannot compute the -inf norm on an empty tensor because "
                "the operation does not have an identity");
  char* out = p.out.resolve(args);
  return visit(p.out.type.dtype, [&](auto tg) -> int {
    using O = typename decltype(tg)::type;
    if constexpr (is_float3_v<O>) {
      store(reinterpret_cast<O*>(out), static_cast<float>(r));
      return 0;
    } else {
      return fail(err, errlen, "norm: bad output dtype");
    }
  });
}

template <template <class> class Entry>
onrt_kernel_fn pick_float(DType d) {
  return visit(d, [](auto t) -> onrt_kernel_fn {
    using T = typename decltype(t)::type;
    if constexpr (is_float3_v<T>) return Entry<T>::fn;
    else return nullptr;
  });
}

template <class T> struct AdamE { static constexpr onrt_kernel_fn fn = &fused_adam_entry<T>; };
template <class T> struct SgdE { static constexpr onrt_kernel_fn fn = &fused_sgd_entry<T>; };
template <class T> struct NormE { static constexpr onrt_kernel_fn fn = &norm_all_entry<T>; };

}  // namespace
}  // namespace detail

onrt_kernel_fn fused_adam_kernel(DType param) { return detail::pick_float<detail::AdamE>(param); }
onrt_kernel_fn fused_sgd_kernel(DType param) { return detail::pick_float<detail::SgdE>(param); }
onrt_kernel_fn norm_all_kernel(DType out, DType in) {
  if (!is_floating(out) || out == DType::Float64 || out == DType::Float8E4M3 ||
      out == DType::Float8E5M2)
    return nullptr;
  return detail::pick_float<detail::NormE>(in);
}

}  // namespace openneuron::kernels
