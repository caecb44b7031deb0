// Copy/convert and fill: the data movement engine.
#include "internal.h"

namespace openneuron::kernels {
namespace detail {
namespace {

template <class C>
struct Identity {
  C operator()(C v) const { return v; }
};

// Same dtype: move bits (NaN payloads of narrow floats survive).
template <size_t S>
int copy_raw(const void* params, const onrt_arg* args, char*, size_t) {
  using U = typename raw_bits<S>::type;
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  const LoopPlan& pl = p.plan;
  if (pl.numel <= 0) return 0;
  char* dst = static_cast<char*>(args[p.ops[0].slot].ptr) + p.ops[0].byte_offset;
  const char* src = static_cast<char*>(args[p.ops[1].slot].ptr) + p.ops[1].byte_offset;
  if (pl.ndim == 1 && pl.strides[0][0] == S && pl.strides[1][0] == S) {
    if (dst == src) return 0;
    auto body = [&](int64_t b, int64_t e) { std::memmove(dst + b * S, src + b * S, (e - b) * S); };
    parallel_for(pl.numel, kGrain * 8, body);
    return 0;
  }
  Elementwise<U, Identity<U>, U>::run(p, args, {U{}}, Identity<U>{});
  return 0;
}

template <class OutT, class InT>
int copy_convert(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<InT>;
  Elementwise<OutT, Identity<C>, InT>::run(p, args, {C{}}, Identity<C>{});
  return 0;
}

template <class OutT>
int fill(const void* params, const onrt_arg* args, char*, size_t) {
  const auto& p = *static_cast<const ElementwiseParams*>(params);
  using C = compute_t<OutT>;
  // The scalar is converted once, like c10's Scalar::to<T>().
  const C v = scalar_in<C>(p, 0, args);
  Elementwise<OutT, Identity<C>, OutT>::run(p, args, {v}, Identity<C>{});
  return 0;
}

template <class T>
inline constexpr bool copyable_v = is_real9_v<T> || is_fp8_v<T>;

}  // namespace
}  // namespace detail

onrt_kernel_fn copy_kernel(DType out, DType in) {
  using namespace detail;
  if (out == in) {
    if (out == DType::Float64) return nullptr;
    switch (dtype_size(out)) {
      case 1: return &copy_raw<1>;
      case 2: return &copy_raw<2>;
      case 4: return &copy_raw<4>;
      case 8: return &copy_raw<8>;
      default: return nullptr;
    }
  }
  return visit(out, [&](auto to) -> onrt_kernel_fn {
    using O = typename decltype(to)::type;
    if constexpr (!copyable_v<O>) {
      return nullptr;
    } else {
      return visit(in, [&](auto from) -> onrt_kernel_fn {
        using I = typename decltype(from)::type;
        if constexpr (!copyable_v<I>) return nullptr;
        else return &copy_convert<O, I>;
      });
    }
  });
}

onrt_kernel_fn fill_kernel(DType out) {
  using namespace detail;
  return visit(out, [&](auto to) -> onrt_kernel_fn {
    using O = typename decltype(to)::type;
    if constexpr (!copyable_v<O>) return nullptr;
    else return &fill<O>;
  });
}

}  // namespace openneuron::kernels
